// Adaptive throttling: admit + record of one call (window read, formula,
// bucket update; both clock reads included) against a std::mutex guarding the
// same books in plain counters; the same with two threads sharing one
// throttle; and the stage around a bare co_await.
#include "bench_support.hpp"

#include <resilience/adaptive_throttle.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>

namespace {

using resilience::bench::drive;
using resilience::bench::trivial_op;

// The baseline: the same sliding window of buckets and the same formula, in
// plain integers behind one mutex, taken once to admit and once to record.
class mutex_throttle {
 public:
  bool admit() {
    const resilience::time_point now = clock_.now();
    std::lock_guard lock(mutex_);
    advance(now);
    std::uint64_t requests = 0, accepts = 0;
    for (const auto& b : ring_) {
      requests += b.requests;
      accepts += b.accepts;
    }
    const double excess = static_cast<double>(requests) - 2.0 * static_cast<double>(accepts);
    const double p = excess > 0 ? excess / (static_cast<double>(requests) + 1) : 0.0;
    if (p <= 0 || random_.next_unit() >= p) return true;
    ++ring_[current_ % buckets].requests;
    return false;
  }
  void record(bool accepted) {
    const resilience::time_point now = clock_.now();
    std::lock_guard lock(mutex_);
    advance(now);
    auto& b = ring_[current_ % buckets];
    ++b.requests;
    if (accepted) ++b.accepts;
  }

 private:
  static constexpr std::int64_t buckets = 12;
  static constexpr std::int64_t bucket_ticks = std::chrono::nanoseconds(std::chrono::seconds(10)).count();
  struct bucket {
    std::uint64_t requests = 0;
    std::uint64_t accepts = 0;
  };
  // Clears the buckets time has moved past.
  void advance(resilience::time_point now) {
    const std::int64_t n = now.time_since_epoch().count() / bucket_ticks;
    for (std::int64_t k = current_ + 1; k <= n && k <= current_ + buckets; ++k) ring_[k % buckets] = {};
    if (n > current_) current_ = n;
  }

  resilience::steady_clock clock_;
  resilience::random_source random_;
  std::mutex mutex_;
  std::int64_t current_ = 0;
  std::array<bucket, buckets> ring_{};
};

resilience::adaptive_throttle& shared_throttle() {
  static resilience::adaptive_throttle t;
  return t;
}
mutex_throttle& shared_mutex_throttle() {
  static mutex_throttle m;
  return m;
}

using resilience::bench::count_allocations;

// A healthy backend: every call admitted and accepted (the common case).
void throttle_admit_record(benchmark::State& state) {
  auto& t = shared_throttle();
  count_allocations(state, [&] {
    for (auto _ : state) {
      const bool admitted = t.try_admit();
      benchmark::DoNotOptimize(admitted);
      t.record(true);
    }
  });
}
void throttle_mutex_admit_record(benchmark::State& state) {
  auto& m = shared_mutex_throttle();
  count_allocations(state, [&] {
    for (auto _ : state) {
      const bool admitted = m.admit();
      benchmark::DoNotOptimize(admitted);
      m.record(true);
    }
  });
}
void throttle_admit_record_2threads(benchmark::State& s) { throttle_admit_record(s); }
void throttle_mutex_admit_record_2threads(benchmark::State& s) { throttle_mutex_admit_record(s); }

void throttle_bare_co_await(benchmark::State& s) {
  drive(s, [] { return trivial_op(); });
}
void throttle_stage_success(benchmark::State& s) {
  drive(s, [] { return shared_throttle()([] { return trivial_op(); }); });
}

BENCHMARK(throttle_admit_record);
BENCHMARK(throttle_mutex_admit_record);
// Real time: with two threads, CPU time hides the wait for the contended line.
BENCHMARK(throttle_admit_record_2threads)->Threads(2)->UseRealTime();
BENCHMARK(throttle_mutex_admit_record_2threads)->Threads(2)->UseRealTime();
BENCHMARK(throttle_bare_co_await);
BENCHMARK(throttle_stage_success);

const resilience::bench::ratio throttling_bench_ratio1{"throttle_admit_record", "throttle_mutex_admit_record"};
const resilience::bench::ratio throttling_bench_ratio2{"throttle_admit_record_2threads", "throttle_mutex_admit_record_2threads"};
const resilience::bench::ratio throttling_bench_ratio3{"throttle_stage_success", "throttle_bare_co_await"};

}  // namespace
