// Hedging: when hedges start (the delay, at once after a non-fatal failure,
// all at once with delay 0), which outcome wins, losers cancelled and
// awaited, the bounds (max_attempts, budget, pushback, deadline),
// cancellation at each suspension point, a context destroyed mid-call,
// per-attempt properties, options. Everything on virtual time.
#include "support.hpp"

#include <resilience/deadline.hpp>
#include <resilience/hedging.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry_budget.hpp>
#include <resilience/testing/manual_clock.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_state.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::duration;
using resilience::retry_delay;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::live;
using resilience::test::names;
using resilience::test::spawn;

namespace {

const error_code ok{};
using resilience::test::reset;
using resilience::test::refused;
const error_code denied = asio::error::access_denied;
using resilience::test::aborted;

constexpr resilience::property_key<int> mark{"mark"};
constexpr resilience::property_key<std::string> note{"note"};

// What attempt n does: answers `result` after `after` of virtual time.
struct step {
  duration after;
  error_code result;
  bool ignores_cancellation = false;
};

struct hedging_fixture {
  asio::io_context io;
  manual_clock clock;
  std::vector<step> plan;  // by attempt number, from 1
  std::vector<std::uint32_t> started;
  std::vector<duration> started_at;
  std::vector<std::uint32_t> cancelled;  // attempts that saw their cancellation
  std::vector<std::uint32_t> answered;   // attempts that ran to their answer
  std::vector<resilience::hedge_event> hedges;
  std::vector<resilience::hedge_summary> settled;
  std::vector<int> marks_seen;  // the mark each attempt found when it started

  duration now() const { return clock.now().time_since_epoch(); }

  auto policy() {
    return resilience::hedging_policy{}
        .clock(clock)
        .on_hedge([this](const resilience::hedge_event& e) { hedges.push_back(e); })
        .on_settled([this](const resilience::hedge_summary& s) { settled.push_back(s); });
  }

  auto op() {
    return [this](const resilience::context& ctx) -> asio::awaitable<error_code> {
      live frame(live::ops);
      const std::uint32_t n = ctx.attempt;
      started.push_back(n);
      started_at.push_back(now());
      marks_seen.push_back(ctx.value_or(mark, -1));
      ctx.set(mark, static_cast<int>(n) * 10);
      ctx.set(note, "attempt " + std::to_string(n));
      const step s = plan.at(n - 1);
      if (s.ignores_cancellation) co_await asio::this_coro::reset_cancellation_state(asio::disable_cancellation());
      if (s.after > duration::zero()) {
        auto timer = clock.make_timer(co_await asio::this_coro::executor);
        timer.expires_after(s.after);
        auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        if (ec) {
          cancelled.push_back(n);
          co_return ec;
        }
      }
      answered.push_back(n);
      co_return s.result;
    };
  }

  void poll() {
    while (io.poll() != 0) {
    }
    io.restart();
  }
};

// What the caller saw when its call completed: its state at that moment.
struct observed {
  int times = 0;
  error_code value;
  duration at{};
  int ops_alive = -1;
  std::size_t cancelled = 0;
};

template <class Awaitable>
void spawn_observed(hedging_fixture& f, Awaitable a, observed& out, asio::cancellation_signal* cancel = nullptr) {
  auto handler = [&f, &out](std::exception_ptr e, error_code ec) {
    BOOST_TEST(!e);
    ++out.times;
    out.value = ec;
    out.at = f.now();
    out.ops_alive = live::ops;
    out.cancelled = f.cancelled.size();
  };
  if (cancel) {
    asio::co_spawn(f.io, std::move(a), asio::bind_cancellation_slot(cancel->slot(), handler));
  } else {
    asio::co_spawn(f.io, std::move(a), handler);
  }
}

using attempts = std::vector<std::uint32_t>;
using times = std::vector<duration>;

}  // namespace

BOOST_FIXTURE_TEST_SUITE(hedging_outcomes, hedging_fixture)

