// expect: use of deleted function .*resilience::basic_retry_policy<.*>::budget\(B&&\) const requires !\(is_lvalue_reference_v<B>\)
// expect: call to deleted member function 'budget'[\s\S]*?resilience/retry\.hpp:[0-9:]+ note: candidate function.* has been explicitly deleted
// strategy: retry
// A policy refers to its retry budget, shared by every call: not to a
// temporary, which would be gone before the first retry.
#include <resilience/retry.hpp>
#include <resilience/retry_budget.hpp>

void build() {
#ifdef RESILIENCE_MISUSE
  const auto policy = resilience::retry_policy{}.budget(resilience::retry_token_budget{10, 0.1});
#else
  static resilience::retry_token_budget throttle{10, 0.1};
  const auto policy = resilience::retry_policy{}.budget(throttle);
#endif
  (void)policy;
}
