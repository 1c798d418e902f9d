// The baseline the breaker benchmarks compare against: what a breaker
// guarded by one mutex does per call in the closed state, with the
// benchmarks' options (a 100-call count window, failure ratio 0.5 after 20
// calls).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace resilience::bench {

class mutex_breaker {
 public:
  bool try_acquire() {
    std::lock_guard lock(mutex_);
    return open_until_ <= 0;
  }
  void record(bool failure) {
    std::lock_guard lock(mutex_);
    const bool old = window_[next_];
    window_[next_] = failure;
    next_ = next_ + 1 == window_.size() ? 0 : next_ + 1;
    if (calls_ < window_.size()) ++calls_;
    failures_ += static_cast<int>(failure) - static_cast<int>(old);
    consecutive_ = failure ? consecutive_ + 1 : 0;
    if (failure && calls_ >= 20 && failures_ * 2 >= static_cast<int>(calls_)) open_until_ = 1;
  }

 private:
  std::mutex mutex_;
  std::array<bool, 100> window_{};
  std::size_t next_ = 0;
  std::size_t calls_ = 0;
  int failures_ = 0;
  int consecutive_ = 0;
  std::int64_t open_until_ = 0;
};

}  // namespace resilience::bench
