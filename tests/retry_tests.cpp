#include "support.hpp"

#include <resilience/error.hpp>
#include <resilience/circuit_breaker.hpp>
#include <resilience/deadline.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <functional>
#include <chrono>
#include <stdexcept>
#include <memory>
#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::backoff;
using resilience::co_retry;
using resilience::duration;
using resilience::jitter;
using resilience::retry_policy;
using resilience::time_point;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::refused;
using resilience::test::reset;
using resilience::test::spawn;

using namespace resilience::test::extremes;

namespace {

using virtual_time = resilience::test::retry_time;

struct http_response {
  int status;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(co_retry_outcomes, virtual_time)

BOOST_AUTO_TEST_CASE(success_on_first_try_calls_op_once_and_never_waits) {
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({}), policy()), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST(calls() == 1);
  BOOST_TEST(done.value->value() == 42);
  BOOST_TEST((clock.now() == time_point{}), "no timer was armed");
}

BOOST_AUTO_TEST_CASE(transient_failures_then_success) {
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({reset, reset}), policy()), done);
  clock.run(io);
  BOOST_TEST(calls() == 3);
  BOOST_TEST(done.value->value() == 42);
  BOOST_TEST((since_start(2) == 300ms));
}

BOOST_AUTO_TEST_CASE(exhaustion_calls_op_max_attempts_times_and_returns_the_last_error) {
  completion<boost::system::result<int>> done;
  const std::vector<error_code> errors{reset, reset, reset, refused, reset, reset};
  spawn(io, co_retry(failing(errors), policy().max_attempts(4)), done);
  clock.run(io);
  BOOST_TEST(calls() == 4);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value->error() == refused), "the 4th attempt's own error");
}

BOOST_AUTO_TEST_CASE(exhaustion_rethrows_the_last_exception_as_is) {
  completion<int> done;
  int calls = 0;
  auto op = [&]() -> asio::awaitable<int> {
    ++calls;
    throw std::runtime_error("failure " + std::to_string(calls));
    co_return 0;
  };
  spawn(io, co_retry(op, policy().max_attempts(3)), done);
  clock.run(io);
  BOOST_TEST(calls == 3);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), std::runtime_error,
                        [](const std::runtime_error& e) { return std::string(e.what()) == "failure 3"; });
}

BOOST_AUTO_TEST_CASE(the_exponential_schedule_runs_exactly_on_virtual_time) {
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({reset, reset, reset, reset, reset}), policy()), done);
  clock.run(io);
  const std::vector<duration> expected{0ms, 100ms, 300ms, 700ms, 1500ms};
  BOOST_REQUIRE(calls() == 5);
  for (std::size_t i = 0; i < expected.size(); ++i) BOOST_TEST((since_start(i) == expected[i]), "attempt " << i + 1);
  BOOST_TEST((clock.now() == time_point(1500ms)), "no wait after the last attempt");
}

BOOST_AUTO_TEST_CASE(minutes_of_backoff_run_in_virtual_time) {
  completion<boost::system::result<int>> done;
  auto p = policy().backoff(backoff::constant(32s).with_jitter(resilience::jitter::none));
  spawn(io, co_retry(failing({reset, reset, reset, reset}), p), done);
  clock.run(io);
  BOOST_TEST(calls() == 5);
  BOOST_TEST((clock.now() == time_point(128s)));
  BOOST_TEST(done.value->value() == 42);
}

BOOST_AUTO_TEST_CASE(the_cap_bounds_every_wait) {
  completion<boost::system::result<int>> done;
  auto p = policy().backoff(backoff::exponential(1s, 10.0, 5s).with_jitter(resilience::jitter::none));
  spawn(io, co_retry(failing({reset, reset, reset}), p), done);
  clock.run(io);
  BOOST_REQUIRE(calls() == 4);
  BOOST_TEST((attempts[1] - attempts[0] == 1s));
  BOOST_TEST((attempts[2] - attempts[1] == 5s));
  BOOST_TEST((attempts[3] - attempts[2] == 5s));
}

BOOST_AUTO_TEST_CASE(a_permanent_error_is_not_retried) {
  completion<boost::system::result<int>> done;
  auto p = policy().retry_if(resilience::retry_on_errors{reset, asio::error::timed_out});
  spawn(io, co_retry(failing({asio::error::access_denied, reset}), p), done);
  clock.run(io);
  BOOST_TEST(calls() == 1);
  BOOST_TEST((done.value->error() == asio::error::access_denied));
}

BOOST_AUTO_TEST_CASE(retry_on_result) {
  int calls = 0;
  auto op = [&]() -> asio::awaitable<http_response> { co_return http_response{++calls < 3 ? 503 : 200}; };
  auto retry_503 = [](const resilience::outcome<http_response>& o) { return o.failed() || o.value().status == 503; };
  completion<http_response> done;
  spawn(io, co_retry(op, policy().retry_if(retry_503)), done);
  clock.run(io);
  BOOST_TEST(calls == 3);
  BOOST_TEST(done.value->status == 200);

  // Exhausted on a retryable result: that result comes back as is.
  calls = -100;
  completion<http_response> exhausted;
  spawn(io, co_retry(op, policy().max_attempts(2).retry_if(retry_503)), exhausted);
  clock.run(io);
  BOOST_TEST(exhausted.value->status == 503);
  BOOST_TEST(calls == -98);
}

BOOST_AUTO_TEST_CASE(error_code_and_tuple_results) {
  int calls = 0;
  auto ec_op = [&]() -> asio::awaitable<error_code> { co_return ++calls < 2 ? reset : error_code{}; };
  completion<error_code> a;
  spawn(io, co_retry(ec_op, policy()), a);
  clock.run(io);
  BOOST_TEST(calls == 2);
  BOOST_TEST(!*a.value);

  calls = 0;
  auto tuple_op = [&]() -> asio::awaitable<std::tuple<error_code, std::size_t>> {
    co_return std::tuple{++calls < 3 ? reset : error_code{}, std::size_t(7)};
  };
  completion<std::tuple<error_code, std::size_t>> b;
  spawn(io, co_retry(tuple_op, policy()), b);
  clock.run(io);
  BOOST_TEST(calls == 3);
  BOOST_TEST(std::get<1>(*b.value) == 7u);
}

