// A retry ratio budget kept behind one std::mutex: the baseline the lock-free
// budgets are measured against (retry_budget_bench.cpp, contention.cpp).
#pragma once

#include <resilience/clock.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>

namespace resilience::bench {

// The ratio budget's buckets behind one mutex, on the same coarse clock.
class mutex_ratio_budget {
 public:
  void record(bool /*failed*/, bool first_attempt) {
    if (!first_attempt) return;
    const auto now = resilience::detail::coarse_now(resilience::steady_clock{});
    std::lock_guard lock(mutex_);
    bucket_at(now).calls++;
  }
  bool try_retry() {
    const auto now = resilience::detail::coarse_now(resilience::steady_clock{});
    std::lock_guard lock(mutex_);
    std::uint64_t calls = 0, retries = 0;
    const std::int64_t current = number_of(now);
    for (const auto& b : ring_)
      if (b.number > current - buckets) calls += b.calls, retries += b.retries;
    if (static_cast<double>(retries) >= 0.1 * static_cast<double>(calls) + 100) return false;
    bucket_at(now).retries++;
    return true;
  }

 private:
  static constexpr int buckets = 10;
  struct bucket {
    std::int64_t number = -1;
    std::uint64_t calls = 0, retries = 0;
  };
  static std::int64_t number_of(resilience::time_point t) {
    return t.time_since_epoch() / std::chrono::seconds(1);  // a 10 s window in tenths
  }
  bucket& bucket_at(resilience::time_point t) {
    const std::int64_t n = number_of(t);
    bucket& b = ring_[static_cast<std::size_t>(n % buckets)];
    if (b.number != n) b = bucket{n, 0, 0};
    return b;
  }
  std::mutex mutex_;
  std::array<bucket, buckets> ring_{};
};

}  // namespace resilience::bench
