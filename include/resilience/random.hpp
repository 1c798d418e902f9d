// resilience/random.hpp — where jitter gets its randomness.
//
//   auto policy = resilience::retry_policy{}
//                     .random(resilience::random_source::seeded(42));  // reproducible
//
// The default source is per-thread and lock-free (never rand()). A seeded
// source is shared by every call that uses it: each draw advances one atomic
// counter by a fixed odd increment and passes it through a mixing function
// (SplitMix64), so it is thread-safe, lock-free, and gives the same sequence
// for the same order of draws.
//
// The seed is hashed into both the counter's start and its increment, so any
// two different seeds give unrelated sequences: seeds that differ by one, or
// by SplitMix64's own increment, do not give one sequence shifted by a draw.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace resilience {

class random_source {
 public:
  // Per-thread generator, seeded once per thread from std::random_device.
  random_source() noexcept = default;

  // A shared, reproducible sequence. Copies draw from the same sequence.
  static random_source seeded(std::uint64_t seed);

  // Uniform in [0, 1).
  double next_unit() const noexcept;

  bool is_seeded() const noexcept { return state_ != nullptr; }

 private:
  struct shared_state {
    std::atomic<std::uint64_t> counter;
    std::uint64_t increment;  // odd, fixed at seeding
  };
  static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

  std::shared_ptr<shared_state> state_;
};

}  // namespace resilience