BOOST_AUTO_TEST_CASE(void_ops_and_attempt_context) {
  std::vector<std::uint32_t> seen;
  auto op = [&](const resilience::context& ctx) -> asio::awaitable<void> {
    seen.push_back(ctx.attempt);
    BOOST_TEST(ctx.max_attempts == 5u);
    if (ctx.attempt < 3) throw boost::system::system_error(reset);
    co_return;
  };
  completion<void> done;
  spawn(io, co_retry(op, policy()), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST(!done.exception);
  BOOST_TEST((seen == std::vector<std::uint32_t>{1, 2, 3}));
}

// A call without a parent context makes its own only once the first
// attempt is over: the classifier still reads the attempt, the limit, no
// deadline, and the policy's clock.
BOOST_AUTO_TEST_CASE(classifier_reads_the_context_of_a_call_without_one) {
  std::vector<std::uint32_t> seen;
  auto transient = [&](const resilience::outcome<boost::system::result<int>>& o, const resilience::context& ctx) {
    seen.push_back(ctx.attempt);
    BOOST_TEST(ctx.max_attempts == 5u);
    BOOST_TEST(!ctx.has_deadline());
    BOOST_TEST((ctx.now() == clock.now()), "the policy's clock");
    return o.failed();
  };
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({reset, reset}), policy().retry_if(transient)), done);
  clock.run(io);
  BOOST_TEST(done.value->value() == 42);
  BOOST_TEST((seen == std::vector<std::uint32_t>{1, 2, 3}));
}

BOOST_AUTO_TEST_CASE(zero_delay_yields_without_a_timer) {
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({reset, reset}), policy().backoff(backoff::constant(0ms).with_jitter(resilience::jitter::none))), done);
  BOOST_TEST(io.run_one() == 1u);  // the first attempt, up to its yield
  BOOST_TEST(clock.pending() == 0u, "a zero delay arms no timer");
  BOOST_TEST(!done.done(), "it yielded to the executor instead of looping inline");
  io.run();
  BOOST_TEST(calls() == 3);
  BOOST_TEST((clock.now() == time_point{}));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(co_retry_limits, virtual_time)

BOOST_AUTO_TEST_CASE(the_time_limit_is_never_overshot) {
  // Attempts at 0, 300 and 900 ms; the next wait (1200 ms) would end at
  // 2100 ms, past the 1 s limit, so co_retry gives up at 900 ms.
  completion<boost::system::result<int>> done;
  auto p = policy().backoff(backoff::exponential(300ms, 2.0, 10s).with_jitter(resilience::jitter::none)).max_attempts(10).time_limit(1s)
               .fit_to_time_left(false);
  spawn(io, co_retry(failing(std::vector<error_code>(10, reset)), p), done);
  clock.run(io);
  BOOST_TEST(calls() == 3);
  BOOST_TEST((clock.now() == time_point(900ms)));
  BOOST_TEST((done.value->error() == reset));
}

BOOST_AUTO_TEST_CASE(the_time_limit_counts_slow_attempts) {
  // Each attempt takes 400 ms of virtual time. The second wait ends exactly
  // at the 1 s limit, so a third attempt runs (1000 to 1400 ms); after it no
  // wait may start, since any would end past the limit.
  int calls = 0;
  auto slow = [&]() -> asio::awaitable<error_code> {
    ++calls;
    auto t = clock.make_timer(co_await asio::this_coro::executor);
    t.expires_after(400ms);
    co_await t.async_wait(asio::use_awaitable);
    co_return reset;
  };
  completion<error_code> done;
  spawn(io, co_retry(slow, policy().backoff(backoff::constant(100ms).with_jitter(resilience::jitter::none)).max_attempts(10).time_limit(1s)
                                .fit_to_time_left(false)), done);
  clock.run(io);
  BOOST_TEST(calls == 3);
  BOOST_TEST((clock.now() == time_point(1400ms)));
}

// time_limit stops retrying (as tenacity's stop_after_delay does); it never
// cuts an attempt short. The next three tests pin both of its edges and the
// way to get the other meaning (Polly's outer timeout): a deadline stage.
BOOST_AUTO_TEST_CASE(an_attempt_running_past_the_time_limit_is_not_interrupted) {
  int calls = 0;
  auto slow_then_ok = [&]() -> asio::awaitable<boost::system::result<int>> {
    ++calls;
    auto t = clock.make_timer(co_await asio::this_coro::executor);
    t.expires_after(calls == 1 ? 200ms : 5s);  // the second attempt runs 4.3 s past the limit
    co_await t.async_wait(asio::use_awaitable);
    if (calls == 1) co_return reset;
    co_return 7;
  };
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(slow_then_ok, policy().backoff(backoff::constant(100ms).with_jitter(resilience::jitter::none)).time_limit(1s)), done);
  clock.run(io);
  BOOST_TEST(calls == 2);
  BOOST_TEST(done.value->value() == 7, "the late success is kept");
  BOOST_TEST((clock.now() == time_point(5300ms)));
}

BOOST_AUTO_TEST_CASE(a_wait_one_tick_past_the_time_limit_is_not_started) {
  // Attempts end at once; the wait of 1 s would end exactly at the limit
  // (allowed), one of 1 s + 1 tick would not.
  for (const auto& [limit, expected_calls] : {std::pair{duration(1s), 2}, std::pair{duration(1s) - duration(1), 1}}) {
    asio::io_context io2;
    manual_clock clock2;
    int calls = 0;
    auto op = [&]() -> asio::awaitable<error_code> {
      ++calls;
      co_return reset;
    };
    completion<error_code> done;
    spawn(io2,
          co_retry(op, retry_policy{}.max_attempts(2).backoff(backoff::constant(1s).with_jitter(resilience::jitter::none)).clock(clock2).time_limit(limit)
                       .fit_to_time_left(false)),
          done);
    clock2.run(io2);
    BOOST_TEST(calls == expected_calls);
    BOOST_TEST((done.value == reset));
  }
}

// fit_to_time_left (on by default): under a deadline, each wait is scaled to
// an equal share of the time left for the retries left, so a 2 s schedule
// still retries three times within 500 ms.
BOOST_AUTO_TEST_CASE(waits_are_scaled_so_that_the_retries_fit_the_deadline) {
  std::vector<time_point> starts;
  auto op = [&]() -> asio::awaitable<error_code> {
    starts.push_back(clock.now());
    co_return reset;
  };
  const auto call = resilience::pipeline(
      resilience::deadline_stage(500ms).clock(clock),
      policy().max_attempts(4).backoff(backoff::exponential(2s).with_jitter(resilience::jitter::none)));
  completion<error_code> done;
  spawn(io, call(op), done);
  clock.run(io);
  // Shares: 500/4, then 375/3, then 250/2 ms.
  BOOST_TEST_REQUIRE(starts.size() == 4u);
  BOOST_TEST((starts[1] == time_point(125ms)));
  BOOST_TEST((starts[2] == time_point(250ms)));
  BOOST_TEST((starts[3] == time_point(375ms)));
  BOOST_TEST((done.value == reset));
}

