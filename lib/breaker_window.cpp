// The breaker's windows: their slow parts (counting, clearing, rollover).
#include <resilience/detail/breaker_window.hpp>

#include <algorithm>
#include <bit>
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

// -- thread numbers (detail/thread_number.hpp) --

namespace {
std::atomic<std::uint32_t> thread_numbers{0};
}  // namespace

std::uint32_t new_thread_number() noexcept {
  std::uint32_t n = thread_numbers.fetch_add(1, std::memory_order_relaxed) + 1;
  if (n == 0) n = thread_numbers.fetch_add(1, std::memory_order_relaxed) + 1;  // 0 means "unnumbered"
  this_thread_number = n;
  return n;
}

// -- count window --


count_window::count_window(std::uint32_t n)
    : n_(n), words_((n + 63) / 64), batch_(std::min<std::uint64_t>(64, n)) {
  if (n <= inline_calls) {
    bits_ = inline_bits_;
  } else {
    heap_bits_ = std::make_unique<std::atomic<std::uint64_t>[]>(std::size_t(words_) * 2);
    bits_ = heap_bits_.get();
  }
}

std::uint64_t count_window::pending() const noexcept {
  std::uint64_t p = 0;
  for (const shard& s : shards_) p += s.pending.load(std::memory_order_relaxed);
  return p;
}

namespace {
// Bits [from, from + len) of a word; len in 1..64.
std::uint64_t bit_range(std::uint32_t from, std::uint32_t len) noexcept {
  return (len == 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << len) - 1) << from;
}
}  // namespace

std::uint64_t count_window::clear_range(std::uint32_t pos, std::uint64_t k) noexcept {
  if (k == 0) return 0;
  if (k > n_) k = n_;  // the ring holds the last n of them
  auto left = static_cast<std::uint32_t>(k);
  std::uint64_t delta = 0;
  for (;;) {
    const std::uint32_t bit = pos % 64;
    std::uint32_t len = std::min(64 - bit, n_ - pos);
    if (len > left) len = left;
    const std::uint64_t mask = bit_range(bit, len);
    std::atomic<std::uint64_t>* word = &bits_[2 * (pos / 64)];
    // Read first: a success over a success writes nothing.
    if (const std::uint64_t f = word[0].load(std::memory_order_relaxed) & mask; f != 0)
      delta -= std::uint64_t(std::popcount(word[0].fetch_and(~mask, std::memory_order_relaxed) & mask));
    if (const std::uint64_t s = word[1].load(std::memory_order_relaxed) & mask; s != 0)
      delta -= std::uint64_t(std::popcount(word[1].fetch_and(~mask, std::memory_order_relaxed) & mask)) << 32;
    left -= len;
    if (left == 0) return delta;
    pos += len;
    if (pos == n_) pos = 0;
  }
}

void count_window::place_pending(shard& s) noexcept {
  const std::uint64_t k = s.pending.exchange(0, std::memory_order_relaxed);
  if (k == 0) return;
  const std::uint64_t i = head_.fetch_add(k, std::memory_order_relaxed);
  if (const std::uint64_t delta = clear_range(static_cast<std::uint32_t>(i % n_), k))
    sums_.fetch_add(delta, std::memory_order_relaxed);
}

