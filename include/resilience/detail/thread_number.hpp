// A small number for the calling thread, to spread shared counters over
// per-thread shards (a breaker's count window, a retry budget's calls).
#pragma once

#include <cstdint>

namespace resilience::detail {

// Threads are numbered 1, 2, 3, ... as they first ask; the number is the
// thread's for its lifetime. 0 is never returned.
std::uint32_t new_thread_number() noexcept;

inline constinit thread_local std::uint32_t this_thread_number = 0;

inline std::uint32_t thread_number() noexcept {
  const std::uint32_t n = this_thread_number;
  if (n == 0) [[unlikely]]
    return new_thread_number();
  return n;
}

}  // namespace resilience::detail
