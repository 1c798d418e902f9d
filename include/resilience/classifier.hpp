// resilience/classifier.hpp — ready-made classifiers.
//
// A classifier is any predicate over `const outcome<T>&`, or over
// `(const outcome<T>&, const context&)` when it needs the call's properties
// ("may the request have been sent?", "is it idempotent?"). Retry reads
// `true` as "transient: try again"; a circuit breaker reads it as "counts as
// a failure". Write your own as a lambda, or combine these:
//
//   auto policy = resilience::retry_policy{}.retry_if(
//       resilience::retry_on_errors{boost::asio::error::connection_reset,
//                                   boost::asio::error::timed_out});
#pragma once

#include <resilience/context.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <stdexcept>
#include <type_traits>

namespace resilience {

// A classifier that declares `static constexpr bool success_verdict` promises
// that this is its answer for every value without an error (false for
// "not a failure", true for the throttle's "accepted"). Strategies then skip
// building an outcome for such values: the success path gets cheaper.
template <class C, bool Verdict>
concept judges_successes_as = requires { requires C::success_verdict == Verdict; };

namespace detail {

// Asks a classifier of either shape.
template <class C, class T>
bool classify(const C& c, const outcome<T>& o, const context& ctx) {
  if constexpr (std::is_invocable_v<const C&, const outcome<T>&, const context&>) {
    return static_cast<bool>(c(o, ctx));
  } else {
    static_assert(std::is_invocable_v<const C&, const outcome<T>&>,
                  "a classifier is callable as bool(const resilience::outcome<T>&) or "
                  "bool(const resilience::outcome<T>&, const resilience::context&), T being the op's value type");
    return static_cast<bool>(c(o));
  }
}

}  // namespace detail

// Any failure except a cancellation and a call refused here that reached no
// server (reached_no_server(): an open breaker, a full bulkhead, a rate
// limiter, an adaptive throttle): retry's default for "transient" and the
// circuit breaker's default for "counts as a failure". Retrying a refusal
// after a blind backoff adds to the load being shed and only spends
// attempts, and it says nothing of the dependency's health (see
// rate_limiter.hpp for retrying on the limiter's own hint, and retry.hpp for
// waiting out an open breaker).
struct any_failure {
  static constexpr bool success_verdict = false;

  template <class T>
  bool operator()(const outcome<T>& o) const noexcept {
    if (!o.failed()) return false;
    const error_code ec = o.error();
    return !is_cancellation(ec) && !reached_no_server(ec);
  }
};

using retry_any_failure = any_failure;

// Every failure but a cancellation, the refusals here included: a
// fallback's default, since answering for a dependency that was not asked
// (an open breaker, a full bulkhead) is what a fallback is for.
struct any_failure_or_refusal {
  static constexpr bool success_verdict = false;

  template <class T>
  bool operator()(const outcome<T>& o) const noexcept {
    return o.failed() && !o.cancelled();
  }
};

// Retries only the listed error codes (compared with ==, so an error
// condition such as errc::connection_reset matches every category mapping to it).
class retry_on_errors {
 public:
  static constexpr bool success_verdict = false;
  static constexpr std::size_t max_codes = 8;

  retry_on_errors(std::initializer_list<error_code> codes) {
    if (codes.size() == 0 || codes.size() > max_codes)
      throw std::invalid_argument("retry_on_errors: codes must list 1 to 8 error codes");
    std::copy(codes.begin(), codes.end(), codes_.begin());
    size_ = codes.size();
  }

  template <class T>
  bool operator()(const outcome<T>& o) const noexcept {
    const error_code ec = o.error();
    if (!ec || o.cancelled()) return false;
    return std::any_of(codes_.begin(), codes_.begin() + size_,
                       [&](const error_code& c) { return ec == c; });
  }

 private:
  std::array<error_code, max_codes> codes_{};
  std::size_t size_ = 0;
};

// Never retries (useful to switch retry off in configuration).
struct retry_never {
  static constexpr bool success_verdict = false;

  template <class T>
  bool operator()(const outcome<T>&) const noexcept {
    return false;
  }
};

}  // namespace resilience
