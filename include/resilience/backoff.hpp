// resilience/backoff.hpp — how long to wait before each retry.
//
//   auto b = resilience::backoff::exponential(100ms, 2.0, 10s);  // full jitter unless told otherwise
//   auto aws = resilience::backoff::decorrelated(100ms, 10s);  // AWS's formula, exactly
//   auto own = resilience::backoff::custom(                    // any schedule
//       [](std::uint32_t retry, resilience::duration previous, const resilience::random_source&) {
//         return retry < 3 ? 50ms : previous * 2; },
//       30s);
//   resilience::delay_sequence seq{b};
//   auto d = seq.next(resilience::random_source{});  // d.nominal, d.actual
//
// Value types with no I/O. Every factory and with_jitter() validate and throw
// std::invalid_argument naming the bad field. Delays never overflow: at any
// retry number the nominal delay saturates at the cap.
//
// Shapes:
//   constant, linear, exponential  a nominal delay per retry number, which a
//                   jitter kind below then spreads.
//   decorrelated    AWS's "decorrelated jitter", exactly as published:
//                   sleep = min(cap, uniform(base, 3 * previous sleep)), the
//                   first previous sleep being base. Clients that reach the
//                   cap wait exactly the cap. The draw is the jitter: it takes
//                   no other.
//   custom          a function of (retry number, previous delay, random
//                   source) gives each delay, capped, then jittered (full,
//                   equal, or none for its delays exactly). A negative delay from it is an error
//                   (std::invalid_argument) raised in the call that drew it.
//
// Jitter spreads clients apart. Every schedule has full jitter until
// with_jitter() says otherwise (backoff::decorrelated has its own draw), so
// that a fleet that tunes its delays never goes back to retrying in
// lockstep. (Polly's and Resilience4j's schedules have none unless asked:
// with_jitter(jitter::none) gives theirs.)
//   none            the nominal delay: exact waits, as tests may want.
//   full            uniform in [0, w], w = min(cap, nominal). AWS's default,
//                   and ours.
//   equal           uniform in [w/2, w].
//   decorrelated_clamped
//                   a variant of AWS's formula: uniform in [base, 3 * previous
//                   delay] with the upper bound clamped to the cap *before*
//                   drawing, so clients at the cap stay spread over [base, cap]
//                   instead of waiting exactly the cap. Its completion times
//                   differ from AWS's formula; use backoff::decorrelated for
//                   that. (`decorrelated` is its former name.)
//   decorrelated_v2 the smooth formula Polly calls DecorrelatedJitterBackoffV2:
//                   successive differences of 2^t * tanh(sqrt(4t)) at a random
//                   t in [n, n+1), scaled so the median first delay is `base`.
//                   Once it reaches the cap it draws uniformly in [cap/2, cap].
// The decorrelated jitter kinds use only the schedule's first delay and its
// cap; their growth comes from the formula, not from the schedule's shape.
// Both grow from the first delay, so a schedule that starts at zero
// (constant(0), linear(0, ...)) would never wait: with_jitter() rejects that
// pair, naming the first delay's field ("delay" or "initial").
//
// Extremes: zero delays are allowed (a zero wait yields), and so are delays
// up to duration::max() and no_cap; factor 1 is a constant schedule, and any
// factor, however large, saturates at the cap. Negative durations, a cap
// below the first delay, exponential(0), decorrelated(0, ...) and a factor
// below 1, NaN or infinite throw.
#pragma once

#include <resilience/random.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace resilience {

using duration = std::chrono::steady_clock::duration;

enum class jitter : std::uint8_t {
  none,
  full,
  equal,
  decorrelated_clamped,
  decorrelated_v2,
  decorrelated [[deprecated("renamed jitter::decorrelated_clamped; for AWS's formula use backoff::decorrelated")]] =
      decorrelated_clamped,
};

const char* to_string(jitter j) noexcept;

class backoff {
 public:
  enum class shape : std::uint8_t { constant, linear, exponential, decorrelated, custom };

  // (retry number from 1, the previous delay actually waited (zero before
  // the first), the call's random source) -> the next delay before jitter.
  using delay_function = std::function<duration(std::uint32_t, duration, const random_source&)>;

  static constexpr duration no_cap = duration::max();

