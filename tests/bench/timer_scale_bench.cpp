// What one steady-clock bound costs with N others pending in the same
// context, N from 1k to 100k, expiries random (seeded): the shared timer
// queue's add and remove must not grow with N.
//
//   timer_scale_stage/N  one timeout start + one answered call (its bound
//                        removed), N calls in flight through the public stage
//   timer_scale_unbounded/N  the same calls without the stage: what the N
//                        frames themselves cost the cache, for comparison
//   timer_scale_queue/N  one remove + add of a node, N nodes in timer_queue
//   timer_scale_burst/N  N calls started at once with random bounds, then
//                        all answered; per_timeout is the whole burst / N
#include "bench_support.hpp"

#include <resilience/detail/timer_queue.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

// splitmix64: cheap enough not to show in the figures, and seeded.
struct random_source {
  std::uint64_t state = 0x5eed;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
    z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

// Bounds of 1 to 2 hours: random positions in the queue, and none fires
// while measured.
std::vector<resilience::basic_timeout<>> random_stages(random_source& r) {
  std::vector<resilience::basic_timeout<>> stages;
  for (int i = 0; i < 4096; ++i) stages.emplace_back(1h + std::chrono::nanoseconds(r.below(3'600'000'000'000)));
  return stages;
}

// Ops that suspend until the benchmark lets them answer, one slot each.
struct gates {
  using handler = asio::async_result<asio::use_awaitable_t<>, void()>::handler_type;
  std::vector<std::optional<handler>> parked;
  bool draining = false;  // answer at once: the run is over

  void release(std::size_t slot) {
    asio::post(std::move(*parked[slot]));
    parked[slot].reset();
  }
  void release_all() {
    draining = true;
    for (std::size_t i = 0; i < parked.size(); ++i)
      if (parked[i]) release(i);
  }
};

asio::awaitable<int> gated(gates& g, std::size_t slot) {
  asio::use_awaitable_t<> token;
  co_await asio::async_initiate<asio::use_awaitable_t<>, void()>(
      [&g, slot](auto h) {
        if (g.draining) {
          asio::post(std::move(h));
        } else {
          g.parked[slot].emplace(std::move(h));
        }
      },
      token);
  co_return 1;
}

void start_call(asio::io_context& io, const resilience::basic_timeout<>* stage, gates& g, std::size_t slot) {
  if (stage) {
    asio::co_spawn(io, (*stage)([&g, slot] { return gated(g, slot); }), asio::detached);
  } else {
    asio::co_spawn(io, gated(g, slot), asio::detached);
  }
}

void per_timeout(benchmark::State& state, double timeouts_per_iteration) {
  state.counters["per_timeout"] = benchmark::Counter(
      timeouts_per_iteration, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void churn_calls(benchmark::State& state, bool bounded) {
  const auto n = static_cast<std::size_t>(state.range(0));
  random_source r;
  const auto stages = random_stages(r);
  const auto stage = [&] { return bounded ? &stages[r.below(stages.size())] : nullptr; };
  asio::io_context io;
  gates g;
  g.parked.resize(n);
  for (std::size_t i = 0; i < n; ++i) start_call(io, stage(), g, i);
  io.poll();  // every call parked, its bound queued
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        // One call answers and a new one starts in its slot: N stay in flight.
        const auto churn = [&]() -> asio::awaitable<void> {
          std::size_t slot = r.below(n);
          while (!g.parked[slot]) slot = r.below(n);  // a new call not parked yet
          g.release(slot);
          start_call(io, stage(), g, slot);
          co_await asio::post(asio::use_awaitable);
        };
        for (int i = 0; i < 1024; ++i) co_await churn();  // warm the frame caches
        const std::size_t before = resilience::bench::allocations.load();
        for (auto _ : state) co_await churn();
        const auto allocs = resilience::bench::allocations.load() - before;
        state.counters["allocs/call"] = static_cast<double>(allocs) / static_cast<double>(state.iterations());
        g.release_all();
      },
      asio::detached);
  io.run();
  per_timeout(state, 1);
}

void timer_scale_stage(benchmark::State& state) { churn_calls(state, true); }
void timer_scale_unbounded(benchmark::State& state) { churn_calls(state, false); }

void ignore_fire(resilience::detail::timer_node*) {}

void timer_scale_queue(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  random_source r;
  asio::io_context io;
  const asio::any_io_executor ex = io.get_executor();
  auto& queue = resilience::detail::timer_queue::of(ex);
  const auto base = std::chrono::steady_clock::now() + 1h;
  const auto random_expiry = [&] { return base + std::chrono::nanoseconds(r.below(3'600'000'000'000)); };
  std::vector<resilience::detail::timer_node> nodes(n);
  for (auto& node : nodes) {
    node.fire_at = random_expiry();
    node.fire = &ignore_fire;
    node.executor = &ex;
    queue.add(node);
  }
  const std::size_t before = resilience::bench::allocations.load();
  for (auto _ : state) {
    auto& node = nodes[r.below(n)];
    queue.remove(node);
    node.fire_at = random_expiry();
    queue.add(node);
  }
  const auto allocs = resilience::bench::allocations.load() - before;
  state.counters["allocs/call"] = static_cast<double>(allocs) / static_cast<double>(state.iterations());
  for (auto& node : nodes) queue.remove(node);
  io.run();  // the idle check disarms the timer
  per_timeout(state, 1);
}

void timer_scale_burst(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  random_source r;
  const auto stages = random_stages(r);
  for (auto _ : state) {
    asio::io_context io;
    gates g;
    g.parked.resize(n);
    for (std::size_t i = 0; i < n; ++i) start_call(io, &stages[r.below(stages.size())], g, i);
    io.poll();
    g.release_all();
    io.run();
  }
  per_timeout(state, static_cast<double>(n));
}

BENCHMARK(timer_scale_stage)->Arg(1'000)->Arg(10'000)->Arg(100'000);
BENCHMARK(timer_scale_unbounded)->Arg(1'000)->Arg(10'000)->Arg(100'000);
BENCHMARK(timer_scale_queue)->Arg(1'000)->Arg(10'000)->Arg(100'000);
BENCHMARK(timer_scale_burst)->Arg(40'000)->Unit(benchmark::kMillisecond);

}  // namespace
