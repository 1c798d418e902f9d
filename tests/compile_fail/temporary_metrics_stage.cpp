// expect: use of deleted function .*resilience::metrics::stage\(std::string_view\) &&
// expect: call to deleted member function 'stage'[\s\S]*?resilience/metrics\.hpp:[0-9:]+ note: candidate function.* has been explicitly deleted
// strategy: retry
// A metered stage and the event hooks refer to their registry's counters: a
// temporary registry would be gone before the first call.
#include <resilience/metrics.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/timeout.hpp>

#include <chrono>

void build() {
  using namespace std::chrono_literals;
#ifdef RESILIENCE_MISUSE
  const auto call = resilience::pipeline(resilience::metrics{}.stage("backend"), resilience::timeout(1s));
#else
  static resilience::metrics telemetry;
  const auto call = resilience::pipeline(telemetry.stage("backend"), resilience::timeout(1s));
#endif
  (void)call;
}
