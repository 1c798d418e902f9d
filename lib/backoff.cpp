#include <resilience/backoff.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace resilience {
namespace {

[[noreturn]] void reject(const char* field, const char* rule) {
  throw std::invalid_argument(std::string("backoff: ") + field + " " + rule);
}

// Converts a non-negative double number of ticks to a duration no larger than
// `cap`. The comparison happens in double, before any conversion, so huge or
// infinite values saturate instead of overflowing.
duration saturate(double ticks, duration cap) noexcept {
  if (!(ticks < static_cast<double>(cap.count()))) return cap;  // also catches NaN
  if (ticks <= 0.0) return duration::zero();
  return duration(static_cast<duration::rep>(ticks));
}

}  // namespace

const char* to_string(jitter j) noexcept {
  switch (j) {
    case jitter::none: return "none";
    case jitter::full: return "full";
    case jitter::equal: return "equal";
    case jitter::decorrelated_clamped: return "decorrelated_clamped";
    case jitter::decorrelated_v2: return "decorrelated_v2";
  }
  return "unknown";
}

backoff backoff::constant(duration delay) {
  if (delay < duration::zero()) reject("delay", "must not be negative");
  return backoff(shape::constant, delay, duration::zero(), 1.0, delay);
}

backoff backoff::linear(duration initial, duration step, duration cap) {
  if (initial < duration::zero()) reject("initial", "must not be negative");
  if (step < duration::zero()) reject("step", "must not be negative");
  if (cap < initial) reject("cap", "must not be less than initial");
  return backoff(shape::linear, initial, step, 1.0, cap);
}

backoff backoff::exponential(duration base, double factor, duration cap) {
  if (base <= duration::zero()) reject("base", "must be positive");
  if (!(factor >= 1.0) || !std::isfinite(factor)) reject("factor", "must be finite and >= 1");
  if (cap < base) reject("cap", "must not be less than base");
  return backoff(shape::exponential, base, duration::zero(), factor, cap);
}

backoff backoff::decorrelated(duration base, duration cap) {
  if (base <= duration::zero()) reject("base", "must be positive");
  if (cap < base) reject("cap", "must not be less than base");
  backoff b(shape::decorrelated, base, duration::zero(), 3.0, cap);
  b.jitter_ = jitter::none;  // its draw is its jitter
  return b;
}

backoff backoff::custom(delay_function f, duration cap) {
  if (!f) reject("function", "must not be empty");
  if (cap < duration::zero()) reject("cap", "must not be negative");
  backoff b(shape::custom, duration::zero(), duration::zero(), 1.0, cap);
  b.function_ = std::make_shared<const delay_function>(std::move(f));
  return b;
}

backoff backoff::with_jitter(jitter j) const {
  if (shape_ == shape::decorrelated && j != jitter::none)
    reject("jitter", "must be none for backoff::decorrelated: its draw is its jitter");
  switch (j) {
    case jitter::none:
    case jitter::full:
    case jitter::equal:
      break;
    case jitter::decorrelated_clamped:
    case jitter::decorrelated_v2:
      if (shape_ == shape::custom) reject("jitter", "must be none, full or equal for backoff::custom");
      // Both grow from the first delay: from zero they would stay at zero.
      if (base_ == duration::zero())
        reject(shape_ == shape::constant ? "delay" : "initial",
               j == jitter::decorrelated_clamped ? "must be positive for jitter::decorrelated_clamped"
                                                 : "must be positive for jitter::decorrelated_v2");
      break;
    default:
      reject("jitter", "is not a jitter kind");
  }
  backoff b = *this;
  b.jitter_ = j;
  return b;
}

duration backoff::nominal(std::uint64_t retry) const noexcept {
  const std::uint64_t n = retry == 0 ? 0 : retry - 1;  // steps past the first delay
  switch (shape_) {
    case shape::constant:
      return base_;
    case shape::linear: {
      if (step_ == duration::zero()) return base_;
      // Compare before multiplying: (cap - initial) / step steps reach the cap.
      const auto steps_to_cap = static_cast<std::uint64_t>((cap_ - base_) / step_);
      if (n > steps_to_cap) return cap_;
      return base_ + step_ * static_cast<duration::rep>(n);
    }
    case shape::exponential:
    case shape::decorrelated: {
      if (factor_ == 1.0) return base_;
      // pow of a huge exponent is +inf, which saturate() turns into the cap.
      return saturate(static_cast<double>(base_.count()) * std::pow(factor_, static_cast<double>(n)), cap_);
    }
    case shape::custom:
      return cap_;
  }
  return base_;
}