BOOST_AUTO_TEST_CASE(a_first_attempt_that_answers_before_the_delay_starts_no_hedge) {
  plan = {{50ms, ok}};
  const auto hedged = policy().max_attempts(3).delay(100ms);
  observed done;
  spawn_observed(*this, hedged(op()), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == ok));
  BOOST_TEST((done.at == 50ms));
  BOOST_TEST(started == attempts({1}));
  BOOST_TEST(hedges.empty());
  BOOST_REQUIRE(settled.size() == 1u);
  BOOST_TEST(settled[0].winner == 1u);
  BOOST_TEST(settled[0].started == 1u);
  BOOST_TEST(clock.pending() == 0u, "the hedge timer was left armed");
}

BOOST_AUTO_TEST_CASE(each_attempt_reads_the_time_left_on_the_policys_clock) {
  clock.advance(1h);  // far from the steady clock's reading
  std::vector<duration> remaining;
  const auto hedged = policy().max_attempts(2).delay(100ms);
  auto timed = [&](const resilience::context& ctx) -> asio::awaitable<error_code> {
    remaining.push_back(ctx.remaining());
    auto timer = clock.make_timer(co_await asio::this_coro::executor);
    timer.expires_after(ctx.attempt == 1 ? 1s : 10ms);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return ec;
  };
  observed done;
  spawn_observed(*this, hedged(timed, resilience::context{.deadline = clock.now() + 2s}), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((remaining == times{2s, 1900ms}));  // the hedge starts 100 ms in
}

BOOST_AUTO_TEST_CASE(a_policy_named_by_an_lvalue_is_copied_into_the_call) {
  plan = {{1s, ok}, {30ms, ok}};
  observed done;
  spawn_observed(*this, resilience::test::call_through_local(policy().max_attempts(3).delay(100ms), op()), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.at == 130ms), "the copy kept the delay");
  BOOST_TEST(hedges.size() == 1u, "and the hooks");
  BOOST_TEST(settled.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_slow_first_attempt_gets_a_hedge_at_the_delay_and_the_hedge_wins) {
  plan = {{1s, ok}, {30ms, ok}};
  const auto hedged = policy().max_attempts(3).delay(100ms);
  observed done;
  spawn_observed(*this, hedged(op()), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == ok));
  BOOST_TEST((done.at == 130ms));
  BOOST_TEST(started == attempts({1, 2}));
  BOOST_TEST((started_at == times({0ms, 100ms})));
  BOOST_TEST(answered == attempts({2}));
  BOOST_REQUIRE(hedges.size() == 1u);
  BOOST_TEST(hedges[0].attempt == 2u);
  BOOST_TEST((hedges[0].elapsed == 100ms));
  BOOST_REQUIRE(settled.size() == 1u);
  BOOST_TEST(settled[0].winner == 2u);
  BOOST_TEST(settled[0].started == 2u);
  // The loser was cancelled and had completed before the call did.
  BOOST_TEST(cancelled == attempts({1}));
  BOOST_TEST(done.cancelled == 1u);
  BOOST_TEST(done.ops_alive == 0, "an attempt was still running when the call completed");
}

BOOST_AUTO_TEST_CASE(a_loser_that_ignores_cancellation_is_awaited) {
  plan = {{1s, ok, true}, {10ms, ok}};
  const auto hedged = policy().max_attempts(2).delay(100ms);
  observed done;
  spawn_observed(*this, hedged(op()), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == ok));
  BOOST_TEST((done.at == 1s), "the call returned before its loser had completed");
  BOOST_TEST(answered == attempts({2, 1}));
  BOOST_TEST(settled.at(0).winner == 2u);
  BOOST_TEST(done.ops_alive == 0);
}

BOOST_AUTO_TEST_CASE(a_non_fatal_failure_starts_the_next_hedge_at_once) {
  plan = {{20ms, reset}, {500ms, ok}, {50ms, ok}};
  const auto hedged = policy().max_attempts(3).delay(100ms);
  observed done;
  spawn_observed(*this, hedged(op()), done);
  clock.run(io);
  BOOST_TEST((done.value == ok));
  // 2 at once after 1 failed, 3 one delay after 2 (gRFC A6).
  BOOST_TEST((started_at == times({0ms, 20ms, 120ms})));
  BOOST_TEST((done.at == 170ms));
  BOOST_TEST(settled.at(0).winner == 3u);
  BOOST_TEST(cancelled == attempts({2}));
}

