// Chaos stages: each fault kind, when a call gets it (rate, predicate,
// switch, seeded draws), latency on virtual time (cancelled, cut by the
// deadline, its context destroyed), chaos under a retry, options, and the
// switch flipped from another thread while calls run.
#include "support.hpp"

#include <resilience/chaos.hpp>
#include <resilience/deadline.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/system/result.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::chaos_fault;
using resilience::chaos_injection;
using resilience::chaos_options;
using resilience::chaos_switch;
using resilience::context;
using resilience::random_source;
using resilience::time_point;
using resilience::testing::manual_clock;
using resilience::test::cancel_then_call;
using resilience::test::completion;
using resilience::test::live;
using resilience::test::names;
using resilience::test::spawn;

namespace {

using result = boost::system::result<int>;
using resilience::test::reset;
using resilience::test::aborted;

struct chaos_fixture {
  asio::io_context io;
  manual_clock clock;
  int calls = 0;
  std::vector<time_point> called_at;
  std::vector<chaos_injection> injected;

  chaos_options options() {
    return chaos_options{}.on_injected([this](const chaos_injection& i) { injected.push_back(i); });
  }

  // Answers 1 at once, noting when it was called.
  auto op() {
    return [this]() -> asio::awaitable<result> {
      ++calls;
      called_at.push_back(clock.now());
      co_return 1;
    };
  }

  // Which of `n` sequential calls through `stage` got the fault.
  template <class Stage>
  std::vector<bool> pattern(const Stage& stage, int n) {
    std::vector<bool> hit;
    for (int i = 0; i < n; ++i) {
      completion<result> done;
      const int before = calls;
      spawn(io, stage(op()), done);
      clock.run(io);
      BOOST_REQUIRE(done.times == 1);
      hit.push_back(calls == before);
    }
    return hit;
  }

