// resilience/detail/rate_limiter_core.hpp — a rate limiter's shared state:
// the algorithm's books (a token bucket or a sliding window) and the queue of
// waiting calls, thread-safe; compiled in lib/rate_limiter.cpp but for the
// lock-free token take. Not public API; included by rate_limiter.hpp after
// the options, and that header states the contract.
#pragma once

#include <resilience/clock.hpp>

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>

namespace resilience {
namespace detail {

// A call waiting for a permit: a node in the limiter's queue, kept in the
// waiting coroutine's frame. Links and `queued` change under the queue's lock.
struct rate_limit_waiter {
  rate_limit_waiter* prev = nullptr;
  rate_limit_waiter* next = nullptr;
  bool queued = false;
  std::uint8_t early_wakes = 0;  // woken with its permit free but a waiter ahead still there
};

// What the queue said to a call that found no permit free.
struct rate_limit_turn {
  enum class kind : std::uint8_t { granted, wait, rejected };
  kind what;
  time_point at;                    // wait: when its permit should be free
  rate_limit_reject_reason reason;  // rejected: why
  duration retry_after;             // rejected: until a permit would be free for it
};

// The shared state: the algorithm's books and the waiters' queue.
class rate_limiter_core {
 public:
  // No call waits for a permit past the context's deadline.
  static constexpr bool respects_deadline = true;

  explicit rate_limiter_core(rate_limiter_options o);
  ~rate_limiter_core();
  rate_limiter_core(const rate_limiter_core&) = delete;
  rate_limiter_core& operator=(const rate_limiter_core&) = delete;

  // A permit if one is free and nobody waits.
  bool try_acquire(time_point now) noexcept {
    if (waiting_.load(std::memory_order_acquire) != 0) return false;
    return take(now);
  }

  // Under the queue's lock: a permit if one is free and nobody waits;
  // else a rejection (queue full, or the permit too late for `give_up` or
  // `deadline`), or `n` queued with the time to wake at.
  rate_limit_turn enqueue(rate_limit_waiter& n, time_point now, time_point give_up, time_point deadline) noexcept;
  // A queued waiter woken: its permit if it is first and one is free; else
  // the time to wake again, or a rejection (taken out of the queue).
  rate_limit_turn wake(rate_limit_waiter& n, time_point now, time_point give_up, time_point deadline) noexcept;
  // Out of the queue; false if it was not in it.
  bool withdraw(rate_limit_waiter& n) noexcept;

  // Until a permit would be free for a call arriving at `now`, waiters
  // ahead of it counted; zero if one is free.
  duration time_until_permit(time_point now) const noexcept;
  std::uint32_t queued() const noexcept { return waiting_.load(std::memory_order_relaxed); }
  const rate_limiter_options& options() const noexcept { return options_; }

 private:
  using ticks = std::int64_t;
  static ticks count(time_point t) noexcept { return t.time_since_epoch().count(); }

  bool take(time_point now) noexcept {
    if (options_.kind() == rate_limiter_options::algorithm::token_bucket) return bucket_take(count(now));
    return window_take(now);
  }

  // GCRA: tat_ is when the bucket would be full again were no more taken.
  // A token is free while tat_ is at most `tau_` ahead of now.
  bool bucket_take(ticks now) noexcept {
    ticks tat = tat_.load(std::memory_order_relaxed);
    for (;;) {
      const ticks base = tat > now ? tat : now;
      if (base - now > tau_) return false;
      if (base > std::numeric_limits<ticks>::max() - interval_) return false;  // the end of time
      if (tat_.compare_exchange_weak(tat, base + interval_, std::memory_order_acq_rel, std::memory_order_relaxed))
        return true;
    }
  }

  bool window_take(time_point now) noexcept;
  // When the `k`-th permit from now (1: the next) would be free, if only
  // the waiters ahead took permits meanwhile.
  time_point permit_time(time_point now, std::uint64_t k) const noexcept;
  time_point bucket_permit_time(time_point now, std::uint64_t k) const noexcept;
  time_point window_permit_time(time_point now, std::uint64_t k) const noexcept;
  rate_limit_turn decide(time_point at, time_point now, time_point give_up, time_point deadline) const noexcept;
  // The time between two permits at the configured rate (a segment for the
  // sliding window).
  duration permit_spacing() const noexcept;
  void unlink_locked(rate_limit_waiter& n) noexcept;

  rate_limiter_options options_;
  // Token bucket.
  ticks interval_ = 1;
  ticks tau_ = 0;
  alignas(64) std::atomic<ticks> tat_{std::numeric_limits<ticks>::min()};
  // Sliding window (lib/): counts per segment, under its own lock.
  struct window_books;
  std::unique_ptr<window_books> window_;
  // The queue.
  alignas(64) std::atomic<std::uint32_t> waiting_{0};
  std::mutex mutex_;
  rate_limit_waiter* head_ = nullptr;
  rate_limit_waiter* tail_ = nullptr;
};

// Out of the queue however the wait ends (a frame destroyed unresumed
// included). The caller's slot is emptied by the wait when it resumes
// (leave_slot), never from here: a frame destroyed unresumed, as its context
// shuts down, may outlive the signal behind that slot (a hedged attempt's).
struct rate_limit_wait_guard {
  rate_limiter_core* core;
  rate_limit_waiter* node;
  boost::asio::cancellation_slot slot;
  ~rate_limit_wait_guard() { core->withdraw(*node); }
  void leave_slot() noexcept {
    if (slot.is_connected()) slot.clear();
    slot = {};
  }
};

// Takes a waiter out of the queue the moment its caller is cancelled, then
// ends its timer's wait.
struct rate_limit_canceller {
  rate_limit_canceller(rate_limiter_core* c, rate_limit_waiter* n, boost::asio::cancellation_signal* t) noexcept
      : core(c), node(n), timer(t) {}
  rate_limiter_core* core;
  rate_limit_waiter* node;
  boost::asio::cancellation_signal* timer;
  void operator()(boost::asio::cancellation_type type) {
    if (type == boost::asio::cancellation_type::none) return;
    core->withdraw(*node);
    timer->emit(type);
  }
};

}  // namespace detail
}  // namespace resilience
