// resilience/detail/breaker_window.hpp — the outcomes a closed breaker judges.
//
// count_window: the last n calls. time_window: the calls of the last span of
// time, in slices that expire whole. Any number of threads record into one at
// once without a lock, and its counts are read without one: read during
// concurrent records they may be a few calls off, never out of range.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/detail/thread_number.hpp>

#include <atomic>
#include <cstdint>
#include <memory>

namespace resilience::detail {

struct window_counts {
  std::uint64_t calls = 0, failures = 0, slow = 0;
};

// The last n calls, as two bits per call (failed, slow) in a ring of 64-bit
// words, and a running sum of each kind of bit.
//
// A plain success (neither failed nor slow) is only counted where it is
// recorded: in the caller's thread's shard, a line of its own, with no write
// to anything another thread reads per call. Those successes take their
// places in the ring later, all at once: when the shard holds `batch` of
// them, or when any call records a failure or a slow call, which first
// places every shard's pending successes, then itself after them. So a
// success that happened before a failure (on any thread) is in the ring
// before it, as if each call had taken its place as it was recorded: the
// order of successes among themselves changes nothing, and a failure or slow
// call takes its place at once. counts() reads the successes still pending as
// if placed at the head, so it too sees every call recorded before it. (The
// one exception: successes another failure is placing at that moment, taken
// from their shard but not yet in the ring, may land after a failure that
// came later; a few calls off, while three calls race.)
//
// A run of identical outcomes writes nothing shared per call: successes touch
// their shard; the ring's words are read before any write, and written only
// where a bit changes. The line everyone shares (the head, the sums, the
// consecutive-failure count and, for windows of up to 128 calls, the ring
// itself) is written once per failure, slow call or batch (and, when
// consecutive failures are counted, by the first success after a failure).
class count_window {
 public:
  explicit count_window(std::uint32_t n);
  count_window(const count_window&) = delete;
  count_window& operator=(const count_window&) = delete;

  // A call that neither failed nor was slow.
  void record_success() noexcept {
    shard& s = shards_[shard_index()];
    if (s.pending.fetch_add(1, std::memory_order_relaxed) + 1 >= batch_) [[unlikely]]
      place_pending(s);
  }
  // A call that failed or was slow (or both): it takes its place at once.
  // Returns the counts as this call left them.
  window_counts record_now(bool failure, bool slow) noexcept;

  window_counts counts() const noexcept;
  // Empties the window. A call recorded meanwhile lands on either side.
  void clear() noexcept;

  // Consecutive failures, kept by the breaker: on the line a failure writes
  // anyway.
  std::atomic<std::uint32_t>& run() noexcept { return run_; }
  const std::atomic<std::uint32_t>& run() const noexcept { return run_; }

 private:
  static constexpr std::uint32_t shard_count = 8;  // a power of 2
  static constexpr std::uint32_t inline_calls = 128;
  struct alignas(64) shard {
    std::atomic<std::uint64_t> pending{0};  // successes recorded here, not yet in the ring
  };
  // Threads are numbered as they first record into any count window; thread
  // k records into shard k mod shard_count. Shared shards stay correct (the
  // count is atomic); they only cost the sharing.
  static std::uint32_t shard_index() noexcept { return thread_number() & (shard_count - 1); }

  void place_pending(shard& s) noexcept;
  // Successes at the k positions of the ring from `pos` (0 to n - 1) on;
  // returns the change to sums_ it made.
  std::uint64_t clear_range(std::uint32_t pos, std::uint64_t k) noexcept;
  std::uint64_t pending() const noexcept;

  // Read-only after construction. Word 2w holds calls 64w to 64w + 63's
  // failure bits, word 2w + 1 their slow bits.
  std::unique_ptr<std::atomic<std::uint64_t>[]> heap_bits_;
  std::atomic<std::uint64_t>* bits_;
  std::uint32_t n_;
  std::uint32_t words_;  // pairs of words
  std::uint64_t batch_;
  shard shards_[shard_count];
  // Written once per failure, slow call or batch of successes.
  alignas(64) std::atomic<std::uint64_t> head_{0};  // calls placed in the ring
  // Failures in the low half, slow calls in the high half, changed by signed
  // deltas (linear, so they may be added in any order).
  std::atomic<std::uint64_t> sums_{0};
  std::atomic<std::uint64_t> base_{0};  // head_ when the window was last cleared
  std::atomic<std::uint32_t> run_{0};
  std::atomic<std::uint64_t> inline_bits_[inline_calls / 32]{};  // the ring, for n up to inline_calls
};

// `buckets` slices of span / buckets each. A call lands in the slice of the
// time it is recorded, given as time since the breaker's origin (never
// negative); a slice is reused once it is a whole window old.
class time_window {
 public:
  time_window(duration span, std::uint32_t buckets);
  ~time_window();
  time_window(const time_window&) = delete;
  time_window& operator=(const time_window&) = delete;

  void record(duration since_origin, bool failure, bool slow) noexcept;
  window_counts counts(duration since_origin) const noexcept;
  void clear() noexcept;

  // Consecutive failures, kept by the breaker.
  std::atomic<std::uint32_t>& run() noexcept { return run_; }
  const std::atomic<std::uint32_t>& run() const noexcept { return run_; }

 private:
  struct bucket;
  std::uint64_t slice(duration since_origin) const noexcept {
    return static_cast<std::uint64_t>(since_origin.count()) / width_;
  }

  std::unique_ptr<bucket[]> buckets_;
  std::uint32_t n_;
  std::uint64_t width_;  // ticks, at least 1
  alignas(64) std::atomic<std::uint32_t> run_{0};
};

}  // namespace resilience::detail