BOOST_AUTO_TEST_CASE(scaled_waits_keep_their_jitter) {
  // Two clients with the same deadline and schedule do not come back together.
  std::vector<duration> first_waits;
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    asio::io_context io2;
    manual_clock clock2;
    std::vector<duration> waits;
    const auto p = retry_policy{}
                       .max_attempts(4)
                       .backoff(backoff::exponential(2s))
                       .random(resilience::random_source::seeded(seed))
                       .clock(clock2)
                       .on_retry([&](const auto& e) { waits.push_back(e.delay); });
    const auto call = resilience::pipeline(resilience::basic_deadline_stage<manual_clock>(500ms, clock2), p);
    completion<error_code> done;
    auto op = []() -> asio::awaitable<error_code> { co_return reset; };
    spawn(io2, call(op), done);
    clock2.run(io2);
    BOOST_TEST_REQUIRE(waits.size() == 3u, "every retry fits");
    BOOST_TEST((waits[0] <= 125ms));
    first_waits.push_back(waits[0]);
  }
  BOOST_TEST((first_waits[0] != first_waits[1] && first_waits[1] != first_waits[2]));
}

BOOST_AUTO_TEST_CASE(a_delay_the_server_asked_for_is_never_scaled) {
  std::vector<time_point> starts;
  auto op = [&]() -> asio::awaitable<error_code> {
    starts.push_back(clock.now());
    co_return reset;
  };
  const auto call = resilience::pipeline(
      resilience::deadline_stage(500ms).clock(clock),
      policy().max_attempts(4).delay_generator(
          [](const auto&, const resilience::context&) { return resilience::retry_delay::after(300ms); }));
  completion<error_code> done;
  spawn(io, call(op), done);
  clock.run(io);
  BOOST_TEST_REQUIRE(starts.size() == 2u, "300 ms waited in full; the next 300 ms would end past the deadline");
  BOOST_TEST((starts[1] == time_point(300ms)));
}

BOOST_AUTO_TEST_CASE(fit_to_time_left_off_waits_the_schedule_and_gives_up) {
  int calls = 0;
  auto op = [&]() -> asio::awaitable<error_code> {
    ++calls;
    co_return reset;
  };
  const auto call = resilience::pipeline(
      resilience::deadline_stage(500ms).clock(clock),
      policy().max_attempts(4).backoff(backoff::exponential(2s).with_jitter(resilience::jitter::none)).fit_to_time_left(false));
  completion<error_code> done;
  spawn(io, call(op), done);
  clock.run(io);
  BOOST_TEST(calls == 1, "a wait of 2 s would end past the deadline: not started");
}

BOOST_AUTO_TEST_CASE(a_deadline_stage_outside_bounds_the_running_attempt_too) {
  auto hang = [&]() -> asio::awaitable<error_code> {
    auto t = clock.make_timer(co_await asio::this_coro::executor);
    t.expires_after(1h);
    auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return ec;
  };
  completion<error_code> done;
  const auto call =
      resilience::pipeline(resilience::basic_deadline_stage<manual_clock>(1s, clock), policy().time_limit(1s));
  spawn(io, call(hang), done);
  clock.run(io);
  BOOST_TEST((done.value == resilience::error::deadline_exceeded));
  BOOST_TEST((clock.now() == time_point(1s)));
}

BOOST_AUTO_TEST_CASE(bad_policies_are_rejected_where_they_are_built) {
  BOOST_CHECK_EXCEPTION(retry_policy{}.max_attempts(0), std::invalid_argument, [](const std::invalid_argument& e) {
    return std::string(e.what()).find("max_attempts") != std::string::npos;
  });
  BOOST_CHECK_EXCEPTION(retry_policy{}.time_limit(-1s), std::invalid_argument, [](const std::invalid_argument& e) {
    return std::string(e.what()).find("time_limit") != std::string::npos;
  });
  BOOST_CHECK_THROW(retry_policy{}.time_limit(0s), std::invalid_argument);
  BOOST_CHECK_THROW(retry_policy{}.retry_if(resilience::retry_on_errors{}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(policies_are_values) {
  const auto a = retry_policy{}.max_attempts(7);
  const auto b = a.max_attempts(2);
  BOOST_TEST(a.options().max_attempts == 7u);
  BOOST_TEST(b.options().max_attempts == 2u);
  const auto c = retry_policy{}.jitter(jitter::equal).backoff(backoff::constant(1s).with_jitter(resilience::jitter::none));
  BOOST_TEST((c.options().delays.jitter_kind() == jitter::none), "backoff() replaces the schedule, jitter included");
  const auto d = retry_policy{}.backoff(backoff::constant(1s)).jitter(jitter::equal);
  BOOST_TEST((d.options().delays == backoff::constant(1s).with_jitter(jitter::equal)));
  BOOST_TEST((retry_policy{}.options().delays.jitter_kind() == jitter::full), "the default schedule is jittered");
  BOOST_TEST(retry_policy{}.options().max_attempts == 3u);
}

// A helper that is not a coroutine: its policy is gone when the awaitable
// runs. The call must hold a copy of its own (ASan would see the use after
// the policy's destruction otherwise).
namespace {
template <class Op>
auto call_with_local_policy(Op op, const manual_clock& clock) {
  // On the heap, so that a use after its end is certain to be reported.
  auto local = std::make_unique<const resilience::basic_retry_policy<resilience::any_failure,
      resilience::no_retry_hook, manual_clock>>(
      retry_policy{}.max_attempts(3).backoff(backoff::constant(50ms).with_jitter(resilience::jitter::none)).clock(clock).logger([](auto) {}));
  return co_retry(std::move(op), *local);
}
}  // namespace

BOOST_AUTO_TEST_CASE(an_lvalue_policy_is_copied_into_the_call) {
  completion<boost::system::result<int>> done;
  auto call = call_with_local_policy(failing({reset, reset}), clock);  // the helper's policy is destroyed here
  spawn(io, std::move(call), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST(calls() == 3);
  BOOST_TEST(done.value->value() == 42);
  BOOST_TEST((since_start(2) == 100ms), "the copy kept the helper's schedule");
}

BOOST_AUTO_TEST_CASE(std_cref_refers_to_the_policy_instead_of_copying_it) {
  // A policy's random source is shared by its copies; a logger counts lines.
  int lines = 0;
  const auto shared = policy().logger([&](std::string_view) { ++lines; });
  completion<boost::system::result<int>> by_copy, by_reference;
  spawn(io, co_retry(failing({reset}), shared), by_copy);
  clock.run(io);
  attempts.clear();
  spawn(io, co_retry(failing({reset}), std::cref(shared)), by_reference);
  io.restart();
  clock.run(io);
  BOOST_TEST(by_copy.times == 1);
  BOOST_TEST(by_reference.times == 1);
  BOOST_TEST(by_copy.value->value() == 42);
  BOOST_TEST(by_reference.value->value() == 42);
  BOOST_TEST(lines == 2, "copies share the policy's hooks");
}

// Stands in for a circuit breaker: all retry needs of one is the time left
// until it lets a probe through.
struct stub_breaker {
  duration left;
  duration time_until_probe() const { return left; }
};

BOOST_AUTO_TEST_CASE(an_open_circuit_is_not_retried_by_default) {
  const error_code open = resilience::error::circuit_open;
  completion<boost::system::result<int>> done;
  auto retry_everything = [](const auto&) { return true; };
  spawn(io, co_retry(failing({open, open}), policy().retry_if(retry_everything)), done);
  clock.run(io);
  BOOST_TEST(calls() == 1, "even a classifier that retries everything does not retry a rejection");
  BOOST_TEST((done.value->error() == open));
}

BOOST_AUTO_TEST_CASE(a_breaker_open_forever_is_not_waited_for) {
  // open_duration(max): the break never ends. Waiting it out must give up at
  // once with circuit_open, not sleep for centuries.
  resilience::basic_circuit_breaker<manual_clock> breaker{
      resilience::breaker_options{}.consecutive_failures(1).open_duration(duration::max()), clock};
  clock.advance(1s);  // "forever" must not become max() - now
  breaker.try_acquire().record_failure();
  BOOST_REQUIRE((breaker.state() == resilience::circuit_state::open));
  BOOST_TEST((breaker.time_until_probe() == duration::max()));
  int calls = 0;
  completion<error_code> done;
  const auto call = resilience::pipeline(policy().wait_out_open_circuit(breaker), std::ref(breaker));
  spawn(io,
        call([&]() -> asio::awaitable<error_code> {
          ++calls;
          co_return error_code{};
        }),
        done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == resilience::error::circuit_open));
  BOOST_TEST(calls == 0);
  BOOST_TEST((clock.now() == time_point(1s)), "no time passed");
}

BOOST_AUTO_TEST_CASE(an_open_circuit_can_be_waited_out) {
  const error_code open = resilience::error::circuit_open;
  const stub_breaker breaker{3s};
  std::vector<duration> waits;
  auto p = policy().wait_out_open_circuit(breaker).on_retry([&](const auto& e) { waits.push_back(e.delay); });
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({open, reset, open}), p), done);
  clock.run(io);
  BOOST_TEST(calls() == 4);
  BOOST_TEST(done.value->value() == 42);
  BOOST_TEST((waits == std::vector<duration>{3s, 200ms, 3s}),
             "the breaker's time left instead of the backoff; the backoff still counts retries");
}

BOOST_AUTO_TEST_CASE(a_breaker_held_open_is_not_waited_for) {
  // An isolated breaker reports no end to its break: waiting would never end.
  const error_code open = resilience::error::circuit_open;
  const stub_breaker isolated{duration::max()};
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({open, open}), policy().wait_out_open_circuit(isolated)), done);
  clock.run(io);
  BOOST_TEST(calls() == 1);
  BOOST_TEST((done.value->error() == open));
  BOOST_TEST((clock.now() == time_point{}));
}

