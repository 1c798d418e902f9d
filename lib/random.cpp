#include <resilience/random.hpp>

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
  return seed;
}

}  // namespace

double random_source::next_unit() const noexcept {
  if (counter_) {
    return to_unit(mix(counter_->fetch_add(golden_gamma, std::memory_order_relaxed) + golden_gamma));
  }
  thread_local std::uint64_t state = thread_seed();
  state += golden_gamma;
  return to_unit(mix(state));
}

}  // namespace resilience
