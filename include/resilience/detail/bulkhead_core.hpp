// resilience/detail/bulkhead_core.hpp — a bulkhead's shared state: the
// calls inside and waiting in one atomic word, and the queue of waiters.
// Not public API; included by bulkhead.hpp after the options, and that
// header states the contract.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace resilience {
namespace detail {

// A call waiting for a slot: a node in the bulkhead's queue, kept in the
// waiting coroutine's frame. Its links and `state` change under the
// bulkhead's mutex while it is queued.
struct bulkhead_waiter {
  enum class status : std::uint8_t { idle, queued, granted, timed_out, cancelled, full };

  bulkhead_waiter* prev = nullptr;
  bulkhead_waiter* next = nullptr;
  status state = status::idle;
  // Called under the core's lock once a grant took the node out of the
  // queue; it only posts the waiter's resumption.
  void (*granted)(bulkhead_waiter*) noexcept = nullptr;
};

// The shared state. One 64-bit word holds the calls inside (low half) and
// the calls waiting (high half), so the lock-free paths see both at once:
// an admission can never slip past a waiter, and a release can never miss
// one. The waiting count and the queue change only under the mutex.
class bulkhead_core {
 public:
  // A queued call's wait is bounded by max_wait, not by the context's
  // deadline: a deadline stage outside keeps its timer.
  static constexpr bool respects_deadline = false;

  explicit bulkhead_core(bulkhead_options o) : options_(std::move(o)) {}
  bulkhead_core(const bulkhead_core&) = delete;
  bulkhead_core& operator=(const bulkhead_core&) = delete;

  // A slot if one is free and nobody waits.
  bool try_acquire() noexcept {
    std::uint64_t w = word_.load(std::memory_order_relaxed);
    while ((w >> 32) == 0 && (w & low) < options_.max_concurrent()) {
      if (word_.compare_exchange_weak(w, w + 1, std::memory_order_acquire, std::memory_order_relaxed)) return true;
    }
    return false;
  }

  // Gives a slot back, to the first waiter if there is one.
  void release() noexcept {
    std::uint64_t w = word_.load(std::memory_order_relaxed);
    while ((w >> 32) == 0) {
      if (word_.compare_exchange_weak(w, w - 1, std::memory_order_release, std::memory_order_relaxed)) return;
    }
    release_slow();
  }

  enum class admission : std::uint8_t { acquired, queued, full };
  // Takes a slot, or queues `n`, or neither when the queue is full; sets
  // n.state to granted, queued or full to match.
  admission acquire_or_enqueue(bulkhead_waiter& n) noexcept;
  // Takes `n` out of the queue with `why` (timed_out, cancelled). False
  // when it has left already (granted, or taken out before).
  bool withdraw(bulkhead_waiter& n, bulkhead_waiter::status why) noexcept;
  // For a waiter that will never resume (its context shutting down, or its
  // frame destroyed): out of the queue, or the slot it was granted and never
  // used given back. A second call does nothing.
  void abandon(bulkhead_waiter& n) noexcept;

  // Every slot taken and the queue at its limit.
  bool queue_full() const noexcept {
    const std::uint64_t w = word_.load(std::memory_order_relaxed);
    return (w >> 32) >= options_.max_queue() && ((w >> 32) != 0 || (w & low) >= options_.max_concurrent());
  }

  std::uint32_t in_flight() const noexcept {
    return static_cast<std::uint32_t>(word_.load(std::memory_order_relaxed) & low);
  }
  std::uint32_t queued() const noexcept {
    return static_cast<std::uint32_t>(word_.load(std::memory_order_relaxed) >> 32);
  }
  const bulkhead_options& options() const noexcept { return options_; }

 private:
  static constexpr std::uint64_t low = 0xffffffffu;
  static constexpr std::uint64_t one_waiter = std::uint64_t{1} << 32;

  void release_slow() noexcept;
  void unlink_locked(bulkhead_waiter& n) noexcept;

  bulkhead_options options_;
  alignas(64) std::atomic<std::uint64_t> word_{0};
  std::mutex mutex_;
  bulkhead_waiter* head_ = nullptr;
  bulkhead_waiter* tail_ = nullptr;
};

}  // namespace detail
}  // namespace resilience
