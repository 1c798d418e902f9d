// What a retry budget costs each call: recording the first attempt's
// outcome and, after a failure, asking for a retry. Both budgets against a
// mutex-based ratio budget doing the same books, alone and with two threads
// sharing one budget; 10% of calls fail, so one in ten asks for a retry.
#include "bench_support.hpp"
#include "mutex_budget.hpp"

#include <resilience/retry_budget.hpp>

#include <cstdint>

namespace {

using resilience::bench::mutex_ratio_budget;

resilience::retry_token_budget& shared_throttle() {
  static resilience::retry_token_budget t{100, 0.1};
  return t;
}
resilience::retry_ratio_budget& shared_ratio_budget() {
  static resilience::retry_ratio_budget b{resilience::retry_ratio_budget_options{}.ratio(0.1)};
  return b;
}
mutex_ratio_budget& shared_mutex_budget() {
  static mutex_ratio_budget b;
  return b;
}

// One call: its first attempt recorded; one in ten fails and asks for a
// retry, whose outcome (a success) is recorded too.
template <class Budget>
void budget_calls(benchmark::State& state, Budget& budget) {
  resilience::bench::count_allocations(state, [&] {
    std::uint32_t n = static_cast<std::uint32_t>(state.thread_index()) * 7;
    for (auto _ : state) {
      const bool failed = ++n % 10 == 0;
      budget.record(failed, true);
      if (failed && budget.try_retry()) budget.record(false, false);
    }
  });
}

void retry_throttle_call(benchmark::State& state) { budget_calls(state, shared_throttle()); }
void retry_ratio_budget_call(benchmark::State& state) { budget_calls(state, shared_ratio_budget()); }
void mutex_ratio_budget_call(benchmark::State& state) { budget_calls(state, shared_mutex_budget()); }

BENCHMARK(retry_throttle_call);
BENCHMARK(retry_ratio_budget_call);
BENCHMARK(mutex_ratio_budget_call);
BENCHMARK(retry_throttle_call)->Threads(2)->UseRealTime();
BENCHMARK(retry_ratio_budget_call)->Threads(2)->UseRealTime();
BENCHMARK(mutex_ratio_budget_call)->Threads(2)->UseRealTime();

const resilience::bench::ratio retry_budget_bench_ratio1{"retry_throttle_call", "mutex_ratio_budget_call"};
const resilience::bench::ratio retry_budget_bench_ratio2{"retry_ratio_budget_call", "mutex_ratio_budget_call"};
const resilience::bench::ratio retry_budget_bench_ratio3{"retry_throttle_call/real_time/threads:2", "mutex_ratio_budget_call/real_time/threads:2"};
const resilience::bench::ratio retry_budget_bench_ratio4{"retry_ratio_budget_call/real_time/threads:2",
                                  "mutex_ratio_budget_call/real_time/threads:2"};

}  // namespace
