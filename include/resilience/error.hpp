// resilience/error.hpp — the library's one error category.
//
//   boost::system::error_code ec = resilience::error::timeout;
//   if (ec == resilience::error::deadline_exceeded) { ... }
//
// Cancellation from outside is *not* in this category: it stays
// boost::asio::error::operation_aborted, so callers can tell "someone stopped
// me" from "a time bound ran out".
#pragma once

#include <boost/system/error_code.hpp>

#include <type_traits>

namespace resilience {

enum class error : int {
  // Zero is success in every error category.
  timeout = 1,             // an attempt outlived its timeout stage
  deadline_exceeded,       // the overall deadline passed
  circuit_open,            // a circuit breaker rejected the call
  retry_budget_exhausted,  // a retry budget refused another retry
  bulkhead_full,           // a bulkhead had no room for the call
  rate_limited,            // a rate limiter had no token for the call in time, or a
                           // server's Retry-After holds its host longer than the call can wait
  throttled,               // adaptive throttling rejected the call locally
  no_replica,              // an upstream had no replica to send to (its name resolved to none)
  pool_exhausted,          // an HTTP attempt's time ran out while it waited for a pooled connection
};

const boost::system::error_category& error_category() noexcept;

inline boost::system::error_code make_error_code(error e) noexcept {
  return {static_cast<int>(e), error_category()};
}

}  // namespace resilience

template <>
struct boost::system::is_error_code_enum<resilience::error> : std::true_type {};

namespace resilience {

// A call turned away here before anything was sent: by a circuit breaker,
// a bulkhead, a rate limiter, an adaptive throttle, for want of a replica, or
// while waiting for a connection of the HTTP client's pool. It says nothing of the
// dependency's health, so the default classifiers neither retry it after a
// blind backoff nor count it against the dependency, and retry budgets are
// not told of it (gRFC A6 counts only what a server answered).
inline bool reached_no_server(const boost::system::error_code& ec) noexcept {
  return ec.category() == error_category() &&
         (ec == error::circuit_open || ec == error::bulkhead_full || ec == error::rate_limited ||
          ec == error::throttled || ec == error::no_replica || ec == error::pool_exhausted);
}

}  // namespace resilience