BOOST_AUTO_TEST_CASE(with_no_time_left_the_policy_delay_stands) {
  const error_code open = resilience::error::circuit_open;
  const stub_breaker half_open_and_busy{0s};
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({open}), policy().wait_out_open_circuit(half_open_and_busy)), done);
  clock.run(io);
  BOOST_TEST(calls() == 2);
  BOOST_TEST((since_start(1) == 100ms));
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// A response that may carry a server's Retry-After, in seconds.
struct pushback_response {
  int status;
  int retry_after_s = -1;
};

// Found by argument-dependent lookup: how the retry log names a response.
std::string describe_result(const pushback_response& r) { return "HTTP " + std::to_string(r.status); }

}  // namespace

BOOST_FIXTURE_TEST_SUITE(delay_from_the_outcome, virtual_time)

// Retries 503s; the delay comes from the response when it says one.
auto retry_503 = [](const resilience::outcome<pushback_response>& o) {
  return o.failed() || o.value().status == 503;
};
auto retry_after = [](const resilience::outcome<pushback_response>& o, const resilience::context&) {
  if (o.has_value() && o.value().retry_after_s >= 0)
    return resilience::retry_delay::after(std::chrono::seconds(o.value().retry_after_s));
  return resilience::retry_delay::backoff();
};

BOOST_AUTO_TEST_CASE(a_given_delay_replaces_the_backoff_and_the_backoff_still_counts_retries) {
  std::vector<pushback_response> responses{{503, 7}, {503}, {503, 2}, {200}};
  std::size_t i = 0;
  std::vector<duration> waits;
  const auto p =
      policy().retry_if(retry_503).delay_generator(retry_after).on_retry([&](const auto& e) { waits.push_back(e.delay); });
  completion<pushback_response> done;
  spawn(io, co_retry([&]() -> asio::awaitable<pushback_response> { co_return responses.at(i++); }, p), done);
  clock.run(io);
  BOOST_TEST(done.value->status == 200);
  BOOST_TEST((waits == std::vector<duration>{7s, 200ms, 2s}));
  BOOST_TEST((clock.now() == time_point(9200ms)));
}

BOOST_AUTO_TEST_CASE(stop_ends_the_call_with_the_failed_outcome) {
  const auto p = policy().delay_generator([](const auto& o, const resilience::context&) {
    return o.error() == refused ? resilience::retry_delay::stop() : resilience::retry_delay::backoff();
  });
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({reset, refused, reset}), p), done);
  clock.run(io);
  BOOST_TEST(calls() == 2);
  BOOST_TEST((done.value->error() == refused));
  BOOST_TEST((clock.now() == time_point(100ms)));
}

BOOST_AUTO_TEST_CASE(at_least_never_waits_less_than_the_backoff_or_the_bound) {
  std::vector<duration> waits;
  const auto p = policy()
                     .delay_generator([](const auto&, const resilience::context&) {
                       return resilience::retry_delay::at_least(250ms);
                     })
                     .on_retry([&](const auto& e) { waits.push_back(e.delay); });
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({reset, reset, reset}), p), done);
  clock.run(io);
  BOOST_TEST((waits == std::vector<duration>{250ms, 250ms, 400ms}));
}

BOOST_AUTO_TEST_CASE(the_generator_reads_the_context) {
  std::vector<duration> waits;
  const auto p = policy()
                     .delay_generator([](const auto&, const resilience::context& ctx) {
                       return resilience::retry_delay::after(std::chrono::seconds(ctx.attempt));
                     })
                     .on_retry([&](const auto& e) { waits.push_back(e.delay); });
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({reset, reset, reset}), p), done);
  clock.run(io);
  BOOST_TEST((waits == std::vector<duration>{1s, 2s, 3s}));
}

