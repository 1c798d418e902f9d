// The circuit breaker's closed-state admit + record, on one thread and with
// two threads contending for one breaker, against a std::mutex breaker that
// keeps the same books; an open breaker's rejection; the stage's cost around
// a bare co_await; and a call the stage refuses, whose completion goes
// through the executor (a loop of refusals must not starve it) against a
// bare post.
#include "bench_support.hpp"
#include "mutex_breaker.hpp"

#include <resilience/circuit_breaker.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/result.hpp>

#include <array>
#include <cstdint>
#include <mutex>

namespace {

using resilience::bench::drive;
using resilience::bench::trivial_op;

using resilience::bench::mutex_breaker;

const auto options = resilience::breaker_options{}.count_window(100).failure_ratio(0.5).minimum_calls(20);

// Shared by the threads of a run, as a breaker is in a service.
resilience::circuit_breaker& shared_breaker() {
  static resilience::circuit_breaker b{options};
  return b;
}
mutex_breaker& shared_mutex_breaker() {
  static mutex_breaker b;
  return b;
}

using resilience::bench::count_allocations;

void breaker_admit_record(benchmark::State& state) {
  auto& b = shared_breaker();
  count_allocations(state, [&] {
    for (auto _ : state) {
      auto permit = b.try_acquire();
      benchmark::DoNotOptimize(static_cast<bool>(permit));
      permit.record_success();
    }
  });
}
void mutex_admit_record(benchmark::State& state) {
  auto& b = shared_mutex_breaker();
  count_allocations(state, [&] {
    for (auto _ : state) {
      benchmark::DoNotOptimize(b.try_acquire());
      b.record(false);
    }
  });
}
// One call in 10 fails: the ratio stays under 0.5, the slots keep changing.
void breaker_admit_record_mixed(benchmark::State& state) {
  auto& b = shared_breaker();
  unsigned i = 0;
  count_allocations(state, [&] {
    for (auto _ : state) {
      auto permit = b.try_acquire();
      benchmark::DoNotOptimize(static_cast<bool>(permit));
      permit.record(++i % 10 == 0);
    }
  });
}
void mutex_admit_record_mixed(benchmark::State& state) {
  auto& b = shared_mutex_breaker();
  unsigned i = 0;
  count_allocations(state, [&] {
    for (auto _ : state) {
      benchmark::DoNotOptimize(b.try_acquire());
      b.record(++i % 10 == 0);
    }
  });
}

// Separate names per thread count, so the ratio table can tell them apart.
void breaker_admit_record_2threads(benchmark::State& s) { breaker_admit_record(s); }
void mutex_admit_record_2threads(benchmark::State& s) { mutex_admit_record(s); }
void breaker_admit_record_mixed_2threads(benchmark::State& s) { breaker_admit_record_mixed(s); }
void mutex_admit_record_mixed_2threads(benchmark::State& s) { mutex_admit_record_mixed(s); }

// A dependency that is down: every call is rejected at once (an hour-long
// break on the steady clock, so the clock is read on every call).
resilience::circuit_breaker& open_breaker() {
  static resilience::circuit_breaker b{
      resilience::breaker_options{}.consecutive_failures(1).open_duration(std::chrono::hours(1))};
  [[maybe_unused]] static const bool opened = [] {
    b.try_acquire().record_failure();  // trips it
    return true;
  }();
  return b;
}
void breaker_reject_open(benchmark::State& state) {
  auto& b = open_breaker();
  count_allocations(state, [&] {
    for (auto _ : state) {
      auto permit = b.try_acquire();
      benchmark::DoNotOptimize(permit.retry_after());
    }
  });
}
void breaker_reject_open_2threads(benchmark::State& s) { breaker_reject_open(s); }

void breaker_bare_co_await(benchmark::State& s) {
  drive(s, [] { return trivial_op(); });
}
void breaker_stage_success(benchmark::State& s) {
  drive(s, [] { return shared_breaker()([] { return trivial_op(); }); });
}

boost::asio::awaitable<boost::system::result<int>> result_op() { co_return 1; }
// Refused, and completed through the executor as Asio completes an
// operation that finishes at once.
void breaker_stage_refused(benchmark::State& s) {
  drive(s, [] { return open_breaker()([] { return result_op(); }); });
}
// What that yield costs on its own: a co_await of one post.
void breaker_bare_post(benchmark::State& s) {
  drive(s, []() -> boost::asio::awaitable<int> {
    co_await boost::asio::post(co_await boost::asio::this_coro::executor, boost::asio::use_awaitable);
    co_return 1;
  });
}

BENCHMARK(breaker_admit_record);
BENCHMARK(mutex_admit_record);
BENCHMARK(breaker_admit_record_mixed);
BENCHMARK(mutex_admit_record_mixed);
// Real time: with two threads, CPU time hides the wait for the contended line.
BENCHMARK(breaker_admit_record_2threads)->Threads(2)->UseRealTime();
BENCHMARK(mutex_admit_record_2threads)->Threads(2)->UseRealTime();
BENCHMARK(breaker_admit_record_mixed_2threads)->Threads(2)->UseRealTime();
BENCHMARK(mutex_admit_record_mixed_2threads)->Threads(2)->UseRealTime();
BENCHMARK(breaker_reject_open);
BENCHMARK(breaker_reject_open_2threads)->Threads(2)->UseRealTime();
BENCHMARK(breaker_bare_co_await);
BENCHMARK(breaker_stage_success);
BENCHMARK(breaker_stage_refused);
BENCHMARK(breaker_bare_post);

const resilience::bench::ratio breaker_bench_ratio1{"breaker_admit_record", "mutex_admit_record"};
const resilience::bench::ratio breaker_bench_ratio2{"breaker_admit_record_mixed", "mutex_admit_record_mixed"};
const resilience::bench::ratio breaker_bench_ratio3{"breaker_admit_record_2threads", "mutex_admit_record_2threads"};
const resilience::bench::ratio breaker_bench_ratio4{"breaker_admit_record_mixed_2threads", "mutex_admit_record_mixed_2threads"};
const resilience::bench::ratio breaker_bench_ratio5{"breaker_stage_success", "breaker_bare_co_await"};
const resilience::bench::ratio breaker_bench_ratio6{"breaker_stage_refused", "breaker_bare_post"};

}  // namespace

// Entry points for tests/bench/callgrind.sh: `n` admit + record calls on one
// thread, each on a breaker of its own (the same options as above), all
// successes or one failure in 10.
extern "C" [[gnu::noinline]] void measure_breaker(int n) {
  resilience::circuit_breaker b{options};
  for (int i = 0; i < n; ++i) {
    auto permit = b.try_acquire();
    benchmark::DoNotOptimize(static_cast<bool>(permit));
    permit.record_success();
  }
}
extern "C" [[gnu::noinline]] void measure_breaker_mixed(int n) {
  resilience::circuit_breaker b{options};
  for (int i = 1; i <= n; ++i) {
    auto permit = b.try_acquire();
    benchmark::DoNotOptimize(static_cast<bool>(permit));
    permit.record(i % 10 == 0);
  }
}
extern "C" [[gnu::noinline]] void measure_mutex_breaker(int n) {
  mutex_breaker b;
  for (int i = 0; i < n; ++i) {
    benchmark::DoNotOptimize(b.try_acquire());
    b.record(false);
  }
}
extern "C" [[gnu::noinline]] void measure_mutex_breaker_mixed(int n) {
  mutex_breaker b;
  for (int i = 1; i <= n; ++i) {
    benchmark::DoNotOptimize(b.try_acquire());
    b.record(i % 10 == 0);
  }
}