BOOST_AUTO_TEST_CASE(a_fatal_failure_wins_at_once) {
  plan = {{1s, ok}, {10ms, denied}};
  const auto hedged = policy().max_attempts(3).delay(100ms).non_fatal_if(resilience::retry_on_errors{reset});
  observed done;
  spawn_observed(*this, hedged(op()), done);
  clock.run(io);
  BOOST_TEST((done.value == denied));
  BOOST_TEST((done.at == 110ms));
  BOOST_TEST(started == attempts({1, 2}));
  BOOST_TEST(cancelled == attempts({1}));
  BOOST_TEST(settled.at(0).winner == 2u);
}

BOOST_AUTO_TEST_CASE(when_every_attempt_fails_the_last_failure_is_returned) {
  plan = {{10ms, reset}, {20ms, refused}, {5ms, denied}};
  const auto hedged = policy().max_attempts(3).delay(100ms);
  observed done;
  spawn_observed(*this, hedged(op()), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == denied));
  BOOST_TEST((done.at == 35ms));
  BOOST_TEST((started_at == times({0ms, 10ms, 30ms})));
  BOOST_TEST(settled.at(0).winner == 3u);
  BOOST_TEST(clock.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(delay_zero_starts_every_attempt_at_once) {
  plan = {{300ms, ok}, {100ms, ok}, {200ms, ok}};
  const auto hedged = policy().max_attempts(3).delay(0ms);
  observed done;
  spawn_observed(*this, hedged(op()), done);
  poll();
  BOOST_TEST(started == attempts({1, 2, 3}));
  clock.run(io);
  BOOST_TEST((started_at == times({0ms, 0ms, 0ms})));
  BOOST_TEST((done.at == 100ms));
  BOOST_TEST(settled.at(0).winner == 2u);
  BOOST_TEST(cancelled == attempts({1, 3}));
  BOOST_TEST(done.ops_alive == 0);
}

BOOST_AUTO_TEST_CASE(max_attempts_bounds_the_hedges) {
  plan = {{1s, ok}, {1s, ok}, {1s, ok}, {1s, ok}};
  const auto hedged = policy().max_attempts(3).delay(10ms);
  observed done;
  spawn_observed(*this, hedged(op()), done);
  clock.run(io);
  BOOST_TEST((started_at == times({0ms, 10ms, 20ms})));
  BOOST_TEST((done.at == 1s));
  BOOST_TEST(settled.at(0).winner == 1u);
  BOOST_TEST(settled.at(0).started == 3u);
}

BOOST_AUTO_TEST_CASE(one_attempt_is_no_hedging) {
  plan = {{1s, reset}};
  const auto hedged = policy().max_attempts(1).delay(10ms);
  observed done;
  spawn_observed(*this, hedged(op()), done);
  clock.run(io);
  BOOST_TEST(started == attempts({1}));
  BOOST_TEST((done.value == reset));
}

BOOST_AUTO_TEST_CASE(a_result_without_error_channel_throws_and_a_thrown_failure_is_non_fatal) {
  int calls = 0;
  const auto hedged = policy().max_attempts(2).delay(1s);
  completion<int> done;
  spawn<int>(io, hedged([&calls]() -> asio::awaitable<int> {
               if (++calls == 1) throw boost::system::system_error(reset);
               co_return 7;
             }),
             done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST(calls == 2);
  BOOST_TEST(done.value.value_or(0) == 7);
  BOOST_TEST(now() == duration::zero(), "the hedge after a failure waited");
}

BOOST_AUTO_TEST_CASE(a_synchronous_answer_on_the_steady_clock) {
  // The path of the cost target: no timer armed, no hedge.
  const auto hedged = resilience::hedging_policy{}.max_attempts(3).delay(1h);
  completion<int> done;
  spawn<int>(io, hedged([]() -> asio::awaitable<int> { co_return 5; }), done);
  io.run();
  BOOST_TEST(done.value.value_or(0) == 5);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(hedging_bounds, hedging_fixture)

BOOST_AUTO_TEST_CASE(a_budget_that_refuses_stops_hedging_and_is_told_outcomes) {
  resilience::retry_token_budget budget{10, 0.5};
  for (int i = 0; i < 6; ++i) budget.record(true);  // 4 tokens left, at most 5 allows a retry
  plan = {{1s, ok}, {1s, ok}};
  const auto hedged = policy().max_attempts(2).delay(100ms).budget(budget);
  observed done;
  spawn_observed(*this, hedged(op()), done);
  clock.run(io);
  BOOST_TEST(started == attempts({1}), "a hedge started that the budget refused");
  BOOST_TEST(budget.refusals() == 1u);
  BOOST_TEST((done.value == ok));
  BOOST_TEST(budget.tokens() == 4.5, "the success was not reported to the budget");
}

BOOST_AUTO_TEST_CASE(a_budget_that_allows_lets_the_hedge_start) {
  resilience::retry_token_budget budget{10, 0.5};
  plan = {{1s, ok}, {10ms, ok}};
  const auto hedged = policy().max_attempts(2).delay(100ms).budget(budget);
  observed done;
  spawn_observed(*this, hedged(op()), done);
  clock.run(io);
  BOOST_TEST(started == attempts({1, 2}));
  BOOST_TEST(budget.refusals() == 0u);
}

BOOST_AUTO_TEST_CASE(pushback_delays_the_next_hedge) {
  plan = {{10ms, reset}, {10ms, ok}};
  const auto hedged = policy().max_attempts(3).delay(1s).delay_generator(
      [](const resilience::outcome<error_code>& o, const resilience::context&) {
        return o.value() == reset ? retry_delay::after(50ms) : retry_delay::backoff();
      });
  observed done;
  spawn_observed(*this, hedged(op()), done);
  clock.run(io);
  // Sooner than the hedge timer that was armed for 1 s: it is re-armed.
  BOOST_TEST((started_at == times({0ms, 60ms})));
  BOOST_TEST((done.value == ok));
  BOOST_TEST((done.at == 70ms));
  BOOST_TEST(clock.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(pushback_later_than_the_delay_postpones_the_hedge) {
  plan = {{10ms, reset}, {10ms, ok}};
  const auto hedged = policy().max_attempts(2).delay(100ms).delay_generator(
      [](const resilience::outcome<error_code>&, const resilience::context&) { return retry_delay::after(400ms); });
  observed done;
  spawn_observed(*this, hedged(op()), done);
  clock.run(io);
  BOOST_TEST((started_at == times({0ms, 410ms})));
  BOOST_TEST((done.at == 420ms));
}

BOOST_AUTO_TEST_CASE(pushback_stop_ends_hedging) {
  plan = {{10ms, reset}, {1s, ok}};
  const auto hedged = policy().max_attempts(3).delay(100ms).delay_generator(
      [](const resilience::outcome<error_code>&, const resilience::context&) { return retry_delay::stop(); });
  observed done;
  spawn_observed(*this, hedged(op()), done);
  clock.run(io);
  BOOST_TEST(started == attempts({1}));
  BOOST_TEST((done.value == reset));
  BOOST_TEST((done.at == 10ms));
  BOOST_TEST(clock.pending() == 0u);
}

// What on_hedge throws ends the call, once the running attempt has been
// cancelled and awaited: its frame is gone when the caller resumes.
BOOST_AUTO_TEST_CASE(an_on_hedge_that_throws_ends_the_call_after_the_running_attempt) {
  plan = {{1s, ok}, {1s, ok}};
  const auto hedged = policy().max_attempts(2).delay(100ms).on_hedge(
      [](const resilience::hedge_event&) { throw std::runtime_error("hook failed"); });
  std::exception_ptr thrown;
  int times = 0, ops_alive_then = -1;
  asio::co_spawn(io, hedged(op()), [&](std::exception_ptr e, error_code) {
    ++times;
    thrown = e;
    ops_alive_then = live::ops;
  });
  clock.run(io);
  BOOST_TEST(times == 1);
  BOOST_REQUIRE(thrown);
  BOOST_CHECK_EXCEPTION(std::rethrow_exception(thrown), std::runtime_error,
                        [](const auto& e) { return std::string(e.what()) == "hook failed"; });
  BOOST_TEST(started == attempts({1}), "the hedge started although its hook threw");
  BOOST_TEST(cancelled == attempts({1}));
  BOOST_TEST(ops_alive_then == 0, "the running attempt was not awaited");
  BOOST_TEST((now() == 100ms));
}

// on_settled runs as the call ends: what it throws is the call's outcome in
// place of the winner's.
BOOST_AUTO_TEST_CASE(an_on_settled_that_throws_becomes_the_outcome) {
  plan = {{1s, ok}, {10ms, ok}};
  const auto hedged = resilience::hedging_policy{}.clock(clock).max_attempts(2).delay(100ms).on_settled(
      [](const resilience::hedge_summary&) { throw std::runtime_error("hook failed"); });
  completion<error_code> done;
  spawn<error_code>(io, hedged(op()), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), std::runtime_error,
                        [](const auto& e) { return std::string(e.what()) == "hook failed"; });
  BOOST_TEST(answered == attempts({2}));
  BOOST_TEST(cancelled == attempts({1}));
  BOOST_TEST(live::ops == 0);
}

BOOST_AUTO_TEST_CASE(a_throwing_delay_generator_ends_the_call_after_the_others) {
  plan = {{1s, ok}, {10ms, reset}};
  const auto hedged = policy().max_attempts(3).delay(100ms).delay_generator(
      [](const resilience::outcome<error_code>&, const resilience::context&) -> retry_delay {
        throw std::runtime_error("pushback unreadable");
      });
  completion<error_code> done;
  spawn<error_code>(io, hedged(op()), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_CHECK_THROW(resilience::test::rethrow(done), std::runtime_error);
  BOOST_TEST(cancelled == attempts({1}));
  BOOST_TEST(settled.at(0).winner == 0u);
}

BOOST_AUTO_TEST_CASE(no_hedge_starts_past_the_deadline) {
  plan = {{1s, ok}, {1s, ok}, {1s, ok}};
  const auto hedged = policy().max_attempts(3).delay(100ms);
  resilience::context ctx;
  ctx.deadline = clock.now() + 150ms;
  observed done;
  spawn_observed(*this, hedged(op(), ctx), done);
  clock.run(io);
  BOOST_TEST((started_at == times({0ms, 100ms})));
  BOOST_TEST((done.value == ok), "without a deadline stage the call is not ended at the deadline");
  BOOST_TEST((done.at == 1s));
}

BOOST_AUTO_TEST_CASE(a_deadline_stage_outside_ends_the_call_at_the_deadline) {
  plan = {{1s, ok}, {1s, ok}, {1s, ok}};
  const auto call = resilience::pipeline(resilience::deadline_stage(150ms).clock(clock),
                                         policy().max_attempts(3).delay(100ms));
  observed done;
  spawn_observed(*this, call(op()), done);
  clock.run(io);
  BOOST_TEST((started_at == times({0ms, 100ms})));
  BOOST_TEST((done.value == resilience::error::deadline_exceeded));
  BOOST_TEST((done.at == 150ms));
  BOOST_TEST(cancelled == attempts({1, 2}));
  BOOST_TEST(done.ops_alive == 0);
}

BOOST_AUTO_TEST_CASE(a_deadline_kept_by_the_attempt_timeouts_inside) {
  // deadline, hedging, timeout: the deadline stage runs without a timer of
  // its own, each attempt's timeout clamped to it.
  plan = {{1s, ok}, {1s, ok}, {1s, ok}};
  const auto call = resilience::pipeline(resilience::deadline_stage(150ms).clock(clock),
                                         policy().max_attempts(3).delay(100ms),
                                         resilience::timeout(120ms).clock(clock));
  observed done;
  spawn_observed(*this, call(op()), done);
  clock.run(io);
  // 3 starts at once when 1 times out, at 120 ms: still before the deadline.
  BOOST_TEST((started_at == times({0ms, 100ms, 120ms})));
  BOOST_TEST((done.value == resilience::error::deadline_exceeded));
  BOOST_TEST((done.at == 150ms));
  BOOST_TEST(done.ops_alive == 0);
}

BOOST_AUTO_TEST_CASE(a_call_started_past_its_deadline_runs_nothing) {
  plan = {{1s, ok}};
  resilience::context ctx;
  ctx.deadline = clock.now();
  observed done;
  spawn_observed(*this, policy()(op(), ctx), done);
  clock.run(io);
  BOOST_TEST(started.empty());
  BOOST_TEST((done.value == resilience::error::deadline_exceeded));
}

BOOST_AUTO_TEST_CASE(attempt_timeouts_inside_are_non_fatal_failures) {
  plan = {{1s, ok}, {1s, ok}, {20ms, ok}};
  const auto call =
      resilience::pipeline(policy().max_attempts(3).delay(1s), resilience::timeout(50ms).clock(clock));
  observed done;
  spawn_observed(*this, call(op()), done);
  clock.run(io);
  BOOST_TEST((started_at == times({0ms, 50ms, 100ms})));
  BOOST_TEST((done.value == ok));
  BOOST_TEST((done.at == 120ms));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(hedging_cancellation, hedging_fixture)

BOOST_AUTO_TEST_CASE(while_waiting_for_the_delay) {
  plan = {{1s, ok}, {1s, ok}};
  const auto hedged = policy().max_attempts(2).delay(100ms);
  asio::cancellation_signal cancel;
  observed done;
  spawn_observed(*this, hedged(op()), done, &cancel);
  clock.run_for(io, 50ms);
  cancel.emit(asio::cancellation_type::terminal);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == aborted));
  BOOST_TEST((done.at == 50ms));
  BOOST_TEST(started == attempts({1}), "a hedge started after the cancellation");
  BOOST_TEST(cancelled == attempts({1}));
  BOOST_TEST(done.ops_alive == 0);
  BOOST_TEST(clock.pending() == 0u);
  BOOST_TEST(settled.at(0).winner == 0u);
}

BOOST_AUTO_TEST_CASE(while_waiting_for_attempts) {
  plan = {{1s, ok}, {1s, ok}, {1s, ok}};
  const auto hedged = policy().max_attempts(3).delay(100ms);
  asio::cancellation_signal cancel;
  observed done;
  spawn_observed(*this, hedged(op()), done, &cancel);
  clock.run_for(io, 250ms);
  BOOST_REQUIRE(started.size() == 3u);
  cancel.emit(asio::cancellation_type::terminal);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == aborted));
  BOOST_TEST((done.at == 250ms));
  BOOST_TEST(cancelled == attempts({1, 2, 3}));
  BOOST_TEST(done.ops_alive == 0);
}

BOOST_AUTO_TEST_CASE(while_waiting_for_a_pushback_with_no_attempt_running) {
  plan = {{10ms, reset}, {10ms, ok}};
  const auto hedged = policy().max_attempts(2).delay(100ms).delay_generator(
      [](const resilience::outcome<error_code>&, const resilience::context&) { return retry_delay::after(1s); });
  asio::cancellation_signal cancel;
  observed done;
  spawn_observed(*this, hedged(op()), done, &cancel);
  clock.run_for(io, 200ms);
  BOOST_REQUIRE(!done.times);
  cancel.emit(asio::cancellation_type::terminal);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == aborted));
  BOOST_TEST((done.at == 200ms));
  BOOST_TEST(started == attempts({1}));
  BOOST_TEST(clock.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(while_awaiting_a_loser_that_ignores_it) {
  plan = {{1s, ok, true}, {10ms, ok}};
  const auto hedged = policy().max_attempts(2).delay(100ms);
  asio::cancellation_signal cancel;
  observed done;
  spawn_observed(*this, hedged(op()), done, &cancel);
  clock.run_for(io, 500ms);
  BOOST_REQUIRE(!done.times);
  cancel.emit(asio::cancellation_type::terminal);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == aborted), "a cancelled call must end with operation_aborted");
  BOOST_TEST((done.at == 1s));
}