BOOST_AUTO_TEST_CASE(a_given_delay_is_jittered_only_when_asked) {
  for (const bool jittered : {false, true}) {
    asio::io_context io2;
    manual_clock clock2;
    std::vector<duration> waits;
    const auto p = retry_policy{}
                       .max_attempts(30)
                       .backoff(backoff::constant(1ms))
                       .jitter(jitter::full)
                       .random(resilience::random_source::seeded(4))
                       .clock(clock2)
                       .delay_generator([jittered](const auto&, const resilience::context&) {
                         const auto d = resilience::retry_delay::after(1s);
                         return jittered ? d.jittered() : d;
                       })
                       .on_retry([&](const auto& e) { waits.push_back(e.delay); });
    completion<error_code> done;
    spawn(io2, co_retry([]() -> asio::awaitable<error_code> { co_return reset; }, p), done);
    clock2.run(io2);
    BOOST_REQUIRE(waits.size() == 29u);
    const auto exactly_1s = std::count(waits.begin(), waits.end(), duration(1s));
    BOOST_TEST(std::all_of(waits.begin(), waits.end(), [](duration d) { return d >= 0s && d <= 1s; }));
    if (jittered) {
      BOOST_TEST(exactly_1s == 0);
    } else {
      BOOST_TEST(exactly_1s == 29);
    }
  }
}

BOOST_AUTO_TEST_CASE(after_then_backoff_waits_the_given_delay_and_the_jittered_schedule_on_top) {
  std::vector<duration> waits;
  const auto p = retry_policy{}
                     .max_attempts(20)
                     .backoff(backoff::constant(200ms))
                     .jitter(jitter::full)
                     .random(resilience::random_source::seeded(11))
                     .clock(clock)
                     .delay_generator([](const auto&, const resilience::context&) {
                       return resilience::retry_delay::after_then_backoff(1s);
                     })
                     .on_retry([&](const auto& e) { waits.push_back(e.delay); });
  completion<error_code> done;
  spawn(io, co_retry([]() -> asio::awaitable<error_code> { co_return reset; }, p), done);
  clock.run(io);
  BOOST_REQUIRE(waits.size() == 19u);
  // The 200 ms schedule on top is widened to half the given 1 s.
  BOOST_TEST(std::all_of(waits.begin(), waits.end(), [](duration d) { return d >= 1s && d <= 1500ms; }),
             "never shorter than given, at most half of it more");
  BOOST_TEST(std::any_of(waits.begin(), waits.end(), [](duration d) { return d > 1200ms; }),
             "spread over more than the 200 ms schedule");
  BOOST_TEST(std::count(waits.begin(), waits.end(), waits.front()) < 19, "spread");
  BOOST_TEST(std::accumulate(waits.begin(), waits.end(), duration::zero()) == clock.now() - time_point{},
             "each wait is what the clock moved");
}

BOOST_AUTO_TEST_CASE(the_time_limit_bounds_a_given_delay) {
  const auto p = policy().time_limit(5s).delay_generator(
      [](const auto&, const resilience::context&) { return resilience::retry_delay::after(6s); });
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({reset, reset}), p), done);
  clock.run(io);
  BOOST_TEST(calls() == 1, "a wait past the limit is not started");
  BOOST_TEST((done.value->error() == reset));
  BOOST_TEST((clock.now() == time_point{}));
}

BOOST_AUTO_TEST_CASE(the_deadline_bounds_a_given_delay) {
  const auto call = resilience::pipeline(
      resilience::deadline_stage(3s).clock(clock),
      policy().delay_generator(
          [](const auto&, const resilience::context&) { return resilience::retry_delay::after(2s); }));
  completion<boost::system::result<int>> done;
  spawn(io, call(failing({reset, reset, reset})), done);
  clock.run(io);
  BOOST_TEST(calls() == 2, "the second wait would end past the deadline");
  BOOST_TEST((done.value->error() == reset));
  BOOST_TEST((clock.now() == time_point(2s)));
}

BOOST_AUTO_TEST_CASE(a_wait_that_would_end_at_the_deadline_itself_is_not_started) {
  // 3 s of deadline, 1.5 s waits: the second would end exactly at it, and an
  // attempt begun at the deadline has no time to run.
  const auto call = resilience::pipeline(
      resilience::deadline_stage(3s).clock(clock),
      policy().max_attempts(5).delay_generator(
          [](const auto&, const resilience::context&) { return resilience::retry_delay::after(1500ms); }));
  completion<boost::system::result<int>> done;
  spawn(io, call(failing({reset, reset, reset, reset})), done);
  clock.run(io);
  BOOST_TEST(calls() == 2);
  BOOST_TEST((done.value->error() == reset), "the last failure, not deadline_exceeded after a useless wait");
  BOOST_TEST((clock.now() == time_point(1500ms)));
}

BOOST_AUTO_TEST_CASE(a_generator_that_throws_ends_the_call_with_its_exception) {
  const auto p = policy().delay_generator([](const auto&, const resilience::context&) -> resilience::retry_delay {
    throw std::runtime_error("no delay");
  });
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({reset, reset}), p), done);
  BOOST_CHECK_NO_THROW(clock.run(io));
  BOOST_TEST(done.times == 1);
  BOOST_TEST(calls() == 1);
  BOOST_CHECK_THROW(resilience::test::rethrow(done), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(a_negative_given_delay_is_rejected_where_it_is_made) {
  BOOST_CHECK_THROW(resilience::retry_delay::after(-1ms), std::invalid_argument);
  BOOST_CHECK_THROW(resilience::retry_delay::at_least(-1ms), std::invalid_argument);
  BOOST_CHECK_NO_THROW(resilience::retry_delay::after(0ms));
}

BOOST_AUTO_TEST_CASE(waiting_out_an_open_circuit_leaves_other_failures_to_the_generator) {
  struct stub_breaker {
    duration time_until_probe() const { return 3s; }
  };
  const error_code open = resilience::error::circuit_open;
  const stub_breaker breaker;
  std::vector<duration> waits;
  const auto p = policy()
                     .delay_generator([](const auto&, const resilience::context&) {
                       return resilience::retry_delay::after(50ms);
                     })
                     .wait_out_open_circuit(breaker)
                     .on_retry([&](const auto& e) { waits.push_back(e.delay); });
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({open, reset, open}), p), done);
  clock.run(io);
  BOOST_TEST(done.value->value() == 42);
  BOOST_TEST((waits == std::vector<duration>{3s, 50ms, 3s}));
}

