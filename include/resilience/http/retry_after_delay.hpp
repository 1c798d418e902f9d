// resilience/http/retry_after_delay.hpp — a retry policy's delay generator
// that honours a server's Retry-After.
//
//   const auto policy = resilience::retry_policy{}
//       .retry_if(resilience::http::classifier{})
//       .delay_generator(resilience::http::retry_after_delay{}.max_retry_after(30s));
//
// After a transient failure whose value is a 429 or 503 response with a valid
// Retry-After (retry_after.hpp), the retry waits the Retry-After and then the
// policy's jittered backoff on top (retry_delay::after_then_backoff): never
// sooner than the server asked, at most the backoff's cap later, and spread,
// so that the clients one burst of 429s turned away do not come back in
// lockstep. jittered(false) waits the Retry-After exactly. After anything else
// (another status, no or a malformed header, a network error) the policy's own
// backoff.
//
// A Retry-After longer than max_retry_after, or one whose wait would end past
// the call's time limit or deadline, is not cut short: the call ends at once
// with that response (retrying earlier than asked is what a server that sent
// it is protecting itself from).
//
// An HTTP-date is measured from the response's own Date header when it has a
// valid one (so a skewed local clock does not matter; a Date that
// system_clock cannot hold, before 1678 or after 2261, is ignored), else from the wall
// clock (std::chrono::system_clock, or the one given to wall_clock()).
#pragma once

#include <resilience/detail/with_option.hpp>
#include <resilience/context.hpp>
#include <resilience/http/classifier.hpp>
#include <resilience/http/retry_after.hpp>
#include <resilience/outcome.hpp>
#include <resilience/retry.hpp>

#include <boost/beast/http/field.hpp>
#include <boost/beast/http/message.hpp>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string_view>

namespace resilience::http {

class retry_after_delay {
 public:
  using wall_clock_fn = wall_time (*)() noexcept;

  // The longest Retry-After honoured; a response asking for longer ends the
  // call as it is. Must be positive. Default: one minute.
  retry_after_delay max_retry_after(duration d) const {
    if (d <= duration::zero()) throw std::invalid_argument("http::retry_after_delay: max_retry_after must be positive");
    return resilience::detail::with_option(*this, &retry_after_delay::max_, d);
  }
  // On (the default): the server's delay and then the policy's backoff on
  // top, jittered as the policy says (retry_delay::after_then_backoff). Off:
  // exactly the server's delay, as Polly and Resilience4j wait it; many
  // clients told the same Retry-After then come back together.
  retry_after_delay jittered(bool on = true) const noexcept {
    return resilience::detail::with_option(*this, &retry_after_delay::jittered_, on);
  }
  // The wall clock an HTTP-date is compared with when the response has no
  // valid Date header (tests).
  retry_after_delay wall_clock(wall_clock_fn now) const {
    if (!now) throw std::invalid_argument("http::retry_after_delay: wall_clock must not be null");
    return resilience::detail::with_option(*this, &retry_after_delay::now_, now);
  }

  duration max_retry_after() const noexcept { return max_; }
  bool is_jittered() const noexcept { return jittered_; }

  // The server's requested wait (not capped) for a 429 or 503 carrying a
  // valid Retry-After; nullopt otherwise.
  template <class Body, class Fields>
  std::optional<duration> requested(const boost::beast::http::response<Body, Fields>& r) const {
    const unsigned status = r.result_int();
    if (status != 429 && status != 503) return std::nullopt;
    const auto it = r.find(boost::beast::http::field::retry_after);
    if (it == r.end()) return std::nullopt;
    wall_time now = now_();
    if (const auto date = r.find(boost::beast::http::field::date); date != r.end()) {
      const std::string_view v(date->value().data(), date->value().size());
      if (const auto server_date = parse_http_date(v, now)) {
        if (const auto server_now = to_wall_time(*server_date)) now = *server_now;
      }
    }
    const auto wait = parse_retry_after(std::string_view(it->value().data(), it->value().size()), now);
    return wait;
  }

  template <class T>
  retry_delay operator()(const outcome<T>& o, const context&) const {
    if constexpr (detail::carries_response<T>) {
      if (const auto* r = detail::response_of(o)) {
        if (const auto wait = requested(*r)) {
          if (*wait > max_) return retry_delay::stop();
          return jittered_ ? retry_delay::after_then_backoff(*wait) : retry_delay::after(*wait);
        }
      }
    }
    return retry_delay::backoff();
  }

 private:
  static wall_time system_now() noexcept { return std::chrono::system_clock::now(); }

  duration max_ = std::chrono::minutes(1);
  bool jittered_ = true;
  wall_clock_fn now_ = &system_now;
};

}  // namespace resilience::http
