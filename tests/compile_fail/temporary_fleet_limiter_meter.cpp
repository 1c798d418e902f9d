// expect: deleted
// A fleet-wide limiter's meter refers to its registry's counters: a
// temporary registry would be gone before the first event.
#include <resilience/redis/limiter_meter.hpp>

void build() {
#ifdef RESILIENCE_MISUSE
  const auto options = resilience::redis::fleet_limiter_options{}.key("quota").on_event(
      resilience::redis::limiter_meter(resilience::metrics{}, "quota"));
#else
  static resilience::metrics telemetry;
  const auto options = resilience::redis::fleet_limiter_options{}.key("quota").on_event(
      resilience::redis::limiter_meter(telemetry, "quota"));
#endif
  (void)options;
}