BOOST_AUTO_TEST_CASE(a_custom_schedule_grows_from_the_given_delay_that_was_waited) {
  std::vector<duration> previous;
  const auto p = policy()
                     .backoff(backoff::custom([&](std::uint32_t, duration last, const resilience::random_source&) {
                       previous.push_back(last);
                       return last == 0s ? duration(1s) : last * 2;
                     }).with_jitter(resilience::jitter::none))
                     .delay_generator([](const auto&, const resilience::context& ctx) {
                       return ctx.attempt == 1 ? resilience::retry_delay::after(5s) : resilience::retry_delay::backoff();
                     });
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({reset, reset, reset}), p), done);
  clock.run(io);
  BOOST_TEST(done.value->value() == 42);
  // Retry 1 waited the server's 5 s; retry 2's schedule starts from there.
  BOOST_TEST((previous == std::vector<duration>{0s, 5s, 10s}));
  BOOST_TEST((since_start(1) == 5s));
  BOOST_TEST((since_start(2) == 15s));
  BOOST_TEST((since_start(3) == 35s));
}

BOOST_AUTO_TEST_CASE(aws_decorrelated_draws_its_next_delay_from_the_given_one) {
  // min(cap, uniform(base, 3 * previous)): after a given 10 s the next draw
  // lies in [100 ms, 30 s] capped at 20 s, not in [100 ms, 300 ms].
  std::vector<duration> waits;
  const auto base = policy()
                     .max_attempts(3)
                     .backoff(backoff::decorrelated(100ms, 20s))
                     .delay_generator([](const auto&, const resilience::context& ctx) {
                       return ctx.attempt == 1 ? resilience::retry_delay::after(10s) : resilience::retry_delay::backoff();
                     })
                     .on_retry([&](const auto& e) { waits.push_back(e.delay); });
  int over_300ms = 0;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    waits.clear();
    const auto p = base.random(resilience::random_source::seeded(seed));
    completion<boost::system::result<int>> done;
    spawn(io, co_retry(failing({reset, reset, reset, reset}), p), done);
    clock.run(io);
    attempts.clear();
    BOOST_REQUIRE(waits.size() == 2u);
    BOOST_TEST((waits[0] == 10s));
    BOOST_TEST((waits[1] >= 100ms && waits[1] <= 20s));
    if (waits[1] > 300ms) ++over_300ms;
  }
  BOOST_TEST(over_300ms >= 15);  // P(draw <= 300 ms) = 0.2 / 29.9 per call
}

BOOST_AUTO_TEST_CASE(a_jittered_given_delay_is_spread_under_aws_decorrelated) {
  // That schedule's draw is its jitter (jitter::none is all it takes): a
  // jittered Retry-After is spread as equal jitter spreads it, [d/2, d].
  std::set<duration> waits;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {  // 20 clients
    const auto p = policy()
                       .max_attempts(2)
                       .backoff(backoff::decorrelated(100ms, 20s))
                       .random(resilience::random_source::seeded(seed))
                       .delay_generator([](const auto&, const resilience::context&) {
                         return resilience::retry_delay::after(10s).jittered();
                       })
                       .on_retry([&](const auto& e) { waits.insert(e.delay); });
    attempts.clear();
    completion<boost::system::result<int>> done;
    spawn(io, co_retry(failing({reset, reset}), p), done);
    clock.run(io);
  }
  BOOST_TEST(waits.size() > 10u);
  BOOST_TEST((*waits.begin() >= 5s && *waits.rbegin() <= 10s));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(log_lines, virtual_time)

BOOST_AUTO_TEST_CASE(name_the_failed_value_the_error_and_the_exception) {
  std::vector<std::string> lines;
  const auto log = [&](std::string_view l) { lines.emplace_back(l); };
  {
    std::vector<pushback_response> responses{{503}, {200}};
    std::size_t i = 0;
    completion<pushback_response> done;
    spawn(io,
          co_retry([&]() -> asio::awaitable<pushback_response> { co_return responses.at(i++); },
                   policy().retry_if(delay_from_the_outcome::retry_503).logger(log)),
          done);
    clock.run(io);
  }
  {
    completion<boost::system::result<int>> done;
    spawn(io, co_retry(failing({reset}), policy().logger(log)), done);
    clock.run(io);
  }
  {
    int calls = 0;
    completion<int> done;
    spawn(io,
          co_retry(
              [&]() -> asio::awaitable<int> {
                if (++calls == 1) throw std::runtime_error("disk on fire");
                co_return 1;
              },
              policy().logger(log)),
          done);
    clock.run(io);
  }
  BOOST_REQUIRE(lines.size() == 3u);
  BOOST_TEST(lines[0].find("(HTTP 503)") != std::string::npos, lines[0]);
  BOOST_TEST(lines[1].find(reset.message()) != std::string::npos, lines[1]);
  BOOST_TEST(lines[2].find("disk on fire") != std::string::npos, lines[2]);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(unlimited_attempts, virtual_time)

BOOST_AUTO_TEST_CASE(retries_until_success) {
  const auto p = policy().max_attempts(resilience::unlimited_attempts).backoff(backoff::constant(1ms).with_jitter(resilience::jitter::none));
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing(std::vector<error_code>(1000, reset)), p), done);
  clock.run(io);
  BOOST_TEST(calls() == 1001);
  BOOST_TEST(done.value->value() == 42);
  BOOST_TEST((clock.now() == time_point(1000ms)));
}

BOOST_AUTO_TEST_CASE(the_time_limit_ends_it) {
  const auto p =
      policy().max_attempts(resilience::unlimited_attempts).backoff(backoff::constant(1s).with_jitter(resilience::jitter::none)).time_limit(10s);
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing(std::vector<error_code>(1000, reset)), p), done);
  clock.run(io);
  BOOST_TEST(calls() == 11);
  BOOST_TEST((done.value->error() == reset));
}

BOOST_AUTO_TEST_CASE(cancellation_ends_it) {
  asio::cancellation_signal signal;
  const auto p = policy()
                     .max_attempts(resilience::unlimited_attempts)
                     .backoff(backoff::constant(1s).with_jitter(resilience::jitter::none))
                     .on_retry([&](const auto& e) {
                       if (e.attempt == 50) signal.emit(asio::cancellation_type::terminal);
                     });
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing(std::vector<error_code>(1000, reset)), p), done, &signal);
  clock.run(io);
  BOOST_TEST(calls() == 50);
  BOOST_TEST((done.value->error() == asio::error::operation_aborted));
}

BOOST_AUTO_TEST_CASE(the_log_line_has_no_limit_to_show) {
  std::vector<std::string> lines;
  const auto p = policy().max_attempts(resilience::unlimited_attempts).logger([&](std::string_view l) {
    lines.emplace_back(l);
  });
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({reset}), p), done);
  clock.run(io);
  BOOST_REQUIRE(lines.size() == 1u);
  BOOST_TEST(lines[0].find("attempt 1 failed") != std::string::npos, lines[0]);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(co_retry_cancellation, virtual_time)

