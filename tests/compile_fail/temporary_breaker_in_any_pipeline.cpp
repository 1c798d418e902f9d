// expect: must outlive the pipeline
// strategy: circuit_breaker
// The same mistake in a pipeline built at run time.
#include <resilience/any_pipeline.hpp>
#include <resilience/circuit_breaker.hpp>

void build() {
  resilience::any_pipeline<int> call;
#ifdef RESILIENCE_MISUSE
  call.add(resilience::circuit_breaker{});
#else
  static resilience::circuit_breaker breaker;
  call.add(std::ref(breaker));
#endif
}
