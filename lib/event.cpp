#include <resilience/event.hpp>

namespace resilience {

namespace {
struct kind_names {
  const char* name;
  const char* strategy;
};
// In event_kind's order.
constexpr kind_names names[event_kind_count] = {
    {"on_retry", "retry"},
    {"on_budget_refused", "retry"},
    {"on_circuit_opened", "circuit_breaker"},
    {"on_circuit_closed", "circuit_breaker"},
    {"on_circuit_half_opened", "circuit_breaker"},
    {"on_circuit_isolated", "circuit_breaker"},
    {"on_circuit_disabled", "circuit_breaker"},
    {"on_circuit_metrics_only", "circuit_breaker"},
    {"on_circuit_rejected", "circuit_breaker"},
    {"on_bulkhead_queue_full", "bulkhead"},
    {"on_bulkhead_wait_expired", "bulkhead"},
    {"on_timeout", "timeout"},
    {"on_deadline", "deadline"},
    {"on_rate_limited", "rate_limiter"},
    {"on_throttled", "adaptive_throttle"},
    {"on_hedge", "hedging"},
    {"on_fallback", "fallback"},
    {"on_fault_injected", "chaos"},
    {"on_host_held", "http_client"},
    {"on_shed", "http_server"},
    {"on_request_refused", "http_server"},
    {"on_deadline_exceeded", "http_server"},
    {"on_slow_client", "http_server"},
};
}  // namespace

const char* to_string(event_kind k) noexcept {
  const auto i = static_cast<std::size_t>(k);
  return i < event_kind_count ? names[i].name : "unknown";
}

const char* strategy_of(event_kind k) noexcept {
  const auto i = static_cast<std::size_t>(k);
  return i < event_kind_count ? names[i].strategy : "unknown";
}

}  // namespace resilience