BOOST_AUTO_TEST_CASE(cancellation_during_a_wait_ends_at_once) {
  asio::cancellation_signal signal;
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing(std::vector<error_code>(10, reset)), policy()), done, &signal);
  clock.run_for(io, 150ms);  // attempts at 0 and 100 ms; now waiting 200 ms
  BOOST_REQUIRE(calls() == 2);
  BOOST_REQUIRE(clock.pending() == 1u);
  signal.emit(asio::cancellation_type::terminal);
  io.poll();
  BOOST_TEST(done.times == 1, "completes at once, without time passing");
  BOOST_TEST((done.value->error() == asio::error::operation_aborted));
  BOOST_TEST(clock.pending() == 0u);
  clock.run_for(io, 1h);
  BOOST_TEST(calls() == 2, "nothing is retried after a cancellation");
  BOOST_TEST(done.times == 1);
}

BOOST_AUTO_TEST_CASE(cancellation_during_an_attempt_is_not_retried) {
  int calls = 0;
  auto slow = [&]() -> asio::awaitable<int> {
    ++calls;
    auto t = clock.make_timer(co_await asio::this_coro::executor);
    t.expires_after(10s);
    co_await t.async_wait(asio::use_awaitable);  // throws operation_aborted when cancelled
    co_return 1;
  };
  auto retry_everything = [](const auto&) { return true; };
  asio::cancellation_signal signal;
  completion<int> done;
  spawn(io, co_retry(slow, policy().retry_if(retry_everything)), done, &signal);
  clock.run_for(io, 1s);
  signal.emit(asio::cancellation_type::terminal);
  clock.run(io);
  BOOST_TEST(calls == 1, "even a classifier that retries everything does not retry a cancellation");
  BOOST_TEST(done.times == 1);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), boost::system::system_error,
                        [](const auto& e) { return e.code() == asio::error::operation_aborted; });
}

BOOST_AUTO_TEST_CASE(an_op_that_swallows_cancellation_still_stops_the_retry) {
  // The op turns the cancellation into an ordinary transient error; co_retry
  // must still see that its caller was cancelled, and report it as such.
  int calls = 0;
  auto stubborn = [&]() -> asio::awaitable<error_code> {
    ++calls;
    auto t = clock.make_timer(co_await asio::this_coro::executor);
    t.expires_after(10s);
    auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return ec ? reset : error_code{};
  };
  asio::cancellation_signal signal;
  completion<error_code> done;
  spawn(io, co_retry(stubborn, policy()), done, &signal);
  clock.run_for(io, 1s);
  signal.emit(asio::cancellation_type::terminal);
  clock.run(io);
  BOOST_TEST(calls == 1);
  BOOST_TEST((*done.value == asio::error::operation_aborted));
}

BOOST_AUTO_TEST_CASE(an_op_reporting_cancellation_itself_is_not_retried) {
  completion<boost::system::result<int>> done;
  auto retry_everything = [](const auto&) { return true; };
  spawn(io, co_retry(failing({asio::error::operation_aborted}), policy().retry_if(retry_everything)), done);
  clock.run(io);
  BOOST_TEST(calls() == 1);
  BOOST_TEST((done.value->error() == asio::error::operation_aborted));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(co_retry_events, virtual_time)

BOOST_AUTO_TEST_CASE(on_retry_receives_attempt_outcome_and_both_delays) {
  struct seen {
    std::uint32_t attempt, max;
    error_code error;
    duration backoff, delay;
  };
  std::vector<seen> events;
  auto p = policy()
               .jitter(jitter::full)
               .random(resilience::random_source::seeded(3))
               .on_retry([&](const auto& e) {
                 events.push_back({e.attempt, e.max_attempts, e.result.error(), e.backoff, e.delay});
               });
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({reset, refused, reset}), p), done);
  clock.run(io);
  BOOST_REQUIRE(events.size() == 3u);
  const std::vector<duration> nominal{100ms, 200ms, 400ms};
  duration waited{};
  for (std::size_t i = 0; i < events.size(); ++i) {
    BOOST_TEST(events[i].attempt == i + 1);
    BOOST_TEST(events[i].max == 5u);
    BOOST_TEST((events[i].backoff == nominal[i]));
    BOOST_TEST((events[i].delay <= events[i].backoff));
    BOOST_TEST((attempts[i + 1] - attempts[i] == events[i].delay), "the jittered delay is what was waited");
    waited += events[i].delay;
  }
  BOOST_TEST((events[1].error == refused));
  BOOST_TEST((waited < 700ms), "full jitter with this seed waits less than the nominal total");
}

BOOST_AUTO_TEST_CASE(the_logger_gets_one_line_per_retry) {
  std::vector<std::string> lines;
  auto p = policy().logger([&](std::string_view line) { lines.emplace_back(line); });
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({reset}), p), done);
  clock.run(io);
  BOOST_REQUIRE(lines.size() == 1u);
  BOOST_TEST(lines[0].find("attempt 1/5") != std::string::npos, lines[0]);
  BOOST_TEST(lines[0].find(reset.message()) != std::string::npos, lines[0]);
  BOOST_TEST(lines[0].find("100.0ms") != std::string::npos, lines[0]);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(co_retry_on_the_steady_clock)