  void poll() {
    while (io.poll() != 0) {
    }
    io.restart();
  }
};

// Sleeps an hour on the manual clock, counting its frame.
asio::awaitable<result> sleep_on(manual_clock clock) {
  live frame(live::ops);
  auto timer = clock.make_timer(co_await asio::this_coro::executor);
  timer.expires_after(1h);
  auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  if (ec) co_return ec;
  co_return 1;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(chaos_faults, chaos_fixture)

BOOST_AUTO_TEST_CASE(an_error_goes_in_the_channel_or_is_thrown_without_calling_the_op) {
  const auto stage = resilience::chaos_error(reset, options());
  completion<result> in_channel;
  completion<int> thrown;
  spawn(io, stage(op()), in_channel);
  spawn(io, stage([&]() -> asio::awaitable<int> {
          ++calls;
          co_return 1;
        }),
        thrown);
  clock.run(io);
  BOOST_TEST((in_channel.value->error() == reset));
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(thrown), boost::system::system_error,
                        [](const auto& e) { return e.code() == reset; });
  BOOST_TEST(calls == 0);
  BOOST_REQUIRE(injected.size() == 2u);
  BOOST_TEST((injected[0].fault == chaos_fault::error));
  BOOST_TEST((injected[0].error == reset));
}

BOOST_AUTO_TEST_CASE(a_stage_named_by_an_lvalue_is_copied_into_the_call) {
  completion<result> done;
  spawn(io, resilience::test::call_through_local(resilience::chaos_error(reset, options()), op()), done);
  clock.run(io);
  BOOST_TEST((done.value->error() == reset));
  BOOST_TEST(calls == 0);
  BOOST_TEST(injected.size() == 1u, "the copy kept the hook");
}

BOOST_AUTO_TEST_CASE(an_outcome_is_returned_without_calling_the_op) {
  const auto stage = resilience::chaos_outcome(result(503), options());
  completion<result> done;
  spawn(io, stage(op()), done);
  int ran = 0;
  const auto skip = resilience::chaos_outcome(options());
  completion<void> void_done;
  spawn(io, skip([&]() -> asio::awaitable<void> {
          ++ran;
          co_return;
        }),
        void_done);
  clock.run(io);
  BOOST_TEST(**done.value == 503);
  BOOST_TEST(calls == 0);
  BOOST_TEST(void_done.times == 1);
  BOOST_TEST(!void_done.exception);
  BOOST_TEST(ran == 0);
  BOOST_REQUIRE(injected.size() == 2u);
  BOOST_TEST((injected[0].fault == chaos_fault::outcome));
}

BOOST_AUTO_TEST_CASE(an_exception_is_thrown_without_calling_the_op) {
  const auto stage = resilience::chaos_exception(std::runtime_error("injected"), options());
  const auto as_ptr = resilience::chaos_exception(std::make_exception_ptr(std::logic_error("ptr")), options());
  std::vector<completion<result>> done(2);
  spawn(io, stage(op()), done[0]);
  spawn(io, as_ptr(op()), done[1]);
  clock.run(io);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done[0]), std::runtime_error,
                        [](const auto& e) { return std::string(e.what()) == "injected"; });
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done[1]), std::logic_error,
                        [](const auto& e) { return std::string(e.what()) == "ptr"; });
  BOOST_TEST(calls == 0);
  BOOST_REQUIRE(injected.size() == 2u);
  BOOST_TEST((injected[0].fault == chaos_fault::exception));
  BOOST_CHECK_THROW(std::rethrow_exception(injected[0].exception), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(latency_delays_the_op_on_virtual_time) {
  const auto stage = resilience::chaos_latency(300ms, options()).clock(clock);
  completion<result> done;
  spawn(io, stage(op()), done);
  poll();
  BOOST_TEST(calls == 0, "the op ran before the latency");
  clock.advance(299ms);
  poll();
  BOOST_TEST(calls == 0);
  clock.advance(1ms);
  poll();
  BOOST_TEST(calls == 1);
  BOOST_TEST(**done.value == 1);
  BOOST_TEST((called_at == std::vector<time_point>{time_point{} + 300ms}));
  BOOST_REQUIRE(injected.size() == 1u);
  BOOST_TEST((injected[0].fault == chaos_fault::latency));
  BOOST_TEST((injected[0].latency == 300ms));
}

BOOST_AUTO_TEST_CASE(latency_takes_the_pipelines_clock) {
  const auto call = resilience::pipeline(resilience::chaos_latency(2s), resilience::timeout(5s)).clock(clock);
  completion<result> done;
  spawn(io, call(op()), done);
  clock.run(io);
  BOOST_TEST(**done.value == 1);
  BOOST_TEST((called_at == std::vector<time_point>{time_point{} + 2s}));
}

BOOST_AUTO_TEST_CASE(latency_inside_a_timeout_ends_as_that_timeout) {
  // The latency wait is cut at the deadline the timeout put in the context,
  // at the instant the timeout's own timer falls due: the call ran out of
  // the timeout's time, and says so (not deadline_exceeded, which would
  // blame a deadline nobody set).
  std::vector<resilience::expiry_event> expired;
  const auto call = resilience::pipeline(
                        resilience::timeout(100ms).on_timeout([&](const resilience::expiry_event& e) { expired.push_back(e); }),
                        resilience::chaos_latency(300ms))
                        .clock(clock);
  completion<result> done;
  spawn(io, call(op()), done);
  clock.run(io);
  BOOST_REQUIRE(done.times == 1);
  BOOST_TEST((done.value->error() == resilience::error::timeout));
  BOOST_TEST((clock.now() == time_point{} + 100ms));
  BOOST_TEST(calls == 0);
  BOOST_REQUIRE_EQUAL(expired.size(), 1u);
  BOOST_TEST((expired[0].reason == resilience::error::timeout));
  BOOST_TEST((expired[0].at == time_point{} + 100ms));
}

BOOST_AUTO_TEST_CASE(latency_inside_timed_retried_attempts_times_out_each_attempt) {
  int timeouts = 0;
  const auto call =
      resilience::pipeline(resilience::retry_policy{}.max_attempts(2).backoff(resilience::backoff::constant(10ms).with_jitter(resilience::jitter::none)),
                           resilience::timeout(100ms).on_timeout([&](const resilience::expiry_event&) { ++timeouts; }),
                           resilience::chaos_latency(300ms))
          .clock(clock);
  completion<result> done;
  spawn(io, call(op()), done);
  clock.run(io);
  BOOST_TEST((done.value->error() == resilience::error::timeout));
  BOOST_TEST((clock.now() == time_point{} + 210ms));
  BOOST_TEST(timeouts == 2);
}

BOOST_AUTO_TEST_CASE(the_callers_deadline_cutting_latency_stays_deadline_exceeded) {
  int timeouts = 0;
  const auto call = resilience::pipeline(
                        resilience::timeout(1s).on_timeout([&](const resilience::expiry_event&) { ++timeouts; }),
                        resilience::chaos_latency(300ms))
                        .clock(clock);
  context parent;
  parent.deadline = time_point{} + 100ms;  // tighter than the timeout: the caller's bound, not the timeout's
  completion<result> done;
  spawn(io, call(op(), parent), done);
  clock.run(io);
  BOOST_TEST((done.value->error() == resilience::error::deadline_exceeded));
  BOOST_TEST((clock.now() == time_point{} + 100ms));
  BOOST_TEST(timeouts == 1, "the bound that passed is reported, with its reason");
}

BOOST_AUTO_TEST_CASE(a_hook_that_throws_becomes_the_outcome) {
  const auto stage = resilience::chaos_error(
      reset, chaos_options{}.on_injected([](const chaos_injection&) { throw std::runtime_error("hook"); }));
  completion<result> done;
  spawn(io, stage(op()), done);
  clock.run(io);
  BOOST_CHECK_THROW(resilience::test::rethrow(done), std::runtime_error);
  BOOST_TEST(calls == 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(chaos_when, chaos_fixture)

BOOST_AUTO_TEST_CASE(rate_zero_never_injects_and_rate_one_always_does) {
  const auto never = resilience::chaos_error(reset, options().rate(0.0).random(random_source::seeded(1)));
  const auto always = resilience::chaos_error(reset, options().rate(1.0).random(random_source::seeded(1)));
  BOOST_TEST(pattern(never, 50) == std::vector<bool>(50, false));
  BOOST_TEST(injected.empty());
  BOOST_TEST(pattern(always, 50) == std::vector<bool>(50, true));
  BOOST_TEST(injected.size() == 50u);
}

BOOST_AUTO_TEST_CASE(the_same_seed_gives_the_same_sequence) {
  const auto a = resilience::chaos_error(reset, chaos_options{}.rate(0.3).random(random_source::seeded(42)));
  const auto b = resilience::chaos_error(reset, chaos_options{}.rate(0.3).random(random_source::seeded(42)));
  const auto c = resilience::chaos_error(reset, chaos_options{}.rate(0.3).random(random_source::seeded(43)));
  const auto first = pattern(a, 400);
  BOOST_TEST(first == pattern(b, 400));
  BOOST_TEST(first != pattern(c, 400), "another seed gave the same sequence");
  // The same draws, read back from the source: a hit is a draw under the rate.
  const auto source = random_source::seeded(42);
  int hits = 0;
  for (int i = 0; i < 400; ++i) {
    const bool expected = source.next_unit() < 0.3;
    BOOST_TEST(first[i] == expected, "call " << i);
    hits += expected ? 1 : 0;
  }
  BOOST_TEST(hits > 0);
  BOOST_TEST(hits < 400);
}

BOOST_AUTO_TEST_CASE(the_predicate_chooses_the_calls) {
  const auto stage = resilience::chaos_error(reset, options().inject_if([](const context& ctx) {
    return ctx.attempt % 2 == 0;
  }));
  for (std::uint32_t attempt = 1; attempt <= 4; ++attempt) {
    context ctx;
    ctx.attempt = attempt;
    completion<result> done;
    spawn(io, stage(op(), ctx), done);
    clock.run(io);
    BOOST_TEST((done.value->error() == (attempt % 2 == 0 ? reset : error_code{})), "attempt " << attempt);
  }
  BOOST_TEST(calls == 2);
  BOOST_REQUIRE(injected.size() == 2u);
  BOOST_TEST(injected[0].attempt == 2u);
  BOOST_TEST(injected[1].attempt == 4u);
}

BOOST_AUTO_TEST_CASE(the_predicate_is_asked_before_the_draw) {
  // A draw is taken only for calls the predicate let through, so the seeded
  // sequence lines up with those calls alone.
  int asked = 0;
  const auto stage = resilience::chaos_error(reset, chaos_options{}
                                                        .rate(0.5)
                                                        .random(random_source::seeded(9))
                                                        .inject_if([&](const context& ctx) {
                                                          ++asked;
                                                          return ctx.attempt == 1;
                                                        }));
  const auto source = random_source::seeded(9);
  for (int i = 0; i < 40; ++i) {
    context ctx;
    ctx.attempt = i % 2 == 0 ? 1 : 2;
    completion<result> done;
    spawn(io, stage(op(), ctx), done);
    clock.run(io);
    const bool expected = ctx.attempt == 1 && source.next_unit() < 0.5;
    BOOST_TEST((done.value->error() == reset) == expected, "call " << i);
  }
  BOOST_TEST(asked == 40);
}

BOOST_AUTO_TEST_CASE(the_switch_turns_it_off_and_on_at_run_time) {
  chaos_switch on{false};
  int asked = 0;
  const auto stage = resilience::chaos_error(reset, options().enabled_by(on).inject_if([&](const context&) {
    ++asked;
    return true;
  }));
  BOOST_TEST(pattern(stage, 3) == std::vector<bool>(3, false));
  BOOST_TEST(asked == 0, "a disabled stage asked its predicate");
  on.enable();
  BOOST_TEST(on.enabled());
  BOOST_TEST(pattern(stage, 3) == std::vector<bool>(3, true));
  on.disable();
  BOOST_TEST(pattern(stage, 2) == std::vector<bool>(2, false));
  on.set(true);
  BOOST_TEST(pattern(stage, 1) == std::vector<bool>(1, true));
  BOOST_TEST(asked == 4);
  BOOST_TEST(injected.size() == 4u);
}

BOOST_AUTO_TEST_CASE(a_disabled_stage_takes_no_draw) {
  chaos_switch on{false};
  const auto seeded = random_source::seeded(5);
  const auto stage = resilience::chaos_error(reset, chaos_options{}.rate(0.5).random(seeded).enabled_by(on));
  pattern(stage, 10);
  on.enable();
  const auto hits = pattern(stage, 20);
  const auto reference = random_source::seeded(5);
  for (int i = 0; i < 20; ++i) BOOST_TEST(hits[i] == (reference.next_unit() < 0.5), "call " << i);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(chaos_latency_bounds, chaos_fixture)

BOOST_AUTO_TEST_CASE(cancelled_mid_wait_ends_with_operation_aborted_and_no_op) {
  const auto stage = resilience::chaos_latency(1h, options()).clock(clock);
  completion<result> done;
  completion<int> plain;
  asio::cancellation_signal signal;
  asio::cancellation_signal plain_signal;
  spawn(io, stage(op()), done, &signal);
  spawn(io, stage([&]() -> asio::awaitable<int> {
          ++calls;
          co_return 1;
        }),
        plain, &plain_signal);
  clock.run_for(io, 10min);
  BOOST_REQUIRE(!done.done());
  signal.emit(asio::cancellation_type::terminal);
  plain_signal.emit(asio::cancellation_type::terminal);
  poll();
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value->error() == aborted));
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(plain), boost::system::system_error,
                        [](const auto& e) { return e.code() == aborted; });
  BOOST_TEST(calls == 0);
  BOOST_TEST(clock.pending() == 0u, "the latency timer is still armed");
  BOOST_TEST((clock.now() == time_point{} + 10min));
}

BOOST_AUTO_TEST_CASE(cancelled_in_the_op_after_the_wait) {
  const auto stage = resilience::chaos_latency(1s, options()).clock(clock);
  completion<result> done;
  asio::cancellation_signal signal;
  spawn(io, stage([&] { return sleep_on(clock); }), done, &signal);
  clock.run_for(io, 2s);
  BOOST_REQUIRE(live::ops == 1);
  signal.emit(asio::cancellation_type::terminal);
  clock.run(io);
  BOOST_TEST((done.value->error() == aborted));
  BOOST_TEST(live::ops == 0);
}

BOOST_AUTO_TEST_CASE(a_call_spared_is_the_ops_own_cancelled_inside_it) {
  chaos_switch on{false};
  const auto stage = resilience::chaos_error(reset, options().enabled_by(on));
  completion<result> done;
  asio::cancellation_signal signal;
  spawn(io, stage([&] { return sleep_on(clock); }), done, &signal);
  clock.run_for(io, 1s);
  BOOST_REQUIRE(live::ops == 1);
  signal.emit(asio::cancellation_type::terminal);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value->error() == aborted));
  BOOST_TEST(live::ops == 0);
  BOOST_TEST(injected.empty());
}

