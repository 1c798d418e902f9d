// latency_tracker and its options: the validation and the window's
// bookkeeping, out of the header (see include/resilience/adaptive_timeout.hpp).
#include <resilience/adaptive_timeout.hpp>
#include <resilience/detail/with_option.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace resilience {

latency_tracker_options latency_tracker_options::window(std::size_t samples) const {
  if (samples == 0) throw std::invalid_argument("latency_tracker_options: window must be at least 1 sample");
  if (samples > max_window)
    throw std::invalid_argument("latency_tracker_options: window must be at most max_window (" +
                                std::to_string(max_window) + " samples), not " + std::to_string(samples));
  return resilience::detail::with_option(*this, &latency_tracker_options::window_, samples);
}

latency_tracker_options latency_tracker_options::percentile(double p) const {
  if (!(p > 0.0 && p <= 100.0))
    throw std::invalid_argument("latency_tracker_options: percentile must be in (0, 100]");
  return resilience::detail::with_option(*this, &latency_tracker_options::percentile_, p);
}

latency_tracker_options latency_tracker_options::deviations(double k) const {
  if (!(k >= 0.0 && std::isfinite(k)))
    throw std::invalid_argument("latency_tracker_options: deviations must be finite and >= 0");
  return resilience::detail::with_option(*this, &latency_tracker_options::deviations_, k);
}

latency_tracker_options latency_tracker_options::bounds(duration min, duration max) const {
  if (min <= duration::zero()) throw std::invalid_argument("latency_tracker_options: min must be positive");
  if (max < min) throw std::invalid_argument("latency_tracker_options: max must not be less than min");
  auto o = *this;
  o.min_ = min;
  o.max_ = max;
  return o;
}

latency_tracker_options latency_tracker_options::initial(duration limit) const {
  if (limit <= duration::zero()) throw std::invalid_argument("latency_tracker_options: initial must be positive");
  return resilience::detail::with_option(*this, &latency_tracker_options::initial_, limit);
}

latency_tracker_options latency_tracker_options::min_samples(std::size_t n) const {
  if (n == 0) throw std::invalid_argument("latency_tracker_options: min_samples must be at least 1");
  if (n > max_window)
    throw std::invalid_argument("latency_tracker_options: min_samples must be at most max_window (" +
                                std::to_string(max_window) + "), not " + std::to_string(n));
  return resilience::detail::with_option(*this, &latency_tracker_options::min_samples_, n);
}

namespace {

const latency_tracker_options& checked(const latency_tracker_options& o) {
  if (o.min_samples() > o.window())
    throw std::invalid_argument("latency_tracker: min_samples (" + std::to_string(o.min_samples()) +
                                ") must not exceed window (" + std::to_string(o.window()) + ")");
  return o;
}

}  // namespace

latency_tracker::latency_tracker(const latency_tracker_options& options)
    : state_(std::make_shared<state>(checked(options))) {}

void latency_tracker::record(duration latency) const {
  state& s = *state_;
  const duration::rep sample = std::max(latency.count(), duration::rep{0});
  std::lock_guard lock(s.mutex);
  if (s.sorted.size() == s.ring.size()) {
    // Full: the slot about to be overwritten holds the oldest sample.
    const duration::rep oldest = s.ring[s.next];
    s.sorted.erase(std::lower_bound(s.sorted.begin(), s.sorted.end(), oldest));
  }
  s.ring[s.next] = sample;
  s.next = (s.next + 1) % s.ring.size();
  // Capacity was reserved for the whole window: this never reallocates.
  s.sorted.insert(std::upper_bound(s.sorted.begin(), s.sorted.end(), sample), sample);
  s.recompute();
}

latency_stats latency_tracker::stats() const {
  std::lock_guard lock(state_->mutex);
  return state_->stats;
}

latency_tracker::state::state(const latency_tracker_options& o) : options(o), ring(o.window()) {
  sorted.reserve(o.window());
  stats.limit = clamped(o.initial());
  limit.store(stats.limit.count(), std::memory_order_relaxed);
}

duration latency_tracker::state::clamped(duration d) const { return std::clamp(d, options.min(), options.max()); }

void latency_tracker::state::recompute() {
  const std::size_t n = sorted.size();
  // Nearest rank, 1-based. p * n before the division keeps whole ranks
  // exact (99 * 100 / 100); the epsilon keeps a rank that rounding left a
  // hair above a whole number (99.9 * 1000 / 100) from moving up one.
  const double exact_rank = options.percentile() * static_cast<double>(n) / 100.0;
  const auto rank = std::clamp<std::size_t>(static_cast<std::size_t>(std::ceil(exact_rank - 1e-9)), 1, n);
  const double p = static_cast<double>(sorted[rank - 1]);

  // Two passes over the window rather than running sums: sums of squares
  // of nanoseconds lose precision or overflow, and the window is small.
  double sum = 0;
  for (const duration::rep x : sorted) sum += static_cast<double>(x);
  const double mean = sum / static_cast<double>(n);
  double squares = 0;
  for (const duration::rep x : sorted) squares += (static_cast<double>(x) - mean) * (static_cast<double>(x) - mean);
  const double sd = std::sqrt(squares / static_cast<double>(n));

  stats.samples = n;
  stats.percentile = duration(sorted[rank - 1]);
  stats.stddev = duration(std::llround(sd));
  if (n >= options.min_samples()) {
    // Compared as doubles first: p + k * sd may not fit in a duration.
    const double raw = p + options.deviations() * sd;
    if (raw >= static_cast<double>(options.max().count())) {
      stats.limit = options.max();
    } else {
      stats.limit = clamped(duration(std::llround(raw)));
    }
  }
  limit.store(stats.limit.count(), std::memory_order_relaxed);
}

}  // namespace resilience
