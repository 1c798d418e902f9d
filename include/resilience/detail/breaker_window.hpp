// resilience/detail/breaker_window.hpp — the outcomes a closed breaker judges.
//
// count_window: the last n calls. time_window: the calls of the last span of
// time, in slices that expire whole. Any number of threads record into one at
// once without a lock, and its counts are read without one: read during
// concurrent records they may be a few calls off, never out of range.
#pragma once

#include <resilience/clock.hpp>

#include <atomic>
#include <cstdint>
#include <memory>

namespace resilience::detail {

struct window_counts {
  std::uint64_t calls = 0, failures = 0, slow = 0;
};

__extension__ using breaker_uint128 = unsigned __int128;  // GCC and Clang; __extension__ quiets -Wpedantic

// One byte per call in a ring (bit 0: failed, bit 1: slow) and a running sum
// of both bits. Steady outcomes cost one read-modify-write per call: the
// ring's index; a slot that keeps its value is not written.
class count_window {
 public:
  explicit count_window(std::uint32_t n);
  count_window(const count_window&) = delete;
  count_window& operator=(const count_window&) = delete;

  void record(bool failure, bool slow) noexcept {
    const std::uint64_t i = head_.fetch_add(1, std::memory_order_relaxed);
    // i mod n by multiplication (Lemire's fastmod). The index is taken mod
    // 2^32 first: once every 4 billion calls the ring steps irregularly once.
    const std::uint64_t low = fastmod_m_ * static_cast<std::uint32_t>(i);
    const auto slot = static_cast<std::uint32_t>((static_cast<breaker_uint128>(low) * n_) >> 64);
    const auto v = static_cast<std::uint8_t>((failure ? 1 : 0) | (slow ? 2 : 0));
    auto& s = slots_[physical(slot)];
    if (s.load(std::memory_order_relaxed) == v) return;
    const std::uint8_t old = s.exchange(v, std::memory_order_relaxed);
    if (old != v) sums_.fetch_add(encode(v) - encode(old), std::memory_order_relaxed);
  }

  window_counts counts() const noexcept;
  // Empties the window. A call recorded meanwhile lands on either side.
  void clear() noexcept;

 private:
  // Consecutive slots sit on different cache lines (16 of them, round
  // robin), so threads recording at the same time rarely write one line.
  static constexpr std::uint32_t slot_lines = 16;
  std::uint32_t physical(std::uint32_t slot) const noexcept { return (slot % slot_lines) * stride_ + slot / slot_lines; }
  // Failures in the low half, slow calls in the high half. Linear, so deltas
  // may be added in any order.
  static std::uint64_t encode(std::uint8_t v) noexcept { return (v & 1u) + (std::uint64_t((v >> 1) & 1u) << 32); }

  std::unique_ptr<std::atomic<std::uint8_t>[]> slots_;
  std::uint64_t fastmod_m_;
  std::uint32_t n_;
  std::uint32_t stride_;
  alignas(64) std::atomic<std::uint64_t> head_{0};
  alignas(64) std::atomic<std::uint64_t> sums_{0};
  std::atomic<std::uint64_t> base_{0};  // head_ when the window was last cleared
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

 private:
  struct bucket;
  std::uint64_t slice(duration since_origin) const noexcept {
    return static_cast<std::uint64_t>(since_origin.count()) / width_;
  }

  std::unique_ptr<bucket[]> buckets_;
  std::uint32_t n_;
  std::uint64_t width_;  // ticks, at least 1
};

}  // namespace resilience::detail
