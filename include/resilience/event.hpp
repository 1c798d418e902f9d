// resilience/event.hpp — one event type for every strategy, the HTTP client
// and the server, and the one interface that receives them.
//
//   struct log_sink final : resilience::event_sink {
//     void on_event(const resilience::event& e) noexcept override {
//       fmt::print("{} {} attempt {}\n", e.strategy(), e.name(), e.attempt);
//     }
//   } log;
//   const auto call_backend = resilience::pipeline(retry, breaker, timeout).events(log);
//   resilience::metrics telemetry;                                 // or a registry
//   const auto metered = resilience::pipeline(retry, breaker).events(telemetry.events("backend"));
//
// Where events go: a sink travels in the call's context (context::events),
// as the deadline does. pipeline(...).events(sink) sets it for the stages of
// that pipeline, http::client_options::events(sink) for a client's calls and
// http::server_options::events(sink) for a server's own events and the
// context it hands its handler; the innermost one given wins, and a pipeline
// or client without one reports to its caller's. Each strategy's own typed
// hook (on_retry, on_state_change, ...) runs as well, before the sink.
//
// A breaker's transitions are reported to the sink of the call that made
// them; those made with no call (reset(), isolate(), poll()) reach only
// breaker_options::on_state_change. The fleet limiter's fall-back and return
// reach the sink of the call that meets them: the call whose round trip to
// Redis failed, and the first call to take a permit from the shared quota
// again. Each event is reported once: an expiry by the bound that ended the
// call (an inner stage clamped to a deadline that an outer stage watches
// leaves it to that stage). A typed hook that throws does not keep the
// event from the sink.
//
// A sink is called on the thread that made the event, possibly on several
// at once, and must not throw. It is not called on a call's success path.
#pragma once

