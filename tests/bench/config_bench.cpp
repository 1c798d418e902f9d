// resilience::config's costs: a reload (read, check, swap) of a document
// whose objects are all carried over, and of one whose breaker changed;
// current() per call; and a call whose retry policy comes from the running
// snapshot against the same policy built in C++. `--instructions N` runs the
// calls N times each for callgrind: measure_retry_from_cpp against
// measure_retry_from_config (under a snapshot the request holds, the policy
// found by name_key: the call path's extra cost) and
// measure_retry_taking_current (each call taking the snapshot itself).
#include <resilience/config.hpp>
#include <resilience/retry.hpp>

#include <benchmark/benchmark.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdlib>
#include <cstring>
#include <string>

namespace asio = boost::asio;

namespace {

[[gnu::noinline]] asio::awaitable<int> config_bench_op() { co_return 42; }

const std::string document = R"({
  "retry_budget": { "api": { "kind": "ratio", "ratio": 0.2 } },
  "breaker": { "api": { "failure_ratio": 0.5, "time_window": { "span": "30s" }, "open_duration": "5s" } },
  "bulkhead": { "api": { "max_concurrent": 64 } },
  "rate_limiter": { "api": { "token_bucket": { "tokens": 1000, "per": "1s" } } },
  "timeout": { "api": { "limit": "250ms" } },
  "retry": { "api": { "max_attempts": 3, "backoff": { "shape": "exponential", "base": "50ms", "cap": "1s" } } }
})";
std::string changed_breaker() {
  std::string d = document;
  d.replace(d.find("\"5s\""), 4, "\"6s\"");
  return d;
}

const auto cpp_policy = resilience::retry_policy{}.max_attempts(3).backoff(
    resilience::backoff::exponential(std::chrono::milliseconds(50), 2.0, std::chrono::seconds(1)));

resilience::config::live_config& live() {
  static resilience::config::live_config l{document, "bench"};
  return l;
}

void config_reload_unchanged(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(live().reload(document).accepted);
}
void config_reload_breaker_changed(benchmark::State& state) {
  const std::string other = changed_breaker();
  bool flip = false;
  for (auto _ : state) benchmark::DoNotOptimize(live().reload((flip = !flip) ? other : document).accepted);
}
void config_current(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(live().current());
}

template <class Body>
void drive(benchmark::State& state, Body body) {
  asio::io_context io;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (auto _ : state) benchmark::DoNotOptimize(co_await body());
      },
      asio::detached);
  io.run();
}

// One call through a retry policy the caller found: the same coroutine for
// both, so that only where the policy came from differs.
asio::awaitable<int> retry_with(const resilience::retry_policy& policy) {
  co_return co_await resilience::co_retry([] { return config_bench_op(); }, std::cref(policy));
}

const resilience::config::name_key api{"api"};

// A call under the snapshot its request holds: the policy found by key.
asio::awaitable<int> retry_from_config(const resilience::config::snapshot& now) { return retry_with(now.retry(api)); }
// A call that takes the running snapshot itself (a request of one call).
asio::awaitable<int> retry_taking_current() {
  const auto now = live().current();
  co_return co_await retry_with(now->retry(api));
}
// The same by name: a search by string per call.
asio::awaitable<int> retry_by_name() {
  const auto now = live().current();
  co_return co_await retry_with(now->retry("api"));
}

void retry_call_from_cpp(benchmark::State& state) {
  drive(state, [] { return retry_with(cpp_policy); });
}
void retry_call_from_snapshot_held(benchmark::State& state) {
  const auto now = live().current();
  drive(state, [&] { return retry_from_config(*now); });
}
void retry_call_taking_current(benchmark::State& state) { drive(state, retry_taking_current); }
void retry_call_by_name(benchmark::State& state) { drive(state, retry_by_name); }

BENCHMARK(config_reload_unchanged);
BENCHMARK(config_reload_breaker_changed);
BENCHMARK(config_current);
BENCHMARK(retry_call_from_cpp);
BENCHMARK(retry_call_from_snapshot_held);
BENCHMARK(retry_call_taking_current);
BENCHMARK(retry_call_by_name);

asio::awaitable<void> loop_from_cpp(int n) {
  for (int i = 0; i < n; ++i) co_await retry_with(cpp_policy);
}
asio::awaitable<void> loop_from_config(int n) {
  const auto now = live().current();  // the request's snapshot
  for (int i = 0; i < n; ++i) co_await retry_from_config(*now);
}
asio::awaitable<void> loop_taking_current(int n) {
  for (int i = 0; i < n; ++i) co_await retry_taking_current();
}
void run_loop(asio::awaitable<void> (*loop)(int), int n) {
  asio::io_context io;
  asio::co_spawn(io, loop(n), asio::detached);
  io.run();
}

}  // namespace

extern "C" [[gnu::noinline]] void measure_retry_from_cpp(int n) { run_loop(loop_from_cpp, n); }
extern "C" [[gnu::noinline]] void measure_retry_from_config(int n) { run_loop(loop_from_config, n); }
extern "C" [[gnu::noinline]] void measure_retry_taking_current(int n) { run_loop(loop_taking_current, n); }
extern "C" [[gnu::noinline]] void measure_current(int n) {
  for (int i = 0; i < n; ++i) benchmark::DoNotOptimize(live().current());
}

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--instructions") == 0) {
    live();  // parsed outside the measured functions
    measure_retry_from_cpp(std::atoi(argv[2]));
    measure_retry_from_config(std::atoi(argv[2]));
    measure_retry_taking_current(std::atoi(argv[2]));
    measure_current(std::atoi(argv[2]));
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
