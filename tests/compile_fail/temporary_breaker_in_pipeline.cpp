// expect: must outlive the pipeline
// strategy: circuit_breaker
// A pipeline references a stage that cannot be copied: a temporary breaker
// would be destroyed before the first call.
#include <resilience/circuit_breaker.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>

void build() {
#ifdef RESILIENCE_MISUSE
  const auto call = resilience::pipeline(resilience::retry_policy{}, resilience::circuit_breaker{});
#else
  static resilience::circuit_breaker breaker;
  const auto call = resilience::pipeline(resilience::retry_policy{}, breaker);
#endif
  (void)call;
}
