// resilience/retry_delay.hpp — what a retry policy's delay generator
// decides after a transient failure: the policy's own backoff, a given
// delay, or no retry (retry.hpp's delay_generator; http/retry_after_delay.hpp
// is the HTTP one, which honours Retry-After).
//
//   policy.delay_generator([](const resilience::outcome<reply>& o, const resilience::context&) {
//     if (o.has_value() && o.value().pushback) return resilience::retry_delay::pushback(*o.value().pushback);
//     return resilience::retry_delay::backoff();
//   });
#pragma once

#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>

#include <cstdint>
#include <stdexcept>

namespace resilience {

// What a delay generator decides after a transient failure: the policy's own
// backoff, a given delay, or no retry. The time limit and the deadline bound
// a given delay like any other: one that would end past them is not waited,
// the call gives up at once.
class retry_delay {
 public:
  enum class kind : std::uint8_t { backoff, after, at_least, after_then_backoff, stop, pushback };

  // The policy's schedule, jittered as it says.
  static constexpr retry_delay backoff() noexcept { return {kind::backoff, duration::zero(), false}; }
  // Exactly `d` (a server's Retry-After or pushback, a breaker's time until
  // its next probe). Not jittered unless jittered() says so.
  // The schedule goes on counting retries (and grows from `d`, for the
  // schedules that grow from the previous delay).
  static retry_delay after(duration d) { return {kind::after, checked(d), false}; }
  // A server's pushback (gRFC A6: "retry in d"): exactly `d`, and the
  // schedule starts again from its first delay for the retries after it.
  static retry_delay pushback(duration d) { return {kind::pushback, checked(d), false}; }
  // The schedule's delay, but never less than `d`.
  static retry_delay at_least(duration d) { return {kind::at_least, checked(d), false}; }
  // `d`, then the schedule's delay on top, jittered as it says: never
  // shorter than `d` (a Retry-After is the least a server asks for), and
  // spread, so that clients told the same `d` do not return together: the
  // delay on top is drawn over at least d / 2 (less only where that would
  // not fit the deadline).
  static retry_delay after_then_backoff(duration d) { return {kind::after_then_backoff, checked(d), false}; }
  // No retry: the failed outcome is the call's outcome.
  static constexpr retry_delay stop() noexcept { return {kind::stop, duration::zero(), false}; }

  // A given delay spread by the policy's jitter as if it were the nominal
  // delay: full waits uniformly in [0, d], equal in [d/2, d], the
  // decorrelated kinds and backoff::decorrelated as equal; under
  // jitter::none it is not spread. For at_least, the bound is jittered.
  constexpr retry_delay jittered() const noexcept { return {kind_, delay_, true}; }

  constexpr kind decision() const noexcept { return kind_; }
  constexpr duration given() const noexcept { return delay_; }
  constexpr bool is_jittered() const noexcept { return jittered_; }

 private:
  constexpr retry_delay(kind k, duration d, bool j) noexcept : kind_(k), delay_(d), jittered_(j) {}
  static duration checked(duration d) {
    if (d < duration::zero()) throw std::invalid_argument("retry_delay: a delay must not be negative");
    return d;
  }

  kind kind_;
  duration delay_;
  bool jittered_;
};

// The default delay generator: every retry waits the policy's backoff.
struct backoff_delay {
  static constexpr bool is_default = true;
  template <class T>
  constexpr retry_delay operator()(const outcome<T>&, const context&) const noexcept {
    return retry_delay::backoff();
  }
};

namespace detail {

// wait_out_open_circuit(): a breaker's rejection waits until it lets a probe
// through; every other failure is left to the generator set before.
template <class Breaker, class Next>
struct open_circuit_delay {
  const Breaker* breaker;
  [[no_unique_address]] Next next;

  template <class T>
  retry_delay operator()(const outcome<T>& o, const context& ctx) const {
    if (o.error() != error::circuit_open) return next(o, ctx);
    // No time left (half-open, probes all taken): the policy's own delay.
    // duration::max() (isolated, an endless break) is "forever": the wait
    // would never end, so the call gives up.
    const duration left = breaker->time_until_probe();
    return left > duration::zero() ? retry_delay::after(left) : next(o, ctx);
  }
};

}  // namespace detail

}  // namespace resilience
