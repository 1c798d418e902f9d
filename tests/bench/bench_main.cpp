// The benchmark program's main: Google Benchmark's console output, then the
// ratios the project's claims rest on, all from the same run.
//
//   build/release/tests/bench/resilience_bench [--benchmark_filter=...]
//   tests/bench/callgrind.sh build/release     # instruction counts
#include "bench_support.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

namespace resilience::bench {

[[gnu::noinline]] boost::asio::awaitable<int> trivial_op() { co_return 42; }

std::vector<std::pair<std::string, std::string>>& ratios() {
  static std::vector<std::pair<std::string, std::string>> r;
  return r;
}

}  // namespace resilience::bench

namespace {

class ratio_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    // With --benchmark_repetitions, the median stands for the benchmark.
    for (const auto& r : runs) {
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (r.run_type == Run::RT_Iteration || median) ns_[r.run_name.function_name] = r.GetAdjustedRealTime();
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\nratios (same run):\n");
    for (const auto& [a, b] : resilience::bench::ratios())
      if (ns_.count(a) && ns_.count(b) && ns_[b] > 0)
        std::printf("  %-34s / %-32s = %6.2fx\n", a.c_str(), b.c_str(), ns_[a] / ns_[b]);
  }

 private:
  std::map<std::string, double> ns_;
};

}  // namespace

// Entry points for callgrind.sh, defined by the benchmark files.
extern "C" void measure_bare(int n);
extern "C" void measure_co_retry(int n);
extern "C" void measure_co_retry_cref(int n);
extern "C" void measure_hand_written(int n);
extern "C" void measure_timeout(int n);
extern "C" void measure_pipeline(int n);
extern "C" void measure_pipeline_referenced(int n);
extern "C" void measure_or_idiom(int n);
extern "C" void measure_breaker(int n);
extern "C" void measure_breaker_mixed(int n);
extern "C" void measure_mutex_breaker(int n);
extern "C" void measure_mutex_breaker_mixed(int n);
extern "C" void measure_http_raw(int n);
extern "C" void measure_http_client(int n);
extern "C" void measure_http_client_ref(int n);

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--instructions") == 0) {
    const int n = std::atoi(argv[2]);
    for (auto* f : {measure_bare, measure_co_retry, measure_co_retry_cref, measure_hand_written, measure_timeout,
                    measure_pipeline, measure_pipeline_referenced, measure_or_idiom,
                    measure_breaker, measure_breaker_mixed, measure_mutex_breaker, measure_mutex_breaker_mixed,
                    measure_http_raw, measure_http_client, measure_http_client_ref})
      f(n);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  ratio_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
}
