#include "support.hpp"

#include <resilience/deadline.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::backoff;
using resilience::duration;
using resilience::retry_policy;
using resilience::time_point;
using resilience::test::completion;
using resilience::test::spawn;
using resilience::test::timeout_error;
using namespace resilience::test::extremes;

namespace {
using virtual_time = resilience::test::timed_stages;
}  // namespace

BOOST_FIXTURE_TEST_SUITE(timeout_stage, virtual_time)

BOOST_AUTO_TEST_CASE(the_timeout_fires_cancels_and_waits_for_the_op) {
  completion<boost::system::result<int>> done;
  const auto t = timeout(100ms);
  spawn(io, t(slow(1s)), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value->error() == timeout_error));
  BOOST_TEST(finished == 1, "the op was waited for, not detached");
  BOOST_TEST((now() == 100ms));
  BOOST_TEST(clock.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(an_op_without_an_error_channel_gets_the_timeout_thrown) {
  completion<int> done;
  const auto t = timeout(100ms);
  spawn(io, t(slow_throwing(1s)), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), boost::system::system_error,
                        [](const auto& e) { return e.code() == timeout_error; });
}

BOOST_AUTO_TEST_CASE(the_op_finishing_first_wins_and_nothing_wakes_later) {
  completion<boost::system::result<int>> done;
  const auto t = timeout(1s);
  spawn(io, t(slow(10ms, 42)), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST(done.value->value() == 42);
  BOOST_TEST((now() == 10ms), "the timer was disarmed: time never ran on to 1 s");
  BOOST_TEST(clock.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(an_op_that_ignores_cancellation_is_waited_for) {
  // Success after the timer: the work was done, so it is returned as is.
  completion<boost::system::result<int>> ok;
  const auto t = timeout(100ms);
  spawn(io, t(stubborn(300ms, 5)), ok);
  clock.run(io);
  BOOST_TEST(ok.value->value() == 5);
  BOOST_TEST((now() == 300ms), "never detached: the call lasted as long as the op");
  // Failure after the timer: reported as the timeout it is.
  completion<boost::system::result<int>> failed;
  spawn(io, t(stubborn(300ms, error_code(asio::error::connection_reset))), failed);
  clock.run(io);
  BOOST_TEST((failed.value->error() == timeout_error));
  BOOST_TEST(finished == 2);
}

BOOST_AUTO_TEST_CASE(on_timeout_reports_each_expiry_once_after_the_op_finished) {
  std::vector<resilience::expiry_event> events;
  int finished_when_reported = -1;
  const auto t = timeout(100ms).on_timeout([&](const resilience::expiry_event& e) {
    events.push_back(e);
    finished_when_reported = finished;
  });
  completion<boost::system::result<int>> late, early;
  spawn(io, t(slow(1s)), late);
  spawn(io, t(slow(10ms)), early);
  clock.run(io);
  BOOST_REQUIRE(events.size() == 1u);
  BOOST_TEST((events[0].reason == timeout_error));
  BOOST_TEST((events[0].at == time_point(100ms)));
  BOOST_TEST(events[0].attempt == 1u);
  BOOST_TEST(finished_when_reported == 2, "reported after the overrunning op was waited for");
  BOOST_TEST(early.value->value() == 1);
}

// cancellation(type) is the cancellation the op gets when time runs out;
// this op opts in to every type, and sees the one asked for.
BOOST_AUTO_TEST_CASE(the_op_is_cancelled_with_the_type_asked_for) {
  for (const auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                          asio::cancellation_type::total}) {
    auto seen = asio::cancellation_type::none;
    const auto op = [this, &seen]() -> asio::awaitable<error_code> {
      co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
      auto timer = clock.make_timer(co_await asio::this_coro::executor);
      timer.expires_after(1s);
      auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      seen = (co_await asio::this_coro::cancellation_state).cancelled();
      co_return ec;
    };
    completion<error_code> done;
    spawn(io, timeout(100ms).cancellation(type)(op), done);
    clock.run(io);
    io.restart();
    BOOST_TEST((done.value == timeout_error));
    BOOST_TEST((seen == type), "cancelled with " << static_cast<int>(seen) << ", not " << static_cast<int>(type));
  }
}

BOOST_AUTO_TEST_CASE(bad_timeouts_are_rejected) {
  BOOST_CHECK_THROW(resilience::timeout(0ms), std::invalid_argument);
  BOOST_CHECK_THROW(resilience::timeout(-1s), std::invalid_argument);
  BOOST_CHECK_THROW(resilience::timeout(1s).cancellation(asio::cancellation_type::none), std::invalid_argument);
  BOOST_CHECK_THROW(resilience::deadline_stage(0s), std::invalid_argument);
  BOOST_CHECK_THROW(resilience::deadline::after(-1s), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(timeout_concurrency)

BOOST_AUTO_TEST_CASE(pipelines_on_strands_of_a_two_thread_pool) {
  // Real time, short bounds: some attempts time out, some do not. What is
  // checked is exactly-once completion and, under TSan, the absence of races,
  // not timing.
  constexpr int calls = 300;
  asio::thread_pool pool(2);
  std::atomic<int> completions{0}, values{0}, timeouts{0}, starts{0};
  const auto p = resilience::pipeline(resilience::deadline_stage(2s),
                                      retry_policy{}.max_attempts(3).backoff(backoff::constant(100us).with_jitter(resilience::jitter::none)),
                                      resilience::timeout(1ms));
  for (int i = 0; i < calls; ++i) {
    auto op = [&, work = std::chrono::microseconds(i % 7 * 400)]() -> asio::awaitable<boost::system::result<int>> {
      starts.fetch_add(1);
      asio::steady_timer t(co_await asio::this_coro::executor, work);
      auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return ec;
      co_return 1;
    };
    asio::co_spawn(asio::make_strand(pool), p(op), [&](std::exception_ptr e, boost::system::result<int> r) {
      completions.fetch_add(1);
      if (!e && r) values.fetch_add(1);
      if (!e && !r && r.error() == resilience::error::timeout) timeouts.fetch_add(1);
    });
  }
  pool.join();
  BOOST_TEST(completions.load() == calls);
  BOOST_TEST(values.load() + timeouts.load() == calls);
  BOOST_TEST(starts.load() >= calls);
}

BOOST_AUTO_TEST_SUITE_END()

// -- timeout(d) -------------------------------------------------------------

BOOST_AUTO_TEST_CASE(timeout_over_extreme_values) {
  struct row {
    const char* what;
    duration d;
    rejects verdict;
  };
  const row rows[] = {
      {"timeout(0)", 0s, "duration"},
      {"timeout(-1 tick)", -tick, "duration"},
      {"timeout(min)", dmin, "duration"},
      {"timeout(1 tick)", tick, accepted},
      {"timeout(1h)", 1h, accepted},
      {"timeout(max)", dmax, accepted},
  };
  for (const row& r : rows) {
    const auto stage = enter(r.what, [&] { return resilience::timeout(r.d); }, r.verdict);
    if (!stage) continue;
    BOOST_TEST((stage->limit() == r.d), r.what);
    virtual_calls vt;
    const auto on_clock = stage->clock(vt.clock);
    check_bounded_call(r.what, vt, vt.run(on_clock(vt.taking(1ms))), 1ms, r.d, resilience::error::timeout);
  }
}