BOOST_AUTO_TEST_CASE(a_call_cancelled_before_it_starts_does_not_wait) {
  const auto stage = resilience::chaos_latency(1h, options()).clock(clock);
  completion<result> done;
  asio::cancellation_signal signal;
  spawn(io, cancel_then_call(stage, signal, op()), done, &signal);
  poll();
  BOOST_TEST((done.value->error() == aborted));
  BOOST_TEST(calls == 0);
  BOOST_TEST(clock.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(the_deadline_cuts_the_wait) {
  const auto stage = resilience::chaos_latency(1s, options()).clock(clock);
  context ctx;
  ctx.deadline = time_point{} + 250ms;
  completion<result> done;
  spawn(io, stage(op(), ctx), done);
  clock.run(io);
  BOOST_TEST((done.value->error() == resilience::error::deadline_exceeded));
  BOOST_TEST(calls == 0);
  BOOST_TEST((clock.now() == time_point{} + 250ms), "the wait went past the deadline");

  context past;
  past.deadline = clock.now();
  completion<result> late;
  spawn(io, stage(op(), past), late);
  clock.run(io);
  BOOST_TEST((late.value->error() == resilience::error::deadline_exceeded));
  BOOST_TEST((clock.now() == time_point{} + 250ms), "waited though the deadline had passed");
}

BOOST_AUTO_TEST_CASE(a_timerless_deadline_stage_relies_on_the_cut) {
  // deadline(100ms) around latency and a timeout keeps its bound without a
  // timer of its own: the latency stage must end the call at the deadline.
  const auto call = resilience::pipeline(resilience::deadline_stage(100ms), resilience::chaos_latency(1s, options()),
                                         resilience::timeout(50ms))
                        .clock(clock);
  completion<result> done;
  spawn(io, call(op()), done);
  clock.run(io);
  BOOST_TEST((done.value->error() == resilience::error::deadline_exceeded));
  BOOST_TEST(calls == 0);
  BOOST_TEST((clock.now() == time_point{} + 100ms));
}

BOOST_AUTO_TEST_CASE(a_context_destroyed_mid_wait_frees_every_frame) {
  int completed = 0;
  manual_clock local;
  const auto stage = resilience::chaos_latency(1h).clock(local);
  {
    asio::io_context ctx;
    // One call in the latency wait, one in its op after the wait.
    const auto short_wait = resilience::chaos_latency(1ms).clock(local);
    asio::co_spawn(ctx, stage([&local] { return sleep_on(local); }),
                   [&completed, guard = live(live::handlers)](std::exception_ptr, auto&&...) { ++completed; });
    asio::co_spawn(ctx, short_wait([&local] { return sleep_on(local); }),
                   [&completed, guard = live(live::handlers)](std::exception_ptr, auto&&...) { ++completed; });
    local.run_for(ctx, 1s);
    BOOST_REQUIRE(live::ops == 1);
    BOOST_REQUIRE(live::handlers == 2);
  }
  BOOST_TEST(completed == 0);
  BOOST_TEST(live::ops == 0, "frames left after the context was destroyed");
  BOOST_TEST(live::handlers == 0);
  BOOST_TEST(local.pending() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(chaos_in_pipelines, chaos_fixture)

BOOST_AUTO_TEST_CASE(injected_transient_errors_are_retried) {
  const auto retry = resilience::retry_policy{}
                         .max_attempts(5)
                         .backoff(resilience::backoff::constant(10ms))
                         .jitter(resilience::jitter::none);
  // The first two attempts get the fault, the third reaches the op.
  const auto call = resilience::pipeline(
                        retry, resilience::chaos_error(reset, options().inject_if([](const context& ctx) {
                          return ctx.attempt <= 2;
                        })))
                        .clock(clock);
  completion<result> done;
  spawn(io, call(op()), done);
  clock.run(io);
  BOOST_TEST(**done.value == 1);
  BOOST_TEST(calls == 1);
  BOOST_TEST(injected.size() == 2u);
  BOOST_TEST((called_at == std::vector<time_point>{time_point{} + 20ms}));
}

BOOST_AUTO_TEST_CASE(seeded_faults_under_a_retry_are_reproducible) {
  const auto run_once = [&](std::uint64_t seed) {
    calls = 0;
    injected.clear();
    const auto call = resilience::pipeline(resilience::retry_policy{}
                                               .max_attempts(10)
                                               .backoff(resilience::backoff::constant(1ms))
                                               .jitter(resilience::jitter::none),
                                           resilience::chaos_error(reset, options().rate(0.6).random(
                                                                              random_source::seeded(seed))))
                          .clock(clock);
    std::vector<std::size_t> faults_per_call;
    for (int i = 0; i < 30; ++i) {
      const std::size_t before = injected.size();
      completion<result> done;
      spawn(io, call(op()), done);
      clock.run(io);
      BOOST_REQUIRE(done.times == 1);
      faults_per_call.push_back(injected.size() - before);
    }
    return faults_per_call;
  };
  const auto first = run_once(11);
  BOOST_TEST(first == run_once(11));
  std::size_t total = 0;
  for (auto n : first) total += n;
  BOOST_TEST(total > 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(chaos_options_validation)

BOOST_AUTO_TEST_CASE(bad_values_throw_naming_the_field) {
  BOOST_CHECK_EXCEPTION(chaos_options{}.rate(-0.01), std::invalid_argument, names("rate"));
  BOOST_CHECK_EXCEPTION(chaos_options{}.rate(1.01), std::invalid_argument, names("rate"));
  BOOST_CHECK_EXCEPTION(chaos_options{}.rate(std::nan("")), std::invalid_argument, names("rate"));
  BOOST_CHECK_EXCEPTION(chaos_options{}.rate(std::numeric_limits<double>::infinity()), std::invalid_argument,
                        names("rate"));
  BOOST_CHECK_EXCEPTION(chaos_options{}.inject_if({}), std::invalid_argument, names("inject_if"));
  BOOST_CHECK_EXCEPTION(resilience::chaos_error(error_code{}), std::invalid_argument, names("chaos_error"));
  BOOST_CHECK_EXCEPTION(resilience::chaos_latency(0ms), std::invalid_argument, names("chaos_latency"));
  BOOST_CHECK_EXCEPTION(resilience::chaos_latency(-1ms), std::invalid_argument, names("chaos_latency"));
  BOOST_CHECK_EXCEPTION(resilience::chaos_exception(std::exception_ptr{}), std::invalid_argument,
                        names("chaos_exception"));
}

BOOST_AUTO_TEST_CASE(defaults_and_good_values) {
  const chaos_options d;
  BOOST_TEST(d.rate() == 1.0);
  BOOST_TEST(!d.predicate());
  BOOST_TEST(!d.random().is_seeded());
  BOOST_TEST(d.switch_ref() == nullptr);
  const auto o = d.rate(0.0).rate(1.0).rate(0.25);
  BOOST_TEST(o.rate() == 0.25);
  BOOST_TEST(d.rate() == 1.0, "a setter changed the value it was called on");
  BOOST_TEST(resilience::chaos_latency(1ns).fault().latency == 1ns);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(chaos_concurrency)

// Calls on strands of a thread pool through one stage with a shared seeded
// source, the switch flipped from a plain thread meanwhile. Only invariants:
// every call completes once, as a fault or as the op's answer.
BOOST_AUTO_TEST_CASE(the_switch_flipped_while_calls_run) {
  constexpr int calls = 2000;
  chaos_switch on{true};
  std::atomic<int> injections{0};
  std::atomic<int> op_calls{0};
  std::atomic<int> completions{0};
  std::atomic<int> faults_seen{0};
  const auto stage = resilience::chaos_error(
      reset, chaos_options{}.rate(0.5).random(random_source::seeded(3)).enabled_by(on).on_injected(
                 [&](const chaos_injection&) { injections.fetch_add(1); }));
  asio::thread_pool pool(2);
  std::thread flipper([&] {
    for (int k = 0; k < 2000; ++k) on.set(k % 2 == 0);
  });
  for (int i = 0; i < calls; ++i) {
    asio::co_spawn(asio::make_strand(pool),
                   stage([&]() -> asio::awaitable<result> {
                     op_calls.fetch_add(1);
                     co_return 1;
                   }),
                   [&](std::exception_ptr e, result r) {
                     if (!e && r.has_error()) faults_seen.fetch_add(1);
                     completions.fetch_add(1);
                   });
  }
  flipper.join();
  pool.join();
  BOOST_TEST(completions.load() == calls);
  BOOST_TEST(injections.load() == faults_seen.load());
  BOOST_TEST(injections.load() + op_calls.load() == calls);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(chaos_cancelled_from_inside, chaos_fixture)

// The call ends without suspending: Asio must not throw out of run().
BOOST_AUTO_TEST_CASE(a_hook_that_cancels_the_caller_ends_the_call_as_aborted) {
  asio::cancellation_signal signal;
  const auto stage = resilience::chaos_error(reset, chaos_options{}.on_injected([&](const chaos_injection&) {
    signal.emit(asio::cancellation_type::terminal);
  }));
  const auto slow = resilience::chaos_latency(1s, chaos_options{}.on_injected([&](const chaos_injection&) {
                                                 signal.emit(asio::cancellation_type::terminal);
                                               })).clock(clock);
  std::vector<completion<result>> done(2);
  spawn(io, stage(op()), done[0], &signal);
  clock.run(io);
  spawn(io, slow(op()), done[1], &signal);
  clock.run(io);
  for (auto& d : done) {
    BOOST_TEST(d.times == 1);
    BOOST_TEST((d.value->error() == aborted));
  }
  BOOST_TEST(calls == 0);
  BOOST_TEST((clock.now() == time_point{}), "the latency was waited though the caller was cancelled");
}

BOOST_AUTO_TEST_SUITE_END()
