// expect: use of deleted function .*resilience::basic_retry_policy<.*>::wait_out_open_circuit\(const Breaker&&\) const
// expect: call to deleted member function 'wait_out_open_circuit'[\s\S]*?resilience/retry\.hpp:[0-9:]+ note: candidate function.* has been explicitly deleted
// strategy: circuit_breaker, retry
// A retry policy refers to the breaker it waits out: not to a temporary.
#include <resilience/circuit_breaker.hpp>
#include <resilience/retry.hpp>

void build() {
#ifdef RESILIENCE_MISUSE
  const auto policy = resilience::retry_policy{}.wait_out_open_circuit(resilience::circuit_breaker{});
#else
  static resilience::circuit_breaker breaker;
  const auto policy = resilience::retry_policy{}.wait_out_open_circuit(breaker);
#endif
  (void)policy;
}
