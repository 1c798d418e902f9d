// resilience/redis/limiter_meter.hpp — a fleet-wide limiter's events in the
// metrics registry.
//
//   resilience::metrics telemetry;
//   redis::fleet_limiter quota{ex, connection,
//                             redis::fleet_limiter_options{}.key("mail")
//                                 .on_event(redis::limiter_meter(telemetry, "mail"))};
//
// Records, labelled limiter.name:
//   resilience.fleet_limiter.events    counter, event.name: on_fell_back,
//                                      on_resumed, on_round_trip_failed, on_rejected
//   resilience.fleet_limiter.fallback  gauge: 1 while the fallback decides
// Made under the registry's lock; recording is one relaxed atomic operation.
// The registry must outlive the meter.
#pragma once

#include <resilience/metrics.hpp>
#include <resilience/redis/fleet_limiter.hpp>

#include <array>
#include <string_view>

namespace resilience::redis {

class limiter_meter {
 public:
  limiter_meter(resilience::metrics& registry, std::string_view limiter_name);
  limiter_meter(resilience::metrics&&, std::string_view) = delete;  // a temporary registry would be gone

  void operator()(const limiter_event& e) const noexcept;

 private:
  std::array<metric_counter_ref, 4> events_;  // by limiter_event::kind
  metric_gauge_ref fallback_;
};

}  // namespace resilience::redis
