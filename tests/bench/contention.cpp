// Two threads sharing one breaker or one retry budget, measured only while
// both are running.
//
//   build/release/tests/bench/resilience_contention [calls per thread]
//
// On a busy machine the two threads of a Google Benchmark run often take
// turns on one core instead of running side by side, and then measure no
// contention at all. Here both threads run their calls in chunks of 1000 and
// publish their progress; a chunk of one thread counts only if the other made
// between 1/8 and 8 times as many calls meanwhile (a thread that lost its core
// for a time slice makes none, or hundreds of chunks' worth). A chunk's cost
// is 2 * time / (calls of both threads in it): with equal progress, the time
// per call of each thread (Google Benchmark's real time with 2 threads); with
// an unfair lock, it still charges what the waiting thread loses. Medians of
// the counted chunks, the breaker and a mutex breaker (the baseline of
// breaker_bench.cpp) one after the other, all successes and 10% failures;
// then the retry budgets and a mutex budget (retry_budget_bench.cpp's
// baseline), 10% of calls failing and asking for a retry.
#include "mutex_breaker.hpp"
#include "mutex_budget.hpp"

#include <resilience/circuit_breaker.hpp>
#include <resilience/retry_budget.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using resilience::bench::mutex_breaker;
using resilience::bench::mutex_ratio_budget;

template <class B>
concept budget = requires(B& b) { b.try_retry(); };

double now_ns() {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class B>
[[gnu::noinline]] void run_chunk(B& b, long from, long n, bool mixed) {
  for (long i = from; i < from + n; ++i) {
    if constexpr (budget<B>) {
      const bool failed = mixed && i % 10 == 0;
      b.record(failed, true);
      if (failed && b.try_retry()) b.record(false, false);
    } else if constexpr (std::is_same_v<B, mutex_breaker>) {
      volatile bool admitted = b.try_acquire();
      (void)admitted;
      b.record(mixed && i % 10 == 0);
    } else {
      auto permit = b.try_acquire();
      volatile bool admitted = static_cast<bool>(permit);
      (void)admitted;
      permit.record(mixed && i % 10 == 0);
    }
  }
}

struct alignas(64) progress {
  std::atomic<long> done{0};
};

template <class B>
void measure(const char* name, bool mixed, long total) {
  constexpr long chunk = 1000;
  B b{};
  progress prog[2];
  std::atomic<int> ready{0};
  std::vector<double> samples[2];
  std::vector<std::thread> threads;
  for (int k = 0; k < 2; ++k)
    threads.emplace_back([&, k] {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      auto& mine = prog[k].done;
      auto& other = prog[1 - k].done;
      for (long i = 1; i <= total; i += chunk) {
        const long o0 = other.load(std::memory_order_relaxed);
        const double t0 = now_ns();
        run_chunk(b, i, chunk, mixed);
        const double t1 = now_ns();
        const long d = other.load(std::memory_order_relaxed) - o0;
        mine.store(i + chunk, std::memory_order_relaxed);
        if (d >= chunk / 8 && d <= 8 * chunk) samples[k].push_back(2 * (t1 - t0) / static_cast<double>(chunk + d));
        if (other.load(std::memory_order_relaxed) > total) break;  // the other one is done
      }
    });
  for (auto& t : threads) t.join();
  std::vector<double> all(samples[0]);
  all.insert(all.end(), samples[1].begin(), samples[1].end());
  std::sort(all.begin(), all.end());
  if (all.size() < 20) {
    std::printf("%-8s 2 threads, %3s failures: too few chunks with both threads running (%zu)\n", name,
                mixed ? "10%" : "0%", all.size());
    return;
  }
  const auto at = [&](double q) { return all[static_cast<std::size_t>(q * static_cast<double>(all.size() - 1))]; };
  std::printf("%-8s 2 threads, %3s failures: %7.2f ns per call (quartiles %.2f, %.2f; %zu chunks)\n", name,
              mixed ? "10%" : "0%", at(0.5), at(0.25), at(0.75), all.size());
}

struct breaker : resilience::circuit_breaker {
  breaker()
      : resilience::circuit_breaker(
            resilience::breaker_options{}.count_window(100).failure_ratio(0.5).minimum_calls(20)) {}
};

struct throttle : resilience::retry_token_budget {
  throttle() : resilience::retry_token_budget(100, 0.1) {}
};
struct ratio_budget : resilience::retry_ratio_budget {
  ratio_budget() : resilience::retry_ratio_budget(resilience::retry_ratio_budget_options{}.ratio(0.1)) {}
};

}  // namespace

int main(int argc, char** argv) {
  const long calls = argc > 1 ? std::atol(argv[1]) : 10'000'000;
  for (const bool mixed : {false, true}) {
    measure<breaker>("breaker", mixed, calls);
    measure<mutex_breaker>("mutex", mixed, calls / 3);
  }
  measure<throttle>("throttle", true, calls);
  measure<ratio_budget>("ratio", true, calls);
  measure<mutex_ratio_budget>("mutex", true, calls / 3);
}
