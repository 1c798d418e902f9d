// Recording into the metrics registry: an event counter and a duration
// histogram, against the same books kept under a std::mutex; both with one
// and two threads; and the metered stage around a bare co_await. Every
// variant reports heap allocations per call (0 expected when recording).
#include "bench_support.hpp"

#include <resilience/breaker_state.hpp>
#include <resilience/metrics.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <span>

namespace {

using namespace std::chrono_literals;
using resilience::bench::drive;
using resilience::bench::trivial_op;

resilience::metrics& registry() {
  static resilience::metrics m;
  return m;
}

// The baseline: a counter and a histogram of the same buckets behind a mutex.
class mutex_books {
 public:
  void count() {
    std::lock_guard lock(mutex_);
    ++events_;
  }
  void record(resilience::duration d) {
    std::lock_guard lock(mutex_);
    ++buckets_[static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), d) - bounds_.begin())];
    sum_ += d;
  }

 private:
  std::span<const resilience::duration> bounds_ = registry().options().bucket_bounds();
  std::mutex mutex_;
  std::uint64_t events_ = 0;
  std::array<std::uint64_t, resilience::metrics_options::max_buckets + 1> buckets_{};
  resilience::duration sum_{};
};

mutex_books& shared_books() {
  static mutex_books b;
  return b;
}

// The histograms a stage records into, made by hand: the stage's own are
// private, and this is the code its record() runs.
const resilience::detail::duration_series& shared_series() {
  static std::array<resilience::detail::metric_histogram, resilience::call_outcome_count> histograms;
  static const resilience::detail::duration_series series = [] {
    resilience::detail::duration_series s;
    const auto bounds = registry().options().bucket_bounds();
    s.bounds = bounds.data();
    s.bound_count = bounds.size();
    for (std::size_t i = 0; i < histograms.size(); ++i) s.histograms[i] = &histograms[i];
    return s;
  }();
  return series;
}

// Spread over the buckets, as real latencies are.
resilience::duration sample_duration(std::uint64_t i) { return std::chrono::microseconds((i * 7919) % 20000); }

using resilience::bench::count_allocations;

void metrics_counter_increment(benchmark::State& state) {
  // Through the event sink: a virtual call and a table lookup, as every
  // strategy's event reaches the registry.
  static resilience::event_sink& sink = registry().events("bench");
  resilience::event event{resilience::event_kind::circuit_rejected};
  event.outcome = resilience::call_outcome::error;
  count_allocations(state, [&] {
    for (auto _ : state) sink.on_event(event);
  });
}
void mutex_counter_increment(benchmark::State& state) {
  auto& books = shared_books();
  count_allocations(state, [&] {
    for (auto _ : state) books.count();
  });
}

void metrics_histogram_record(benchmark::State& state) {
  const auto& series = shared_series();
  std::uint64_t i = 0;
  count_allocations(state, [&] {
    for (auto _ : state) series.record(0, resilience::call_outcome::success, sample_duration(++i));
  });
}
void mutex_histogram_record(benchmark::State& state) {
  auto& books = shared_books();
  std::uint64_t i = 0;
  count_allocations(state, [&] {
    for (auto _ : state) books.record(sample_duration(++i));
  });
}

void metrics_counter_increment_2threads(benchmark::State& s) { metrics_counter_increment(s); }
void mutex_counter_increment_2threads(benchmark::State& s) { mutex_counter_increment(s); }
void metrics_histogram_record_2threads(benchmark::State& s) { metrics_histogram_record(s); }
void mutex_histogram_record_2threads(benchmark::State& s) { mutex_histogram_record(s); }

void metrics_bare_co_await(benchmark::State& s) {
  drive(s, [] { return trivial_op(); });
}
void metrics_stage_success(benchmark::State& s) {
  static const auto stage = registry().stage("bench");
  drive(s, [] { return stage([] { return trivial_op(); }); });
}

BENCHMARK(metrics_counter_increment);
BENCHMARK(mutex_counter_increment);
BENCHMARK(metrics_histogram_record);
BENCHMARK(mutex_histogram_record);
// Real time: with two threads, CPU time hides the wait for the contended line.
BENCHMARK(metrics_counter_increment_2threads)->Threads(2)->UseRealTime();
BENCHMARK(mutex_counter_increment_2threads)->Threads(2)->UseRealTime();
BENCHMARK(metrics_histogram_record_2threads)->Threads(2)->UseRealTime();
BENCHMARK(mutex_histogram_record_2threads)->Threads(2)->UseRealTime();
BENCHMARK(metrics_bare_co_await);
BENCHMARK(metrics_stage_success);

const resilience::bench::ratio metrics_bench_ratio1{"metrics_counter_increment", "mutex_counter_increment"};
const resilience::bench::ratio metrics_bench_ratio2{"metrics_histogram_record", "mutex_histogram_record"};
const resilience::bench::ratio metrics_bench_ratio3{"metrics_counter_increment_2threads", "mutex_counter_increment_2threads"};
const resilience::bench::ratio metrics_bench_ratio4{"metrics_histogram_record_2threads", "mutex_histogram_record_2threads"};
const resilience::bench::ratio metrics_bench_ratio5{"metrics_stage_success", "metrics_bare_co_await"};

}  // namespace
