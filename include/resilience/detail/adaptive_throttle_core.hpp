// resilience/detail/adaptive_throttle_core.hpp — an adaptive throttle's
// shared state: the window of requests and accepts, lock-free, and the
// judgement. Not public API; included by adaptive_throttle.hpp after the
// options, and that header states the contract.
#pragma once

#include <resilience/clock.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>

namespace resilience {
namespace detail {

// The counts of the window, lock-free. Each bucket holds two words, requests
// and accepts; each word carries, above its count, a tag naming the bucket
// (a turn of the ring) it counts for. A record compares and swaps the whole
// word: it adds to a word of its own bucket, or restarts a word left from an
// earlier turn at 1, so no count is lost to a concurrent reset and none is
// added to the wrong bucket. A word whose tag is not the one the window
// expects for its slot is stale and read as zero.
class throttle_window {
 public:
  static constexpr int buckets = 12;

  explicit throttle_window(duration window) noexcept;
  throttle_window(const throttle_window&) = delete;
  throttle_window& operator=(const throttle_window&) = delete;

  void record(time_point now, bool accepted) noexcept {
    const std::int64_t n = bucket_number(now);
    slot& s = ring_[slot_index(n)];
    add(s.requests, n);
    if (accepted) add(s.accepts, n);
  }
  void record_request(time_point now) noexcept {
    const std::int64_t n = bucket_number(now);
    add(ring_[slot_index(n)].requests, n);
  }

  // Every bucket of the window, read now.
  throttle_counts counts(time_point now) const noexcept;
  // The same for an admission: the buckets before the current one change
  // only by the rare record made with a time read just before the bucket
  // turned, so their sum is kept once per bucket and only the current
  // bucket is read. Such a late record is missed here until the next bucket.
  throttle_counts admission_counts(time_point now) const noexcept;

 private:
  // 20 bits of tag (a bit set on every used word, and the bucket number's
  // low 19 bits) leave 44 of count: 10^13 calls a bucket.
  static constexpr int count_bits = 44;
  static constexpr std::uint64_t count_mask = (std::uint64_t{1} << count_bits) - 1;
  static constexpr std::uint64_t number_bits = 0x7ffff;
  static constexpr std::uint64_t used = std::uint64_t{0x80000} << count_bits;

  struct alignas(16) slot {
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> accepts{0};
  };

  // The bucket `now` falls in. A division costs more than the rest of a
  // record, so the last bucket found is kept: one load, one multiplication.
  std::int64_t bucket_number(time_point now) const noexcept {
    const std::int64_t ticks = now.time_since_epoch().count();
    const std::int64_t last = last_number_.load(std::memory_order_relaxed);
    // Unsigned: wraps where a signed difference could overflow, and is below
    // the bucket's width exactly when `now` is in the bucket.
    const std::uint64_t since = static_cast<std::uint64_t>(ticks) -
                                static_cast<std::uint64_t>(last) * static_cast<std::uint64_t>(bucket_ticks_);
    if (since < static_cast<std::uint64_t>(bucket_ticks_)) return last;
    // Floor division: a clock may read before its epoch.
    const std::int64_t n = ticks >= 0 ? ticks / bucket_ticks_ : -((-ticks - 1) / bucket_ticks_) - 1;
    last_number_.store(n, std::memory_order_relaxed);
    return n;
  }
  static std::size_t slot_index(std::int64_t n) noexcept {
    return static_cast<std::size_t>(((n % buckets) + buckets) % buckets);
  }
  // A fresh (all-zero) word lacks the `used` bit: stale for every bucket.
  static std::uint64_t tag_of(std::int64_t n) noexcept {
    return ((static_cast<std::uint64_t>(n) & number_bits) << count_bits) | used;
  }
  static std::uint64_t tag_mask() noexcept { return ~count_mask; }

  static void add(std::atomic<std::uint64_t>& word, std::int64_t n) noexcept;

  throttle_counts older_counts(std::int64_t n) const noexcept;
  throttle_counts add_current(throttle_counts c, std::int64_t n) const noexcept;

  // The sum of the buckets before bucket `number`, under a sequence lock:
  // odd while being written.
  struct older_sum {
    std::atomic<std::uint64_t> sequence{0};
    std::atomic<std::int64_t> number{std::numeric_limits<std::int64_t>::min()};
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> accepts{0};
  };

  std::int64_t bucket_ticks_;
  mutable std::atomic<std::int64_t> last_number_{0};
  std::array<slot, buckets> ring_;
  mutable older_sum older_;
};

// The state a throttle's stages share: options, window, and the judgement.
class adaptive_throttle_core {
 public:
  // It never waits, so it never outlasts a deadline.
  static constexpr bool respects_deadline = true;

  explicit adaptive_throttle_core(adaptive_throttle_options o);
  adaptive_throttle_core(const adaptive_throttle_core&) = delete;
  adaptive_throttle_core& operator=(const adaptive_throttle_core&) = delete;

  // The rejection probability for counts `c`.
  double probability(const throttle_counts& c) const noexcept {
    const double requests = static_cast<double>(c.requests);
    const double excess = requests - options_.k() * static_cast<double>(c.accepts);
    return excess > 0 ? excess / (requests + 1) : 0.0;
  }

  // Nothing when a call may go to the backend now; else the rejection,
  // counted as a request, for the caller to report.
  std::optional<throttle_event> refuse(time_point now) noexcept {
    const throttle_counts c = window_.admission_counts(now);
    const double p = probability(c);
    // A healthy backend costs no draw.
    if (p <= 0 || options_.random().next_unit() >= p) return std::nullopt;
    window_.record_request(now);
    rejections_.fetch_add(1, std::memory_order_relaxed);
    return throttle_event{p, c.requests, c.accepts};
  }

  void record(time_point now, bool accepted) noexcept { window_.record(now, accepted); }

  throttle_counts counts(time_point now) const noexcept { return window_.counts(now); }
  std::uint64_t rejections() const noexcept { return rejections_.load(std::memory_order_relaxed); }
  const adaptive_throttle_options& options() const noexcept { return options_; }

 private:
  adaptive_throttle_options options_;
  throttle_window window_;
  std::atomic<std::uint64_t> rejections_{0};
};

}  // namespace detail
}  // namespace resilience