#include <resilience/clock.hpp>

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace resilience {

// How a call or an attempt ended: the `outcome` label of the metrics.
enum class call_outcome : std::uint8_t { success, error, exception, cancelled };
inline constexpr std::size_t call_outcome_count = 4;
const char* to_string(call_outcome o) noexcept;

// What happened, each kind with its name (as metrics label it) and the
// strategy it belongs to: the one list of them. X(kind, name, strategy).
#define RESILIENCE_EVENT_KINDS(X)                                                                         \
  /* retry (also the HTTP client's retries) */                                                           \
  X(retry, "on_retry", "retry")                    /* a failed attempt will be retried after `delay` */  \
  X(budget_refused, "on_budget_refused", "retry")  /* the retry budget refused a retry: the call ends */ \
  /* circuit_breaker (also the HTTP client's breaker per host) */                                        \
  X(circuit_opened, "on_circuit_opened", "circuit_breaker")                                              \
  X(circuit_closed, "on_circuit_closed", "circuit_breaker")                                              \
  X(circuit_half_opened, "on_circuit_half_opened", "circuit_breaker")                                    \
  X(circuit_isolated, "on_circuit_isolated", "circuit_breaker")                                          \
  X(circuit_disabled, "on_circuit_disabled", "circuit_breaker")                                          \
  X(circuit_metrics_only, "on_circuit_metrics_only", "circuit_breaker")                                  \
  X(circuit_rejected, "on_circuit_rejected", "circuit_breaker") /* `delay`: when it may try again */     \
  /* bulkhead */                                                                                         \
  X(bulkhead_queue_full, "on_bulkhead_queue_full", "bulkhead")                                           \
  X(bulkhead_wait_expired, "on_bulkhead_wait_expired", "bulkhead")                                       \
  /* timeout and deadline stages (and the client's attempt timeout) */                                   \
  X(timeout, "on_timeout", "timeout")                                                                    \
  X(deadline, "on_deadline", "deadline")                                                                 \
  /* rate_limiter; `delay`: when a permit may be free */                                                 \
  X(rate_limited, "on_rate_limited", "rate_limiter")                                                     \
  /* redis::fleet_limiter: a call turned away (`delay`: when Redis expects a permit), the shared */      \
  /* quota given up for the local fallback after a failed round trip (`error`), and back */              \
  X(fleet_rate_limited, "on_rate_limited", "fleet_rate_limiter")                                         \
  X(fleet_round_trip_failed, "on_round_trip_failed", "fleet_rate_limiter")                               \
  X(fleet_fell_back, "on_fell_back", "fleet_rate_limiter")                                               \
  X(fleet_resumed, "on_resumed", "fleet_rate_limiter")                                                   \
  /* adaptive_throttle (also the client's throttle per host) */                                          \
  X(throttled, "on_throttled", "adaptive_throttle")                                                      \
  /* hedging: another attempt launched; `delay` since the call began */                                 \
  X(hedge, "on_hedge", "hedging")                                                                        \
  /* fallback: the outcome replaced */                                                                   \
  X(fallback, "on_fallback", "fallback")                                                                 \
  /* chaos: a fault injected */                                                                          \
  X(fault_injected, "on_fault_injected", "chaos")                                                        \
  /* http_client: an attempt waited `delay` for another call's Retry-After; an upstream's replica */     \
  /* (`host`) ejected for `delay`, returned, added, removed; an attempt waited `delay` for a pooled */   \
  /* connection (`error` when its time ran out first) */                                                 \
  X(host_held, "on_host_held", "http_client")                                                            \
  X(pool_wait, "on_pool_wait", "http_client")                                                            \
  X(replica_ejected, "on_replica_ejected", "http_client")                                                \
  X(replica_returned, "on_replica_returned", "http_client")                                              \
  X(replica_added, "on_replica_added", "http_client")                                                    \
  X(replica_removed, "on_replica_removed", "http_client")                                                \
  /* http_server */                                                                                      \
  X(shed, "on_shed", "http_server")                          /* 503: too many requests in flight */      \
  X(request_refused, "on_request_refused", "http_server")    /* `status` (400, 413, 431) */              \
  X(server_deadline_exceeded, "on_deadline_exceeded", "http_server") /* 504: the deadline passed */      \
  X(slow_client, "on_slow_client", "http_server")            /* closed: the client stalled */            \
  /* config::live_config: a document accepted, or refused (`error`: config_rejected) */                \
  X(config_reloaded, "on_reloaded", "config")                                                            \
  X(config_rejected, "on_reload_rejected", "config")

enum class event_kind : std::uint8_t {
#define RESILIENCE_EVENT_KIND_ENUMERATOR(kind, name, strategy) kind,
  RESILIENCE_EVENT_KINDS(RESILIENCE_EVENT_KIND_ENUMERATOR)
#undef RESILIENCE_EVENT_KIND_ENUMERATOR
};
inline constexpr std::size_t event_kind_count = 0
#define RESILIENCE_EVENT_KIND_COUNT(kind, name, strategy) +1
    RESILIENCE_EVENT_KINDS(RESILIENCE_EVENT_KIND_COUNT);
#undef RESILIENCE_EVENT_KIND_COUNT

namespace detail {
struct event_kind_names {
  const char* name;
  const char* strategy;
};
constexpr event_kind_names names_of(event_kind k) noexcept {
  switch (k) {
#define RESILIENCE_EVENT_KIND_NAMES(kind, name, strategy) \
  case event_kind::kind:                                  \
    return {name, strategy};
    RESILIENCE_EVENT_KINDS(RESILIENCE_EVENT_KIND_NAMES)
#undef RESILIENCE_EVENT_KIND_NAMES
  }
  return {"unknown", "unknown"};
}
}  // namespace detail

// The event's name as metrics label it ("on_retry", "on_circuit_opened", ...).
constexpr const char* to_string(event_kind k) noexcept { return detail::names_of(k).name; }
// The strategy it belongs to ("retry", "circuit_breaker", "http_server", ...).
constexpr const char* strategy_of(event_kind k) noexcept { return detail::names_of(k).strategy; }

struct event {
  explicit event(event_kind k) noexcept : kind(k) {}

  event_kind kind;
  // How the attempt or call it is about ended, when it is about one (a
  // retried failure, a timeout, a replaced outcome, `error` for a call
  // refused by a breaker, bulkhead, limiter or throttle); empty for a
  // breaker's transition, a server's events.
  std::optional<call_outcome> outcome;
  // The attempt it is about (1-based), or 0.
  std::uint32_t attempt = 0;
  // What the kind above says: a retry's wait, a rejection's retry-after, a
  // hedge's time since the call began, a host hold's wait.
  duration delay{};
  // The failure that led to it, when there is one.
  boost::system::error_code error;
  // An HTTP status, when there is one (a retried response, a refusal).
  unsigned status = 0;
  // The endpoint key ("host:port[:tls]") of the HTTP client call it comes
  // from, on every event of the call; empty elsewhere. A view into the call,
  // valid during on_event only: copy it to keep it.
  std::string_view host;

  const char* name() const noexcept { return to_string(kind); }
  const char* strategy() const noexcept { return strategy_of(kind); }
};

class event_sink {
 public:
  virtual void on_event(const event& e) noexcept = 0;

 protected:
  event_sink() = default;
  event_sink(const event_sink&) = default;
  event_sink& operator=(const event_sink&) = default;
  ~event_sink() = default;
};

}  // namespace resilience