BOOST_AUTO_TEST_CASE(before_the_call_starts) {
  plan = {{1s, ok}};
  asio::cancellation_signal cancel;
  observed done;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<error_code> {
        co_await asio::this_coro::throw_if_cancelled(false);
        cancel.emit(asio::cancellation_type::terminal);
        co_return co_await policy()(op());
      },
      asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr, error_code ec) {
        ++done.times;
        done.value = ec;
      }));
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == aborted));
  BOOST_TEST(started.empty());
}

BOOST_AUTO_TEST_CASE(from_an_on_hedge_hook) {
  plan = {{1s, ok}, {1s, ok}};
  asio::cancellation_signal cancel;
  const auto hedged = policy().max_attempts(2).delay(100ms).on_hedge(
      [&](const resilience::hedge_event&) { cancel.emit(asio::cancellation_type::terminal); });
  observed done;
  spawn_observed(*this, hedged(op()), done, &cancel);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == aborted));
  BOOST_TEST(started == attempts({1}));
  BOOST_TEST((done.at == 100ms));
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// Starts one hedged call, runs until it is in the state under test, then
// destroys the io_context: every frame and handler must be gone, the
// handler never called.
template <class Call>
void destroy_mid_call(Call start_call, const manual_clock* clock, duration run_for, int expect_running) {
  int completed = 0;
  {
    asio::io_context io;
    start_call(io, [&completed, guard = live(live::handlers)](std::exception_ptr, auto&&...) { ++completed; });
    if (clock) {
      clock->run_for(io, run_for);
    } else {
      while (io.poll() != 0) {
      }
    }
    BOOST_TEST(live::ops == expect_running);
  }
  BOOST_TEST(completed == 0);
  BOOST_TEST(live::ops == 0, "attempt frames left after the context was destroyed");
  BOOST_TEST(live::handlers == 0, "completion handlers left after the context was destroyed");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hedging_context_destroyed_mid_call)

