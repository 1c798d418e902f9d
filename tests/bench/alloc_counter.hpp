// Counts every call of the global operator new in this program, so a
// benchmark can report heap allocations per operation.
#pragma once

#include <atomic>
#include <cstddef>

namespace resilience::bench {
inline std::atomic<std::size_t> allocations{0};
}

// Replaceable global allocation functions ([new.delete]); defined once, in
// the benchmark's main translation unit.
#define RESILIENCE_BENCH_COUNT_ALLOCATIONS                                       \
  void* operator new(std::size_t n) {                                            \
    resilience::bench::allocations.fetch_add(1, std::memory_order_relaxed);     \
    if (void* p = std::malloc(n ? n : 1)) return p;                              \
    throw std::bad_alloc();                                                      \
  }                                                                              \
  void operator delete(void* p) noexcept { std::free(p); }                       \
  void operator delete(void* p, std::size_t) noexcept { std::free(p); }