  // The same delay before every retry.
  static backoff constant(duration delay);
  // initial, initial + step, initial + 2 step, ..., at most cap.
  static backoff linear(duration initial, duration step, duration cap = no_cap);
  // base, base * factor, base * factor^2, ..., at most cap. factor >= 1.
  static backoff exponential(duration base, double factor = 2.0,
                             duration cap = std::chrono::minutes(1));
  // AWS's decorrelated jitter: min(cap, uniform(base, 3 * previous)). base > 0.
  static backoff decorrelated(duration base, duration cap);
  // Delays from `f`, at most `cap`. Any number of retries: the policy's
  // attempts, time limit and deadline bound it.
  static backoff custom(delay_function f, duration cap = no_cap);

  // A copy with another jitter; the default is jitter::full. Throws
  // std::invalid_argument for a value outside the enum, a decorrelated kind
  // on a schedule whose first delay is zero (see above), any jitter but none
  // on backoff::decorrelated, and a decorrelated kind on backoff::custom.
  backoff with_jitter(jitter j) const;

  // The delay before retry number `retry` (1 = the first retry), before
  // jitter. Saturates at the cap; never overflows. For decorrelated it is
  // the upper bound of the draw, min(cap, base * 3^(retry-1)); for custom,
  // which needs the sequence, the cap.
  duration nominal(std::uint64_t retry) const noexcept;

  shape kind() const noexcept { return shape_; }
  jitter jitter_kind() const noexcept { return jitter_; }
  duration first() const noexcept { return base_; }
  duration step() const noexcept { return step_; }
  double factor() const noexcept { return factor_; }
  duration cap() const noexcept { return cap_; }
  // For custom: the function; empty otherwise.
  const delay_function* function() const noexcept { return function_.get(); }

  // Custom schedules are equal when they share one function object (copies
  // of one backoff).
  friend bool operator==(const backoff&, const backoff&) = default;

 private:
  backoff(shape s, duration base, duration step, double factor, duration cap) noexcept
      : shape_(s), base_(base), step_(step), factor_(factor), cap_(cap) {}

  shape shape_;
  jitter jitter_ = jitter::full;  // see "Jitter" above
  duration base_;
  duration step_;
  double factor_;
  duration cap_;
  std::shared_ptr<const delay_function> function_;  // shared: copying a policy copies no closure
};

// One delay: before jitter (nominal) and the one actually waited (actual).
struct delay {
  duration nominal;
  duration actual;
};

// The per-call state of a backoff: which retry comes next and what was
// waited last. Cheap to make; one per call. Refers to the backoff, which
// must outlive it.
class delay_sequence {
 public:
  explicit delay_sequence(const backoff& b) noexcept
      : backoff_(&b), previous_(b.kind() == backoff::shape::custom ? duration::zero() : b.first()) {}
  explicit delay_sequence(const backoff&&) = delete;

  // Throws only what a custom function throws, or std::invalid_argument
  // when it returns a negative delay.
  delay next(const random_source& random);

  // Retries this sequence has produced delays for.
  std::uint64_t count() const noexcept { return retry_; }

  // The last delay was replaced (a server's Retry-After) and `d` waited
  // instead: what the schedules that grow from the previous delay
  // (decorrelated, decorrelated_clamped, custom) grow from next. The others
  // do not read it.
  void waited(duration d) noexcept { previous_ = d; }
  // The server pushed back (retry_delay::pushback, gRFC A6): the retries
  // after it grow from the first delay again.
  void restart() noexcept {
    retry_ = 0;
    previous_ = backoff_->kind() == backoff::shape::custom ? duration::zero() : backoff_->first();
    v2_previous_ = 0.0;
    v2_at_cap_ = false;
  }

 private:
  duration decorrelated_v2(double unit) noexcept;

  const backoff* backoff_;
  std::uint64_t retry_ = 0;
  duration previous_;
  double v2_previous_ = 0.0;
  bool v2_at_cap_ = false;
};

namespace detail {
// `d` spread by the schedule's jitter kind as if it were a nominal delay
// (retry_delay::jittered): full, equal; the decorrelated kinds, and
// backoff::decorrelated (whose draw is its jitter), as equal.
duration jitter_given(const backoff& schedule, duration d, const random_source& random) noexcept;
}  // namespace detail

}  // namespace resilience
