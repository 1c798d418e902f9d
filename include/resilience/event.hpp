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
// breaker_options::on_state_change.
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

// What happened. Each belongs to one strategy (event::strategy()).
enum class event_kind : std::uint8_t {
  // retry (also the HTTP client's retries)
  retry,           // a failed attempt will be retried after `delay`
  budget_refused,  // the retry budget refused a retry: the call ends
  // circuit_breaker (also the HTTP client's breaker per host)
  circuit_opened,
  circuit_closed,
  circuit_half_opened,
  circuit_isolated,
  circuit_disabled,
  circuit_metrics_only,
  circuit_rejected,  // a call refused; `delay`: when it may try again
  // bulkhead
  bulkhead_queue_full,
  bulkhead_wait_expired,
  // timeout and deadline stages (and the client's attempt timeout)
  timeout,
  deadline,
  // rate_limiter; `delay`: when a permit may be free
  rate_limited,
  // adaptive_throttle (also the client's throttle per host)
  throttled,
  // hedging: another attempt launched; `delay` since the call began
  hedge,
  // fallback: the outcome replaced
  fallback,
  // chaos: a fault injected
  fault_injected,
  // http_client: an attempt waited `delay` for another call's Retry-After
  host_held,
  // http_server
  shed,                     // refused with 503: too many requests in flight
  request_refused,          // refused with `status` (400, 413, 431) before the handler
  server_deadline_exceeded, // answered 504: the request's deadline passed
  slow_client,              // a connection closed because the client stalled
};
inline constexpr std::size_t event_kind_count = static_cast<std::size_t>(event_kind::slow_client) + 1;

// The event's name as metrics label it ("on_retry", "on_circuit_opened", ...).
const char* to_string(event_kind k) noexcept;
// The strategy it belongs to ("retry", "circuit_breaker", "http_server", ...).
const char* strategy_of(event_kind k) noexcept;

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