window_counts count_window::record_now(bool failure, bool slow) noexcept {
  const unsigned v = (failure ? 1u : 0u) | (slow ? 2u : 0u);
  // Every success recorded before this call goes in before it.
  std::uint64_t k = 0;
  for (shard& s : shards_)
    if (s.pending.load(std::memory_order_relaxed) != 0) k += s.pending.exchange(0, std::memory_order_relaxed);
  const std::uint64_t i = head_.fetch_add(k + 1, std::memory_order_relaxed);
  const auto first = static_cast<std::uint32_t>(i % n_);
  std::uint64_t delta = clear_range(first, k);
  // (i + k) mod n, without a second division when k < n.
  std::uint64_t pos = k < n_ ? first + k : (i + k) % n_;
  if (pos >= n_) pos -= n_;
  const std::uint64_t bit = std::uint64_t(1) << (pos % 64);
  for (std::uint32_t half = 0; half < 2; ++half) {
    std::atomic<std::uint64_t>& word = bits_[2 * (pos / 64) + half];
    const std::uint64_t one = std::uint64_t(1) << (32 * half);
    const bool want = (v >> half) & 1u;
    if (((word.load(std::memory_order_relaxed) & bit) != 0) == want) continue;
    if (want) {
      if ((word.fetch_or(bit, std::memory_order_relaxed) & bit) == 0) delta += one;
    } else {
      if ((word.fetch_and(~bit, std::memory_order_relaxed) & bit) != 0) delta -= one;
    }
  }
  const std::uint64_t sums = delta ? sums_.fetch_add(delta, std::memory_order_relaxed) + delta
                                   : sums_.load(std::memory_order_relaxed);
  // The counts right after this call: what evaluating it needs, without
  // reading the shards again.
  const std::uint64_t head = i + k + 1;
  const std::uint64_t base = base_.load(std::memory_order_relaxed);
  window_counts c;
  c.calls = std::min<std::uint64_t>(head > base ? head - base : 0, n_);
  const decoded d = decode(sums);
  c.failures = d.failures;
  c.slow = d.slow;
  return clamped(c);
}

window_counts count_window::counts() const noexcept {
  window_counts c;
  // Pending successes are read as if placed now: they push the oldest calls
  // out of a full ring.
  const std::uint64_t p = pending();
  const std::uint64_t head = head_.load(std::memory_order_relaxed);
  const std::uint64_t base = base_.load(std::memory_order_relaxed);
  const std::uint64_t placed = head > base ? head - base : 0;
  c.calls = std::min<std::uint64_t>(placed + p, n_);
  const decoded d = decode(sums_.load(std::memory_order_relaxed));
  std::uint64_t failures = d.failures, slow = d.slow;
  if (p != 0 && placed != 0) {
    if (p >= n_) {
      failures = slow = 0;
    } else {
      // The calls at [head, head + p): the oldest ones, if the ring is full,
      // and empty slots if not.
      auto pos = static_cast<std::uint32_t>(head % n_);
      std::uint64_t k = p;
      std::uint64_t out_f = 0, out_s = 0;
      while (k != 0) {
        const std::uint32_t w = pos / 64, bit = pos % 64;
        const std::uint32_t len = static_cast<std::uint32_t>(std::min<std::uint64_t>({64u - bit, n_ - pos, k}));
        const std::uint64_t mask = bit_range(bit, len);
        out_f += static_cast<std::uint64_t>(std::popcount(bits_[2 * w].load(std::memory_order_relaxed) & mask));
        out_s += static_cast<std::uint64_t>(std::popcount(bits_[2 * w + 1].load(std::memory_order_relaxed) & mask));
        k -= len;
        pos += len;
        if (pos == n_) pos = 0;
      }
      failures = failures > out_f ? failures - out_f : 0;
      slow = slow > out_s ? slow - out_s : 0;
    }
  }
  c.failures = failures;
  c.slow = slow;
  return clamped(c);
}

void count_window::clear() noexcept {
  for (shard& s : shards_) s.pending.store(0, std::memory_order_relaxed);
  // Exchanges keep the sums equal to the ring's contents even if a call
  // records concurrently.
  for (std::uint32_t w = 0; w < words_; ++w) {
    for (std::uint32_t half = 0; half < 2; ++half) {
      const std::uint64_t old = bits_[2 * w + half].exchange(0, std::memory_order_relaxed);
      if (old != 0) sums_.fetch_sub(std::uint64_t(std::popcount(old)) << (32 * half), std::memory_order_relaxed);
    }
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
