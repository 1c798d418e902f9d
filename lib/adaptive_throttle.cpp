#include <resilience/adaptive_throttle.hpp>
#include <resilience/detail/with_option.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace resilience {

adaptive_throttle_options adaptive_throttle_options::k(double k) const {
  if (!(k >= 1) || !std::isfinite(k)) throw std::invalid_argument("adaptive_throttle_options::k: must be finite and at least 1");
  return resilience::detail::with_option(*this, &adaptive_throttle_options::k_, k);
}

adaptive_throttle_options adaptive_throttle_options::window(duration d) const {
  if (d < std::chrono::milliseconds(1))
    throw std::invalid_argument("adaptive_throttle_options::window: must be at least 1 ms");
  // Past a day a window is a configuration mistake, and it keeps bucket
  // numbers far from wrapping their tags.
  if (d > std::chrono::hours(24)) throw std::invalid_argument("adaptive_throttle_options::window: must be at most 24 h");
  return resilience::detail::with_option(*this, &adaptive_throttle_options::window_, d);
}

adaptive_throttle_options adaptive_throttle_options::random(random_source r) const {
  return resilience::detail::with_option(*this, &adaptive_throttle_options::random_, std::move(r));
}

adaptive_throttle_options adaptive_throttle_options::on_throttled(std::function<void(const throttle_event&)> f) const {
  return resilience::detail::with_option(*this, &adaptive_throttle_options::on_throttled_, std::move(f));
}

namespace detail {

throttle_window::throttle_window(duration window) noexcept
    : bucket_ticks_(std::max<std::int64_t>(window.count() / buckets, 1)) {}

void throttle_window::add(std::atomic<std::uint64_t>& word, std::int64_t n) noexcept {
  const std::uint64_t tag = tag_of(n);
  std::uint64_t w = word.load(std::memory_order_relaxed);
  for (;;) {
    // Left from an earlier turn of the ring (or never used): restart at 1.
    // A word from a later bucket (this thread read the clock a little
    // earlier than another) keeps its tag and takes the count.
    const std::uint64_t behind = ((tag >> count_bits) - (w >> count_bits)) & number_bits;
    const bool stale = (w & used) == 0 || (behind != 0 && behind <= number_bits / 2);
    const std::uint64_t next = stale ? (tag | 1) : w + 1;
    if (word.compare_exchange_weak(w, next, std::memory_order_relaxed, std::memory_order_relaxed)) return;
  }
}

throttle_counts throttle_window::add_current(throttle_counts c, std::int64_t n) const noexcept {
  const slot& s = ring_[slot_index(n)];
  const std::uint64_t tag = tag_of(n);
  const std::uint64_t requests = s.requests.load(std::memory_order_relaxed);
  const std::uint64_t accepts = s.accepts.load(std::memory_order_relaxed);
  c.requests += (requests & tag_mask()) == tag ? requests & count_mask : 0;
  c.accepts += (accepts & tag_mask()) == tag ? accepts & count_mask : 0;
  return c;
}

throttle_counts throttle_window::older_counts(std::int64_t n) const noexcept {
  throttle_counts c;
  for (int k = 1; k < buckets; ++k) c = add_current(c, n - k);
  return c;
}

throttle_counts throttle_window::counts(time_point now) const noexcept {
  const std::int64_t n = bucket_number(now);
  return add_current(older_counts(n), n);
}

throttle_counts throttle_window::admission_counts(time_point now) const noexcept {
  const std::int64_t n = bucket_number(now);
  const std::uint64_t seen = older_.sequence.load(std::memory_order_acquire);
  if ((seen & 1) == 0 && older_.number.load(std::memory_order_relaxed) == n) {
    const throttle_counts older{older_.requests.load(std::memory_order_relaxed),
                                older_.accepts.load(std::memory_order_relaxed)};
    std::atomic_thread_fence(std::memory_order_acquire);
    if (older_.sequence.load(std::memory_order_relaxed) == seen) return add_current(older, n);
  }
  // First admission in this bucket (or a writer at work): sum the older
  // buckets, and keep the sum unless another thread is keeping one.
  const throttle_counts older = older_counts(n);
  std::uint64_t expected = seen;
  if ((seen & 1) == 0 &&
      older_.sequence.compare_exchange_strong(expected, seen + 1, std::memory_order_relaxed, std::memory_order_relaxed)) {
    std::atomic_thread_fence(std::memory_order_release);
    older_.number.store(n, std::memory_order_relaxed);
    older_.requests.store(older.requests, std::memory_order_relaxed);
    older_.accepts.store(older.accepts, std::memory_order_relaxed);
    older_.sequence.store(seen + 2, std::memory_order_release);
  }
  return add_current(older, n);
}

adaptive_throttle_core::adaptive_throttle_core(adaptive_throttle_options o) : options_(std::move(o)), window_(options_.window()) {}

}  // namespace detail
}  // namespace resilience