BOOST_AUTO_TEST_CASE(waiting_for_the_delay_on_the_steady_clock) {
  const auto hedged = resilience::hedging_policy{}.max_attempts(3).delay(1h);
  int started = 0;
  destroy_mid_call(
      [&](asio::io_context& io, auto handler) {
        asio::co_spawn(io, hedged([&started] { return resilience::test::sleep_an_hour(&started); }),
                       std::move(handler));
      },
      nullptr, {}, 1);
  BOOST_TEST(started == 1);
}

BOOST_AUTO_TEST_CASE(with_hedges_and_a_timer_on_the_manual_clock) {
  manual_clock clock;
  const auto hedged = resilience::hedging_policy{}.max_attempts(3).delay(10ms).clock(clock);
  int started = 0;
  destroy_mid_call(
      [&](asio::io_context& io, auto handler) {
        asio::co_spawn(io, hedged([&started] { return resilience::test::sleep_an_hour(&started); }),
                       std::move(handler));
      },
      &clock, 15ms, 2);
  BOOST_TEST(started == 2);
}

BOOST_AUTO_TEST_CASE(waiting_for_a_pushback_with_no_attempt_running) {
  manual_clock clock;
  const auto hedged = resilience::hedging_policy{}.max_attempts(3).delay(10ms).clock(clock).delay_generator(
      [](const resilience::outcome<error_code>&, const resilience::context&) { return retry_delay::after(1h); });
  destroy_mid_call(
      [&](asio::io_context& io, auto handler) {
        asio::co_spawn(io, hedged([]() -> asio::awaitable<error_code> { co_return reset; }), std::move(handler));
      },
      &clock, 1s, 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(hedging_properties, hedging_fixture)

BOOST_AUTO_TEST_CASE(each_attempt_marks_its_own_copy_and_the_winner_s_is_kept) {
  plan = {{1s, ok}, {10ms, ok}};
  resilience::properties props;
  props.set(mark, 1);
  props.set(note, std::string("caller"));
  const auto hedged = policy().max_attempts(2).delay(100ms);
  observed done;
  spawn_observed(*this, hedged(op(), resilience::context{}.with(props)), done);
  clock.run(io);
  BOOST_TEST((done.value == ok));
  BOOST_TEST(marks_seen == std::vector<int>({1, 1}), "a hedge saw what another attempt marked");
  BOOST_TEST(props.value_or(mark, 0) == 20, "the caller does not see the winner's marks");
  BOOST_TEST(props.value_or(note, std::string()) == "attempt 2");
}

BOOST_AUTO_TEST_CASE(on_cancellation_the_caller_s_properties_are_left_as_they_were) {
  plan = {{1s, ok}, {1s, ok}};
  resilience::properties props;
  props.set(mark, 1);
  asio::cancellation_signal cancel;
  observed done;
  spawn_observed(*this, policy().max_attempts(2).delay(100ms)(op(), resilience::context{}.with(props)), done,
                 &cancel);
  clock.run_for(io, 200ms);
  cancel.emit(asio::cancellation_type::terminal);
  clock.run(io);
  BOOST_TEST((done.value == aborted));
  BOOST_TEST(props.value_or(mark, 0) == 1);
}

BOOST_AUTO_TEST_CASE(copies_and_swaps) {
  resilience::properties a;
  a.set(mark, 3);
  a.set(note, std::string("long enough to live on the heap, not inline"));
  resilience::properties b;
  b.copy_from(a);
  b.set(note, std::string("changed"));
  BOOST_TEST(a.value_or(note, std::string()) == "long enough to live on the heap, not inline");
  BOOST_TEST(b.value_or(mark, 0) == 3);
  a.swap(b);
  BOOST_TEST(a.value_or(note, std::string()) == "changed");
  BOOST_TEST(b.size() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(hedging_options)

BOOST_AUTO_TEST_CASE(bad_values_are_refused_naming_the_field) {
  const resilience::hedging_policy p;
  BOOST_CHECK_EXCEPTION(p.max_attempts(0), std::invalid_argument, names("max_attempts"));
  BOOST_CHECK_EXCEPTION(p.max_attempts(resilience::max_hedged_attempts + 1), std::invalid_argument,
                        names("max_attempts"));
  BOOST_CHECK_EXCEPTION(p.delay(-1ms), std::invalid_argument, names("delay"));
  BOOST_TEST(p.max_attempts(resilience::max_hedged_attempts).max_attempts() == resilience::max_hedged_attempts);
  BOOST_TEST((p.delay(0ms).delay() == 0ms));
  BOOST_TEST(p.max_attempts() == 2u);
  BOOST_TEST((p.delay() == 100ms));
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// A hedged call on its own strand of a thread pool: every attempt answers
// after one turn of the executor, so which one wins varies; only what holds
// whatever the order is checked.
// (live::ops is not atomic: the pool's threads count in their own.)
std::atomic<int> alive_attempts{0};

asio::awaitable<error_code> strand_call(const resilience::hedging_policy& hedged, std::atomic<int>& attempts) {
  co_return co_await hedged([&attempts]() -> asio::awaitable<error_code> {
    struct frame_counter {
      frame_counter() { alive_attempts.fetch_add(1); }
      ~frame_counter() { alive_attempts.fetch_sub(1); }
    } frame;
    attempts.fetch_add(1, std::memory_order_relaxed);
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
    co_return error_code{};
  });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hedging_threads)

BOOST_AUTO_TEST_CASE(calls_on_strands_of_a_thread_pool_complete_once_and_leave_nothing) {
  const auto hedged = resilience::hedging_policy{}.max_attempts(3).delay(0ms);
  constexpr int calls = 300;
  std::atomic<int> attempts{0};
  std::atomic<int> completed{0};
  std::atomic<int> failed{0};
  {
    asio::thread_pool pool(2);
    for (int i = 0; i < calls; ++i) {
      asio::co_spawn(asio::make_strand(pool), strand_call(hedged, attempts),
                     [&](std::exception_ptr e, error_code ec) {
                       if (e || ec) failed.fetch_add(1);
                       completed.fetch_add(1);
                     });
    }
    pool.join();
  }
  BOOST_TEST(completed.load() == calls);
  BOOST_TEST(failed.load() == 0);
  BOOST_TEST(attempts.load() == 3 * calls, "delay 0 starts every attempt at once");
  BOOST_TEST(alive_attempts.load() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
