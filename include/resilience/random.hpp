// resilience/random.hpp — where jitter gets its randomness.
//
//   auto policy = resilience::retry_policy{}
//                     .random(resilience::random_source::seeded(42));  // reproducible
//
// The default source is per-thread and lock-free (never rand()). A seeded
// source is shared by every call that uses it: each draw takes the next value
// of one atomic counter through a mixing function, so it is thread-safe,
// lock-free, and gives the same sequence for the same order of draws.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace resilience {

class random_source {
 public:
  // Per-thread generator, seeded once per thread from std::random_device.
  random_source() noexcept = default;

  static random_source seeded(std::uint64_t seed) {
    random_source r;
    r.counter_ = std::make_shared<std::atomic<std::uint64_t>>(seed);
    return r;
  }

  // Uniform in [0, 1).
  double next_unit() const noexcept;

  bool is_seeded() const noexcept { return counter_ != nullptr; }

 private:
  std::shared_ptr<std::atomic<std::uint64_t>> counter_;
};

}  // namespace resilience
