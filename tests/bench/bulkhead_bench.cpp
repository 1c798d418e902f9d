// The bulkhead's uncontended acquire + release (the lock-free fast path),
// against a std::mutex and a counter that do the same books; the same with
// two threads sharing one bulkhead; and the stage around a bare co_await.
#include "bench_support.hpp"

#include <resilience/bulkhead.hpp>

#include <cstdint>
#include <mutex>

namespace {

using resilience::bench::drive;
using resilience::bench::trivial_op;

// The baseline: a limit on calls at once kept by a mutex and a counter
// (no queue: what the fast path replaces).
class mutex_limiter {
 public:
  bool try_acquire() {
    std::lock_guard lock(mutex_);
    if (in_flight_ >= limit_) return false;
    ++in_flight_;
    return true;
  }
  void release() {
    std::lock_guard lock(mutex_);
    --in_flight_;
  }

 private:
  std::mutex mutex_;
  std::uint32_t in_flight_ = 0;
  std::uint32_t limit_ = 64;
};

resilience::bulkhead& shared_bulkhead() {
  static resilience::bulkhead b{resilience::bulkhead_options{}.max_concurrent(64).max_queue(1000)};
  return b;
}
mutex_limiter& shared_mutex_limiter() {
  static mutex_limiter m;
  return m;
}

using resilience::bench::count_allocations;

void bulkhead_acquire_release(benchmark::State& state) {
  auto& b = shared_bulkhead();
  count_allocations(state, [&] {
    for (auto _ : state) {
      auto permit = b.try_acquire();
      benchmark::DoNotOptimize(static_cast<bool>(permit));
    }
  });
}
void mutex_acquire_release(benchmark::State& state) {
  auto& m = shared_mutex_limiter();
  count_allocations(state, [&] {
    for (auto _ : state) {
      benchmark::DoNotOptimize(m.try_acquire());
      m.release();
    }
  });
}
void bulkhead_acquire_release_2threads(benchmark::State& s) { bulkhead_acquire_release(s); }
void mutex_acquire_release_2threads(benchmark::State& s) { mutex_acquire_release(s); }

void bulkhead_bare_co_await(benchmark::State& s) {
  drive(s, [] { return trivial_op(); });
}
void bulkhead_stage_success(benchmark::State& s) {
  drive(s, [] { return shared_bulkhead()([] { return trivial_op(); }); });
}

BENCHMARK(bulkhead_acquire_release);
BENCHMARK(mutex_acquire_release);
// Real time: with two threads, CPU time hides the wait for the contended line.
BENCHMARK(bulkhead_acquire_release_2threads)->Threads(2)->UseRealTime();
BENCHMARK(mutex_acquire_release_2threads)->Threads(2)->UseRealTime();
BENCHMARK(bulkhead_bare_co_await);
BENCHMARK(bulkhead_stage_success);

const resilience::bench::ratio bulkhead_bench_ratio1{"bulkhead_acquire_release", "mutex_acquire_release"};
const resilience::bench::ratio bulkhead_bench_ratio2{"bulkhead_acquire_release_2threads", "mutex_acquire_release_2threads"};
const resilience::bench::ratio bulkhead_bench_ratio3{"bulkhead_stage_success", "bulkhead_bare_co_await"};

}  // namespace
