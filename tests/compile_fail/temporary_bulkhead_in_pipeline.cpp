// expect: must outlive the pipeline
// strategy: bulkhead
// A bulkhead is shared state: a pipeline refers to it, so a temporary one
// would be gone before the first call.
#include <resilience/bulkhead.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/timeout.hpp>

#include <chrono>

void build() {
  using namespace std::chrono_literals;
#ifdef RESILIENCE_MISUSE
  const auto call = resilience::pipeline(resilience::bulkhead{}, resilience::timeout(1s));
#else
  static resilience::bulkhead pool;
  const auto call = resilience::pipeline(pool, resilience::timeout(1s));
#endif
  (void)call;
}
