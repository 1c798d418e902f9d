// expect: must outlive the pipeline
// strategy: adaptive_throttle
// An adaptive throttle is shared state: a pipeline refers to it, so a
// temporary one would be gone before the first call.
#include <resilience/adaptive_throttle.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/timeout.hpp>

#include <chrono>

void build() {
  using namespace std::chrono_literals;
#ifdef RESILIENCE_MISUSE
  const auto call = resilience::pipeline(resilience::adaptive_throttle{}, resilience::timeout(1s));
#else
  static resilience::adaptive_throttle throttle;
  const auto call = resilience::pipeline(throttle, resilience::timeout(1s));
#endif
  (void)call;
}
