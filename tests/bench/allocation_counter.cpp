// Every heap allocation, whoever makes it: operator new ends in malloc, and
// Asio's recycling allocator calls aligned_alloc directly when its per-thread
// cache misses, which an operator new hook alone would never see. These
// replace glibc's entry points and forward to its internal ones. A sanitizer
// build keeps its own allocator (RESILIENCE_BENCH_NO_ALLOCATION_HOOKS).
#include "allocation_counter.hpp"

std::atomic<std::size_t> resilience::bench::allocations{0};

namespace {
// Static TLS of a trivial type: reading it in malloc needs no allocation.
thread_local std::size_t this_thread_allocations = 0;
}  // namespace

std::size_t resilience::bench::thread_allocations() noexcept { return this_thread_allocations; }

#ifdef RESILIENCE_BENCH_NO_ALLOCATION_HOOKS
bool resilience::bench::counting_allocations() noexcept { return false; }
#else
bool resilience::bench::counting_allocations() noexcept { return true; }

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);

static void count_allocation() {
  resilience::bench::allocations.fetch_add(1, std::memory_order_relaxed);
  ++this_thread_allocations;
}

void* malloc(std::size_t n) {
  count_allocation();
  return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t size) {
  count_allocation();
  return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t n) {
  count_allocation();
  return __libc_realloc(p, n);
}
void* aligned_alloc(std::size_t alignment, std::size_t n) {
  count_allocation();
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, std::size_t alignment, std::size_t n) {
  count_allocation();
  *out = __libc_memalign(alignment, n);
  return *out ? 0 : 12;  // ENOMEM
}
}
#endif
