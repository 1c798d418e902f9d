// expect: must outlive the pipeline
// strategy: rate_limiter
// A rate limiter is shared state: a pipeline refers to it, so a temporary
// one would be gone before the first call.
#include <resilience/pipeline.hpp>
#include <resilience/rate_limiter.hpp>
#include <resilience/timeout.hpp>

#include <chrono>

void build() {
  using namespace std::chrono_literals;
#ifdef RESILIENCE_MISUSE
  const auto call = resilience::pipeline(resilience::rate_limiter{}, resilience::timeout(1s));
#else
  static resilience::rate_limiter limiter;
  const auto call = resilience::pipeline(limiter, resilience::timeout(1s));
#endif
  (void)call;
}