delay delay_sequence::next(const random_source& random) {
  const backoff& b = *backoff_;
  ++retry_;
  if (b.kind() == backoff::shape::decorrelated) {
    // AWS: sleep = min(cap, random_between(base, sleep * 3)). Drawn in double:
    // 3 * previous may exceed any duration, and saturate() clamps to the cap.
    const double low = static_cast<double>(b.first().count());
    const double high = static_cast<double>(previous_.count()) * 3.0;
    previous_ = saturate(low + random.next_unit() * (high - low), b.cap());
    return {previous_, previous_};
  }
  duration nominal;
  if (b.kind() == backoff::shape::custom) {
    const auto retry = static_cast<std::uint32_t>(std::min<std::uint64_t>(retry_, UINT32_MAX));
    const duration d = (*b.function())(retry, previous_, random);
    if (d < duration::zero())
      throw std::invalid_argument("backoff: the custom delay function returned a negative delay for retry " +
                                  std::to_string(retry));
    nominal = std::min(d, b.cap());
  } else {
    nominal = b.nominal(retry_);
  }
  const duration window = std::min(nominal, b.cap());
  const auto ticks = static_cast<double>(window.count());
  duration actual = window;
  switch (b.jitter_kind()) {
    case jitter::none:
      break;
    case jitter::full:
      actual = saturate(random.next_unit() * ticks, window);
      break;
    case jitter::equal:
      actual = saturate(ticks / 2 + random.next_unit() * (ticks / 2), window);
      break;
    case jitter::decorrelated_clamped: {
      const double low = static_cast<double>(b.first().count());
      const double high = std::min(static_cast<double>(previous_.count()) * 3.0,
                                   static_cast<double>(b.cap().count()));
      actual = saturate(low + random.next_unit() * std::max(0.0, high - low), b.cap());
      previous_ = actual;
      break;
    }
    case jitter::decorrelated_v2:
      actual = decorrelated_v2(random.next_unit());
      break;
  }
  if (b.kind() == backoff::shape::custom) previous_ = actual;
  return {nominal, actual};
}

duration delay_sequence::decorrelated_v2(double unit) noexcept {
  const backoff& b = *backoff_;
  const double cap = static_cast<double>(b.cap().count());
  if (!v2_at_cap_) {
    // Scales the formula so that the median first delay is the backoff's base.
    constexpr double scale = 1.0 / 1.4;
    constexpr double p_factor = 4.0;
    const double t = static_cast<double>(retry_ - 1) + unit;
    const double next = std::exp2(t) * std::tanh(std::sqrt(p_factor * t));
    const double ticks = (next - v2_previous_) * scale * static_cast<double>(b.first().count());
    v2_previous_ = next;
    if (ticks < cap) return saturate(ticks, b.cap());
    // Past the cap the formula only grows; stop evaluating it (it would reach
    // infinity) and keep clients spread below the cap instead.
    v2_at_cap_ = true;
  }
  return saturate(cap / 2 + unit * (cap / 2), b.cap());
}

namespace detail {

duration jitter_given(const backoff& schedule, duration d, const random_source& random) noexcept {
  const auto ticks = static_cast<double>(d.count());
  // backoff::decorrelated's draw is its jitter, under jitter::none.
  const jitter kind = schedule.kind() == backoff::shape::decorrelated ? jitter::equal : schedule.jitter_kind();
  switch (kind) {
    case jitter::none:
      return d;
    case jitter::full:
      return saturate(random.next_unit() * ticks, d);
    default:
      return saturate(ticks / 2 + random.next_unit() * (ticks / 2), d);
  }
}

}  // namespace detail

}  // namespace resilience