// Steady-clock waits are nodes of the context's shared timer queue. These
// check that such a wait ends once, by its time or by cancellation; never how
// long it took.
BOOST_AUTO_TEST_CASE(a_cancelled_hour_long_backoff_ends_at_once) {
  asio::io_context io;
  asio::cancellation_signal signal;
  int calls = 0;
  completion<error_code> done;
  const auto policy = retry_policy{}.max_attempts(2).backoff(backoff::constant(1h).with_jitter(resilience::jitter::none));
  spawn(io,
        co_retry(
            [&]() -> asio::awaitable<error_code> {
              ++calls;
              co_return reset;
            },
            policy),
        done, &signal);
  io.poll();
  BOOST_REQUIRE(!done.done());
  asio::post(io, [&] { signal.emit(asio::cancellation_type::terminal); });
  io.run();  // returns only if nothing is left armed
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == asio::error::operation_aborted));
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_CASE(many_short_backoffs_each_end_once) {
  asio::io_context io;
  constexpr int calls = 1000;
  int completions = 0, successes = 0;
  const auto policy = retry_policy{}.max_attempts(3).backoff(backoff::constant(1ms)).jitter(jitter::full);
  for (int i = 0; i < calls; ++i) {
    asio::co_spawn(io,
                   co_retry(
                       [n = 0]() mutable -> asio::awaitable<error_code> {
                         if (n++ < 2) co_return reset;
                         co_return error_code{};
                       },
                       policy),
                   [&](std::exception_ptr e, error_code ec) {
                     ++completions;
                     if (!e && !ec) ++successes;
                   });
  }
  io.run();
  BOOST_TEST(completions == calls);
  BOOST_TEST(successes == calls);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(co_retry_concurrency)

BOOST_AUTO_TEST_CASE(many_concurrent_calls_share_one_policy_on_two_threads) {
  // Real steady clock, but only zero and 1 µs delays: this checks sharing and
  // completion counts, not timing.
  constexpr int calls = 2000;
  asio::thread_pool pool(2);
  std::atomic<int> attempts{0}, retries{0}, successes{0}, completions{0};
  const auto policy = retry_policy{}
                          .max_attempts(4)
                          .backoff(backoff::exponential(1us, 2.0, 2us))
                          .jitter(jitter::full)
                          .on_retry([&](const auto&) { retries.fetch_add(1, std::memory_order_relaxed); });
  for (int i = 0; i < calls; ++i) {
    auto op = [&, failures = i % 3, n = 0]() mutable -> asio::awaitable<boost::system::result<int>> {
      attempts.fetch_add(1, std::memory_order_relaxed);
      if (n++ < failures) co_return reset;
      co_return 1;
    };
    asio::co_spawn(asio::make_strand(pool), co_retry(op, policy),
                   [&](std::exception_ptr e, boost::system::result<int> r) {
                     if (!e && r && *r == 1) successes.fetch_add(1);
                     completions.fetch_add(1);
                   });
  }
  pool.join();
  // failures cycle 0, 1, 2: on average one retry per call.
  const int expected_retries = (calls / 3) * 3 + (calls % 3 == 2 ? 1 : 0);
  BOOST_TEST(completions.load() == calls);
  BOOST_TEST(successes.load() == calls);
  BOOST_TEST(retries.load() == expected_retries);
  BOOST_TEST(attempts.load() == calls + expected_retries);
}

BOOST_AUTO_TEST_SUITE_END()

// -- retry_policy: each setter --------------------------------------------

BOOST_AUTO_TEST_CASE(retry_policy_setters_over_extreme_values) {
  const retry_policy p;
  struct row {
    const char* what;
    std::function<retry_policy()> make;
    rejects verdict;
    std::size_t calls;  // of an op that fails 5 times, then succeeds
  };
  const row rows[] = {
      {"max_attempts(0)", [&] { return p.max_attempts(0); }, "max_attempts", 0},
      {"max_attempts(1)", [&] { return p.max_attempts(1); }, accepted, 1},
      {"max_attempts(UINT32_MAX)", [&] { return p.max_attempts(UINT32_MAX); }, accepted, 6},

      {"time_limit(0)", [&] { return p.time_limit(0s); }, "time_limit", 0},
      {"time_limit(-1 tick)", [&] { return p.time_limit(-tick); }, "time_limit", 0},
      {"time_limit(min)", [&] { return p.time_limit(dmin); }, "time_limit", 0},
      // Shorter than any wait: gives up after the first attempt.
      {"time_limit(1 tick)", [&] { return p.time_limit(tick).fit_to_time_left(false); }, accepted, 1},
      // max() means none.
      {"time_limit(max)", [&] { return p.max_attempts(10).time_limit(dmax); }, accepted, 6},

      {"backoff(constant(0))", [&] { return p.max_attempts(10).backoff(backoff::constant(0s).with_jitter(resilience::jitter::none)); }, accepted, 6},
      // A wait that would end at the end of time is "forever": the call
      // gives up instead of starting it.
      {"backoff(constant(max))", [&] { return p.max_attempts(10).backoff(backoff::constant(dmax).with_jitter(resilience::jitter::none)); }, accepted, 1},
      {"backoff(constant(max)), time_limit(1h)",
       [&] { return p.backoff(backoff::constant(dmax).with_jitter(resilience::jitter::none)).time_limit(1h).fit_to_time_left(false); }, accepted, 1},
      {"backoff(linear(max, max))", [&] { return p.backoff(backoff::linear(dmax, dmax).with_jitter(resilience::jitter::none)); }, accepted, 1},
      // 1 tick, then a delay that saturates at max: forever.
      {"backoff(exponential(1 tick, double max, no_cap))",
       [&] { return p.max_attempts(UINT32_MAX).backoff(backoff::exponential(tick, dbl_max, backoff::no_cap).with_jitter(resilience::jitter::none)); },
       accepted, 2},

      {"jitter(none)", [&] { return p.jitter(jitter::none); }, accepted, 3},
      {"jitter(decorrelated_clamped)", [&] { return p.jitter(jitter::decorrelated_clamped); }, accepted, 3},
      {"jitter(decorrelated_v2)", [&] { return p.jitter(jitter::decorrelated_v2); }, accepted, 3},
      {"jitter(5)", [&] { return p.jitter(static_cast<jitter>(5)); }, "jitter", 0},
      {"linear(0, 10ms), jitter(decorrelated_clamped)",
       [&] { return p.backoff(backoff::linear(0s, 10ms)).jitter(jitter::decorrelated_clamped); }, "initial", 0},
      {"constant(0), jitter(decorrelated_v2)",
       [&] { return p.backoff(backoff::constant(0s)).jitter(jitter::decorrelated_v2); }, "delay", 0},
      // backoff() replaces the jitter too: the zero schedule has none.
      {"jitter(decorrelated_clamped), linear(0, 10ms)",
       [&] { return p.jitter(jitter::decorrelated_clamped).backoff(backoff::linear(0s, 10ms).with_jitter(resilience::jitter::none)); }, accepted, 3},
  };
  for (const row& r : rows) {
    const auto policy = enter(r.what, r.make, r.verdict);
    if (!policy) continue;
    virtual_calls vt;
    std::vector<duration> waits;
    std::vector<std::string> lines;  // the logger formats the extreme delays too
    const auto on_clock = policy->random(resilience::random_source::seeded(3))
                              .logger([&](std::string_view line) { lines.emplace_back(line); })
                              .clock(vt.clock)
                              .on_retry([&](const auto& e) { waits.push_back(e.delay); });
    const auto done = vt.run(resilience::co_retry(vt.failing(5), on_clock));
    BOOST_TEST_REQUIRE(done.times == 1, r.what);
    BOOST_TEST_REQUIRE(!done.exception, r.what);
    BOOST_TEST(vt.calls.size() == r.calls, r.what);
    BOOST_TEST(done.value->has_value() == (r.calls == 6), r.what);
    BOOST_TEST(waits.size() == vt.calls.size() - 1, r.what);
    BOOST_TEST(lines.size() == waits.size(), r.what);
    for (std::size_t i = 0; i + 1 < vt.calls.size(); ++i) {
      BOOST_TEST((vt.calls[i + 1] == add(vt.calls[i], waits[i])), r.what << ": wait " << i);
    }
  }
}
