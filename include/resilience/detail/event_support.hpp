// What an event says about an outcome: shared by the stages that report one.
#pragma once

#include <resilience/context.hpp>
#include <resilience/error.hpp>
#include <resilience/event.hpp>
#include <resilience/outcome.hpp>

#include <exception>
#include <utility>

namespace resilience::detail {

// A failure's outcome label: a value a classifier called a failure (a 503
// response) counts as `error`, as the stage that acted on it handled it.
template <class T>
call_outcome failed_outcome(const outcome<T>& o) noexcept {
  if (o.cancelled()) return call_outcome::cancelled;
  if (!o.error().failed() && o.has_exception()) return call_outcome::exception;
  return call_outcome::error;
}

// An HTTP status an outcome carries, for event::status: 0 here; the HTTP
// headers specialise it for their responses.
template <class T>
struct event_status {
  static unsigned of(const outcome<T>&) noexcept { return 0; }
};

// An event about outcome `o` of attempt `attempt`.
template <class T>
event event_about(event_kind kind, const outcome<T>& o, std::uint32_t attempt, duration delay = {}) noexcept {
  event e{kind};
  e.outcome = failed_outcome(o);
  e.attempt = attempt;
  e.delay = delay;
  e.error = o.error();
  e.status = event_status<T>::of(o);
  return e;
}

// A call refused here (a breaker, a bulkhead, a limiter, a throttle, a
// host's hold): the one shape of every refusal's event.
inline event refusal_event(event_kind kind, error_code why, duration retry_after = {},
                           std::uint32_t attempt = 0) noexcept {
  event e{kind};
  e.outcome = call_outcome::error;
  e.error = why;
  e.delay = retry_after;
  e.attempt = attempt;
  return e;
}

// Runs a strategy's typed hook, then reports `e` to the call's sink: the
// sink sees the event even when the hook throws, and what the hook threw
// then ends the call, as the hook's contract says.
template <class Hook>
void report_hooked(const context& ctx, Hook&& hook, const event& e) {
  std::exception_ptr thrown;
  try {
    std::forward<Hook>(hook)();
  } catch (...) {
    thrown = std::current_exception();
  }
  ctx.report(e);
  if (thrown) [[unlikely]]
    std::rethrow_exception(thrown);
}

// A timeout's or a deadline's expiry (`reason`: error::timeout or
// deadline_exceeded) ending attempt `attempt`.
inline event expiry_event_of(error_code reason, std::uint32_t attempt) noexcept {
  event e{reason == error::timeout ? event_kind::timeout : event_kind::deadline};
  e.outcome = call_outcome::error;
  e.attempt = attempt;
  e.error = reason;
  return e;
}

// Reports a bound's expiry ending attempt ctx.attempt, unless its reason is
// the deadline and an enclosing stage watches that deadline (it reports it).
inline void report_expiry(const context& ctx, error_code reason) noexcept {
  if (reason == error::deadline_exceeded && ctx.expiry_reported_outside()) return;
  ctx.report(expiry_event_of(reason, ctx.attempt));
}

}  // namespace resilience::detail
