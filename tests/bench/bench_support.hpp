// Shared by the benchmark files: the allocation counter, the driver that runs
// one co_await per iteration, the trivial op, and the ratio table.
#pragma once

#include "allocation_counter.hpp"

#include <benchmark/benchmark.h>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace resilience::bench {

// The op every variant calls: as cheap as an awaitable can be, and opaque to
// the optimiser so it cannot fold the call away.
boost::asio::awaitable<int> trivial_op();

// Runs `loop` (a Google Benchmark loop over `state`) and reports the heap
// allocations it made per iteration (thread 0's share of a multi-threaded run
// counts every thread's).
template <class Loop>
void count_allocations(benchmark::State& state, Loop loop) {
  const std::size_t before = allocations.load();
  loop();
  if (state.thread_index() == 0)
    state.counters["allocs/call"] =
        static_cast<double>(allocations.load() - before) / static_cast<double>(state.iterations());
}

// Ratios printed after the run, as "numerator / denominator".
std::vector<std::pair<std::string, std::string>>& ratios();
struct ratio {
  ratio(std::string a, std::string b) { ratios().emplace_back(std::move(a), std::move(b)); }
};

// Runs `body` once per benchmark iteration, inside one coroutine on one
// io_context (or on `run`'s own driving of it), and reports heap allocations
// per call.
template <class Body, class Run>
void drive(benchmark::State& state, Body body, Run run) {
  boost::asio::io_context io;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        for (int i = 0; i < 64; ++i) co_await body();  // warm the frame caches
        const std::size_t before = allocations.load();
        for (auto _ : state) benchmark::DoNotOptimize(co_await body());
        const auto allocs = allocations.load() - before;
        state.counters["allocs/call"] = static_cast<double>(allocs) / static_cast<double>(state.iterations());
      },
      boost::asio::detached);
  run(io);
}

// For callgrind.sh's entry points: runs `loop(n)` to completion on a fresh
// io_context, so instructions can be counted per call.
inline void run_loop(boost::asio::awaitable<void> (*loop)(int), int n) {
  boost::asio::io_context io;
  boost::asio::co_spawn(io, loop(n), boost::asio::detached);
  io.run();
}

template <class Body>
void drive(benchmark::State& state, Body body) {
  drive(state, std::move(body), [](boost::asio::io_context& io) { io.run(); });
}

}  // namespace resilience::bench
