// Heap allocations counted through glibc's entry points (allocation_counter.cpp),
// for the programs in this directory that link it.
#pragma once

#include <atomic>
#include <cstddef>

namespace resilience::bench {

// Every heap allocation in this program.
extern std::atomic<std::size_t> allocations;

// The calling thread's heap allocations: what one thread of a program that
// runs others (a server beside its load client) allocated itself.
std::size_t thread_allocations() noexcept;

// False in sanitizer builds, whose allocators must not be replaced: the
// counts then stay at zero.
bool counting_allocations() noexcept;

}  // namespace resilience::bench
