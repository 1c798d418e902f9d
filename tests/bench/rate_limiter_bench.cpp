// The rate limiter's try_acquire (a token bucket: one compare-and-swap on
// the theoretical arrival time; a sliding window: a short lock), against a
// token bucket kept by a std::mutex that refills from the elapsed time; the
// same with two threads sharing one limiter; and the stage around a bare
// co_await. Every variant reads the steady clock once per call, as the
// limiter does, and the rate is high enough that no call is refused.
#include "bench_support.hpp"

#include <resilience/rate_limiter.hpp>

#include <algorithm>
#include <chrono>
#include <mutex>

namespace {

using namespace std::chrono_literals;
using resilience::bench::drive;
using resilience::bench::trivial_op;

// The baseline: the textbook token bucket, tokens refilled from the time
// since the last call, under a mutex.
class mutex_token_bucket {
 public:
  bool try_acquire() {
    const resilience::time_point now = clock_.now();
    std::lock_guard lock(mutex_);
    tokens_ = std::min(burst_, tokens_ + std::chrono::duration<double>(now - last_).count() * per_second_);
    last_ = now;
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
  }

 private:
  resilience::steady_clock clock_;
  std::mutex mutex_;
  double per_second_ = 1e9;
  double burst_ = 1e6;
  double tokens_ = 1e6;
  resilience::time_point last_ = clock_.now();
};

// A token a nanosecond: faster than any caller, so every call is admitted.
const resilience::rate_limiter_options never_short =
    resilience::rate_limiter_options{}.token_bucket(1'000'000'000, 1s, 1'000'000);

resilience::rate_limiter& shared_bucket() {
  static resilience::rate_limiter l{never_short};
  return l;
}
resilience::rate_limiter& shared_window() {
  static resilience::rate_limiter l{
      resilience::rate_limiter_options{}.sliding_window(resilience::rate_limiter_options::max_limit, 1s, 10)};
  return l;
}
mutex_token_bucket& shared_mutex_bucket() {
  static mutex_token_bucket m;
  return m;
}

using resilience::bench::count_allocations;

template <class Limiter>
void acquire_loop(benchmark::State& state, Limiter& l) {
  std::int64_t refused = 0;
  count_allocations(state, [&] {
    for (auto _ : state) {
      const bool ok = l.try_acquire();
      refused += ok ? 0 : 1;
      benchmark::DoNotOptimize(ok);
    }
  });
  state.counters["refused"] = benchmark::Counter(static_cast<double>(refused), benchmark::Counter::kAvgThreads);
}

void rate_limiter_try_acquire(benchmark::State& s) { acquire_loop(s, shared_bucket()); }
void rate_limiter_window_try_acquire(benchmark::State& s) { acquire_loop(s, shared_window()); }
void mutex_bucket_try_acquire(benchmark::State& s) { acquire_loop(s, shared_mutex_bucket()); }
void rate_limiter_try_acquire_2threads(benchmark::State& s) { acquire_loop(s, shared_bucket()); }
void mutex_bucket_try_acquire_2threads(benchmark::State& s) { acquire_loop(s, shared_mutex_bucket()); }

void rate_limiter_bare_co_await(benchmark::State& s) {
  drive(s, [] { return trivial_op(); });
}
void rate_limiter_stage_success(benchmark::State& s) {
  drive(s, [] { return shared_bucket()([] { return trivial_op(); }); });
}
// The same stage with a mutex-kept bucket in front of the op, written out.
void mutex_bucket_stage_success(benchmark::State& s) {
  drive(s, []() -> boost::asio::awaitable<int> {
    if (!shared_mutex_bucket().try_acquire()) co_return -1;
    co_return co_await trivial_op();
  });
}

BENCHMARK(rate_limiter_try_acquire);
BENCHMARK(rate_limiter_window_try_acquire);
BENCHMARK(mutex_bucket_try_acquire);
// Real time: with two threads, CPU time hides the wait for the contended line.
BENCHMARK(rate_limiter_try_acquire_2threads)->Threads(2)->UseRealTime();
BENCHMARK(mutex_bucket_try_acquire_2threads)->Threads(2)->UseRealTime();
BENCHMARK(rate_limiter_bare_co_await);
BENCHMARK(rate_limiter_stage_success);
BENCHMARK(mutex_bucket_stage_success);

const resilience::bench::ratio rate_limiter_bench_ratio1{"rate_limiter_try_acquire", "mutex_bucket_try_acquire"};
const resilience::bench::ratio rate_limiter_bench_ratio2{"rate_limiter_window_try_acquire", "mutex_bucket_try_acquire"};
const resilience::bench::ratio rate_limiter_bench_ratio3{"rate_limiter_try_acquire_2threads", "mutex_bucket_try_acquire_2threads"};
const resilience::bench::ratio rate_limiter_bench_ratio4{"rate_limiter_stage_success", "rate_limiter_bare_co_await"};
const resilience::bench::ratio rate_limiter_bench_ratio5{"rate_limiter_stage_success", "mutex_bucket_stage_success"};

}  // namespace
