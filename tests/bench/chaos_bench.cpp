// Chaos stages as they sit in production most of the time: switched off,
// and on with a rate that spares the call; against a bare co_await.
#include "bench_support.hpp"

#include <resilience/chaos.hpp>

namespace {

using resilience::bench::drive;
using resilience::bench::trivial_op;

resilience::chaos_switch& chaos_off() {
  static resilience::chaos_switch s{false};
  return s;
}

const auto disabled_stage = resilience::chaos_error(boost::asio::error::connection_reset,
                                                    resilience::chaos_options{}.rate(0.5).enabled_by(chaos_off()));
// On, but the draw spares every call: the cost of deciding.
const auto sparing_stage = resilience::chaos_error(
    boost::asio::error::connection_reset,
    resilience::chaos_options{}.rate(1e-12).random(resilience::random_source::seeded(1)));
const auto disabled_latency = resilience::chaos_latency(std::chrono::milliseconds(100),
                                                        resilience::chaos_options{}.enabled_by(chaos_off()));

void chaos_bare_co_await(benchmark::State& s) {
  drive(s, [] { return trivial_op(); });
}
void chaos_disabled(benchmark::State& s) {
  drive(s, [] { return disabled_stage([] { return trivial_op(); }); });
}
void chaos_disabled_latency(benchmark::State& s) {
  drive(s, [] { return disabled_latency([] { return trivial_op(); }); });
}
void chaos_enabled_not_injected(benchmark::State& s) {
  drive(s, [] { return sparing_stage([] { return trivial_op(); }); });
}

BENCHMARK(chaos_bare_co_await);
BENCHMARK(chaos_disabled);
BENCHMARK(chaos_disabled_latency);
BENCHMARK(chaos_enabled_not_injected);

const resilience::bench::ratio chaos_bench_ratio1{"chaos_disabled", "chaos_bare_co_await"};
const resilience::bench::ratio chaos_bench_ratio2{"chaos_disabled_latency", "chaos_bare_co_await"};
const resilience::bench::ratio chaos_bench_ratio3{"chaos_enabled_not_injected", "chaos_bare_co_await"};

}  // namespace
