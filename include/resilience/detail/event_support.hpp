// What an event says about an outcome: shared by the stages that report one.
#pragma once

#include <resilience/error.hpp>
#include <resilience/event.hpp>
#include <resilience/outcome.hpp>

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

// A timeout's or a deadline's expiry (`reason`: error::timeout or
// deadline_exceeded) ending attempt `attempt`.
inline event expiry_event_of(error_code reason, std::uint32_t attempt) noexcept {
  event e{reason == error::timeout ? event_kind::timeout : event_kind::deadline};
  e.outcome = call_outcome::error;
  e.attempt = attempt;
  e.error = reason;
  return e;
}

}  // namespace resilience::detail
