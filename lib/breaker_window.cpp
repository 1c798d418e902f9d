// The breaker's windows: their slow parts (counting, clearing, rollover).
#include <resilience/detail/breaker_window.hpp>

#include <algorithm>
#include <limits>

namespace resilience::detail {

namespace {

struct decoded {
  std::uint64_t failures, slow;
};

// Sums are built from signed deltas; a reader racing a writer may see a
// half at -1 for a moment, so each half is read as signed and clamped.
decoded decode(std::uint64_t sums) noexcept {
  const auto failures = static_cast<std::int32_t>(static_cast<std::uint32_t>(sums));
  const auto slow =
      static_cast<std::int32_t>(static_cast<std::uint32_t>((sums - std::uint64_t(std::int64_t(failures))) >> 32));
  return {static_cast<std::uint64_t>(std::max(failures, 0)), static_cast<std::uint64_t>(std::max(slow, 0))};
}

window_counts clamped(window_counts c) noexcept {
  c.failures = std::min(c.failures, c.calls);
  c.slow = std::min(c.slow, c.calls);
  return c;
}

}  // namespace

// -- count window --

count_window::count_window(std::uint32_t n)
    : fastmod_m_(std::numeric_limits<std::uint64_t>::max() / n + 1), n_(n) {
  const std::uint32_t per_line = (n + slot_lines - 1) / slot_lines;
  stride_ = (per_line + 63) / 64 * 64;
  slots_ = std::make_unique<std::atomic<std::uint8_t>[]>(std::size_t(stride_) * slot_lines);
}

window_counts count_window::counts() const noexcept {
  window_counts c;
  const std::uint64_t head = head_.load(std::memory_order_relaxed);
  const std::uint64_t base = base_.load(std::memory_order_relaxed);
  c.calls = std::min<std::uint64_t>(head > base ? head - base : 0, n_);
  const decoded d = decode(sums_.load(std::memory_order_relaxed));
  c.failures = d.failures;
  c.slow = d.slow;
  return clamped(c);
}

void count_window::clear() noexcept {
  // Exchanges keep the sums equal to the slots' contents even if a call
  // records concurrently.
  for (std::uint32_t i = 0; i < n_; ++i) {
    const std::uint8_t old = slots_[physical(i)].exchange(0, std::memory_order_relaxed);
    if (old != 0) sums_.fetch_sub(encode(old), std::memory_order_relaxed);
  }
  base_.store(head_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

// -- time window --

// `tag` is the slice's number since the origin; a bucket whose tag is a
// window old or more holds nothing current.
struct time_window::bucket {
  static constexpr std::uint64_t empty = std::numeric_limits<std::uint64_t>::max();
  std::atomic<std::uint64_t> tag{empty};
  std::atomic<std::int64_t> calls{0};
  std::atomic<std::uint64_t> sums{0};  // failures in the low half, slow calls in the high half
};

time_window::time_window(duration span, std::uint32_t buckets)
    : buckets_(std::make_unique<bucket[]>(buckets)),
      n_(buckets),
      width_(std::max<std::uint64_t>(static_cast<std::uint64_t>(span.count()) / buckets, 1)) {}

time_window::~time_window() = default;

void time_window::record(duration since_origin, bool failure, bool slow) noexcept {
  const std::uint64_t index = slice(since_origin);
  bucket& b = buckets_[index % n_];
  std::uint64_t tag = b.tag.load(std::memory_order_acquire);
  if (tag != index && (tag == bucket::empty || tag < index) &&
      b.tag.compare_exchange_strong(tag, index, std::memory_order_acq_rel)) {
    // This call starts the slice: take out what the slice held a window
    // ago. A call racing the rollover may land in either slice.
    b.calls.fetch_sub(b.calls.load(std::memory_order_relaxed), std::memory_order_relaxed);
    b.sums.fetch_sub(b.sums.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  b.calls.fetch_add(1, std::memory_order_relaxed);
  if (failure || slow)
    b.sums.fetch_add((failure ? 1u : 0u) + (std::uint64_t(slow ? 1 : 0) << 32), std::memory_order_relaxed);
}

window_counts time_window::counts(duration since_origin) const noexcept {
  window_counts c;
  const std::uint64_t current = slice(since_origin);
  for (std::uint32_t i = 0; i < n_; ++i) {
    const bucket& b = buckets_[i];
    const std::uint64_t tag = b.tag.load(std::memory_order_acquire);
    if (tag == bucket::empty || tag > current || current - tag >= n_) continue;  // expired
    c.calls += static_cast<std::uint64_t>(std::max<std::int64_t>(b.calls.load(std::memory_order_relaxed), 0));
    const decoded d = decode(b.sums.load(std::memory_order_relaxed));
    c.failures += d.failures;
    c.slow += d.slow;
  }
  return clamped(c);
}

void time_window::clear() noexcept {
  for (std::uint32_t i = 0; i < n_; ++i) {
    buckets_[i].tag.store(bucket::empty, std::memory_order_release);
    buckets_[i].calls.store(0, std::memory_order_relaxed);
    buckets_[i].sums.store(0, std::memory_order_relaxed);
  }
}

}  // namespace resilience::detail
