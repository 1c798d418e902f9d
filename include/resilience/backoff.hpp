// resilience/backoff.hpp — how long to wait before each retry.
//
//   auto b = resilience::backoff::exponential(100ms, 2.0, 10s)
//                .with_jitter(resilience::jitter::full);
//   resilience::delay_sequence seq{b};
//   auto d = seq.next(resilience::random_source{});  // d.nominal, d.actual
//
// Pure value types with no I/O. Every factory and with_jitter() validate and
// throw std::invalid_argument naming the bad field. Delays never overflow: at
// any retry number the nominal delay saturates at the cap.
//
// Jitter spreads clients apart:
//   none            the nominal delay.
//   full            uniform in [0, w], w = min(cap, nominal). AWS's default.
//   equal           uniform in [w/2, w].
//   decorrelated    AWS's formula, uniform in [base, 3 * previous delay], but
//                   the upper bound is clamped to the cap *before* drawing, so
//                   clients that reach the cap stay spread over [base, cap]
//                   instead of piling up at exactly the cap.
//   decorrelated_v2 the smooth formula Polly calls DecorrelatedJitterBackoffV2:
//                   successive differences of 2^t * tanh(sqrt(4t)) at a random
//                   t in [n, n+1), scaled so the median first delay is `base`.
//                   Once it reaches the cap it draws uniformly in [cap/2, cap].
// The decorrelated kinds use only the backoff's first delay and its cap;
// their growth comes from the formula, not from the backoff's shape. Both
// grow from the first delay, so a schedule that starts at zero
// (constant(0), linear(0, ...)) would never wait: with_jitter() rejects that
// pair, naming the first delay's field ("delay" or "initial").
//
// Extremes: zero delays are allowed (a zero wait yields), and so are delays
// up to duration::max() and no_cap; factor 1 is a constant schedule, and any
// factor, however large, saturates at the cap. Negative durations, a cap
// below the first delay, exponential(0) and a factor below 1, NaN or
// infinite throw.
#pragma once

#include <resilience/random.hpp>

#include <chrono>
#include <cstdint>

namespace resilience {

using duration = std::chrono::steady_clock::duration;

enum class jitter : std::uint8_t { none, full, equal, decorrelated, decorrelated_v2 };

const char* to_string(jitter j) noexcept;

class backoff {
 public:
  enum class shape : std::uint8_t { constant, linear, exponential };

  static constexpr duration no_cap = duration::max();

  // The same delay before every retry.
  static backoff constant(duration delay);
  // initial, initial + step, initial + 2 step, ..., at most cap.
  static backoff linear(duration initial, duration step, duration cap = no_cap);
  // base, base * factor, base * factor^2, ..., at most cap. factor >= 1.
  static backoff exponential(duration base, double factor = 2.0,
                             duration cap = std::chrono::minutes(1));

  // A copy with another jitter; the default is jitter::none. Throws
  // std::invalid_argument for a value outside the enum, or a decorrelated
  // kind on a schedule whose first delay is zero (see above).
  backoff with_jitter(jitter j) const;

  // The delay before retry number `retry` (1 = the first retry), before
  // jitter. Saturates at the cap; never overflows.
  duration nominal(std::uint64_t retry) const noexcept;

  shape kind() const noexcept { return shape_; }
  jitter jitter_kind() const noexcept { return jitter_; }
  duration first() const noexcept { return base_; }
  duration step() const noexcept { return step_; }
  double factor() const noexcept { return factor_; }
  duration cap() const noexcept { return cap_; }

  friend bool operator==(const backoff&, const backoff&) = default;

 private:
  backoff(shape s, duration base, duration step, double factor, duration cap) noexcept
      : shape_(s), base_(base), step_(step), factor_(factor), cap_(cap) {}

  shape shape_;
  jitter jitter_ = jitter::none;
  duration base_;
  duration step_;
  double factor_;
  duration cap_;
};

// One delay: before jitter (nominal) and the one actually waited (actual).
struct delay {
  duration nominal;
  duration actual;
};

// The per-call state of a backoff: which retry comes next and, for the
// decorrelated kinds, what was drawn last. Cheap to make; one per call.
class delay_sequence {
 public:
  explicit delay_sequence(const backoff& b) noexcept : backoff_(&b), previous_(b.first()) {}

  delay next(const random_source& random) noexcept;

  // Retries this sequence has produced delays for.
  std::uint64_t count() const noexcept { return retry_; }

 private:
  duration decorrelated_v2(double unit) noexcept;

  const backoff* backoff_;
  std::uint64_t retry_ = 0;
  duration previous_;
  double v2_previous_ = 0.0;
  bool v2_at_cap_ = false;
};

}  // namespace resilience
