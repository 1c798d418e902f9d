#include <resilience/random.hpp>

#include <bit>
#include <random>

namespace resilience {
namespace {

constexpr std::uint64_t golden_gamma = 0x9e3779b97f4a7c15ULL;

// SplitMix64's output function: a bijective mixer, good enough for jitter and
// cheap enough that it never matters.
std::uint64_t mix(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// MurmurHash3's finalizer: a second bijective mixer, unrelated to mix(), so a
// seed's hashed start has no arithmetic relation to the values drawn.
std::uint64_t murmur_mix(std::uint64_t z) noexcept {
  z = (z ^ (z >> 33)) * 0xff51afd7ed558ccdULL;
  z = (z ^ (z >> 33)) * 0xc4ceb9fe1a85ec53ULL;
  return z ^ (z >> 33);
}

// An increment derived from the seed, as SplittableRandom's mixGamma: odd (so
// the counter visits all 2^64 values) and with enough bit transitions that
// successive counters differ in many bits. A third mixer (Stafford's Mix01)
// keeps it unrelated to both the start and the values drawn.
std::uint64_t increment_for(std::uint64_t seed) noexcept {
  std::uint64_t gamma = (seed ^ (seed >> 31)) * 0x7fb5d329728ea185ULL;
  gamma = (gamma ^ (gamma >> 27)) * 0x81dadef4bc2dd44dULL;
  gamma = (gamma ^ (gamma >> 33)) | 1;
  if (std::popcount(gamma ^ (gamma >> 1)) < 24) gamma ^= 0xaaaaaaaaaaaaaaaaULL;
  return gamma;
}

double to_unit(std::uint64_t bits) noexcept {
  // Top 53 bits give every double in [0, 1) at equal spacing.
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

std::uint64_t thread_seed() noexcept {
  // Mixing in the state's own address keeps threads apart even if the device
  // is unavailable and we fall back to it alone.
  thread_local char anchor;
  std::uint64_t seed = reinterpret_cast<std::uintptr_t>(&anchor);
  try {
    std::random_device device;
    seed ^= (static_cast<std::uint64_t>(device()) << 32) ^ device();
  } catch (...) {
  }
  // Hashed, so that nearby addresses do not start nearby on the counter.
  return murmur_mix(seed);
}

}  // namespace

random_source random_source::seeded(std::uint64_t seed) {
  // The seed is hashed, never used as the counter itself: with a raw start,
  // seeded(s + increment) would repeat seeded(s) one draw later. A different
  // increment per seed also keeps apart two seeds whose hashed starts happen
  // to lie a few increments from each other.
  random_source r;
  r.state_ = std::make_shared<shared_state>();
  r.state_->counter.store(murmur_mix(seed), std::memory_order_relaxed);
  r.state_->increment = increment_for(seed);
  return r;
}

double random_source::next_unit() const noexcept {
  if (state_) {
    const std::uint64_t step = state_->increment;
    return to_unit(mix(state_->counter.fetch_add(step, std::memory_order_relaxed) + step));
  }
  thread_local std::uint64_t state = thread_seed();
  state += golden_gamma;
  return to_unit(mix(state));
}

}  // namespace resilience
