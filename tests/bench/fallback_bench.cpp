// The fallback stage on the success path (a value and an op to fall back
// on, neither used), and one failure replaced, against a bare co_await.
#include "bench_support.hpp"

#include <resilience/fallback.hpp>

#include <boost/system/error_code.hpp>

namespace {

using resilience::bench::drive;
using resilience::bench::trivial_op;

// Fails with an error in its channel: the path that falls back.
[[gnu::noinline]] boost::asio::awaitable<boost::system::error_code> failing_op() {
  co_return boost::asio::error::connection_reset;
}

const auto value_stage = resilience::fallback_value(0);
const auto op_stage = resilience::fallback_to([]() { return trivial_op(); });
const auto error_stage = resilience::fallback_value(boost::system::error_code{});

void fallback_bare_co_await(benchmark::State& s) {
  drive(s, [] { return trivial_op(); });
}
void fallback_value_success(benchmark::State& s) {
  drive(s, [] { return value_stage([] { return trivial_op(); }); });
}
void fallback_op_success(benchmark::State& s) {
  drive(s, [] { return op_stage([] { return trivial_op(); }); });
}
void fallback_bare_failing_op(benchmark::State& s) {
  drive(s, [] { return failing_op(); });
}
void fallback_value_replaces_error(benchmark::State& s) {
  drive(s, [] { return error_stage([] { return failing_op(); }); });
}

BENCHMARK(fallback_bare_co_await);
BENCHMARK(fallback_value_success);
BENCHMARK(fallback_op_success);
BENCHMARK(fallback_bare_failing_op);
BENCHMARK(fallback_value_replaces_error);

const resilience::bench::ratio fallback_bench_ratio1{"fallback_value_success", "fallback_bare_co_await"};
const resilience::bench::ratio fallback_bench_ratio2{"fallback_op_success", "fallback_bare_co_await"};
const resilience::bench::ratio fallback_bench_ratio3{"fallback_value_replaces_error", "fallback_bare_failing_op"};

}  // namespace
