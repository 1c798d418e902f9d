// The rate limiter: a token bucket's burst, steady rate and exact refill; a
// sliding window's segments; rejecting at once or waiting in FIFO order,
// bounded by max_wait, the queue limit and the context's deadline (rejected
// at once, not slept on); cancellation at every suspension point (a
// cancelled waiter: queue_tests.cpp); an execution context destroyed with
// waiters queued; options; retry's view of
// a rejection; and try_acquire from two threads, never over the rate.
#include "support.hpp"

#include <resilience/classifier.hpp>
#include <resilience/hedging.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/rate_limiter.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::duration;
using resilience::rate_limit_reject_reason;
using resilience::rate_limiter_options;
using resilience::time_point;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::names;
using resilience::test::spawn;

namespace {

using limiter = resilience::basic_rate_limiter<manual_clock>;
const error_code limited = resilience::error::rate_limited;
using resilience::test::aborted;
const time_point t0{};

struct limiter_fixture {
  asio::io_context io;
  manual_clock clock;
  std::vector<int> admitted;          // op ids, in the order the ops started
  std::vector<time_point> admitted_at;  // and when
  std::vector<resilience::rate_limit_rejection> rejections;

  rate_limiter_options options() {
    return rate_limiter_options{}.on_rejected(
        [this](const resilience::rate_limit_rejection& r) { rejections.push_back(r); });
  }
  // 10 a second, no burst: one token every 100 ms.
  rate_limiter_options ten_a_second() { return options().token_bucket(10, 1s, 1); }

  // An op that records its start and answers at once.
  auto op(int id) {
    return [this, id]() -> asio::awaitable<error_code> {
      admitted.push_back(id);
      admitted_at.push_back(clock.now());
      co_return error_code{};
    };
  }

  void poll() {
    while (io.poll() != 0) {
    }
    io.restart();
  }

  std::vector<rate_limit_reject_reason> reasons() const {
    std::vector<rate_limit_reject_reason> r;
    for (const auto& x : rejections) r.push_back(x.reason);
    return r;
  }
};

int take_all(const limiter& l) {
  int n = 0;
  while (l.try_acquire()) ++n;
  return n;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(rate_limiter_token_bucket, limiter_fixture)

BOOST_AUTO_TEST_CASE(a_full_bucket_admits_its_burst_then_the_steady_rate) {
  limiter l(options().token_bucket(10, 1s, 5), clock);
  BOOST_TEST(take_all(l) == 5, "the bucket does not start full");
  BOOST_TEST((l.time_until_permit() == 100ms));
  clock.advance(99ms);
  BOOST_TEST(!l.try_acquire(), "a token came early");
  BOOST_TEST((l.time_until_permit() == 1ms));
  clock.advance(1ms);
  BOOST_TEST(take_all(l) == 1);
  clock.advance(250ms);
  BOOST_TEST(take_all(l) == 2);
  clock.advance(10s);
  BOOST_TEST(take_all(l) == 5, "the bucket held more than its burst");
  BOOST_TEST(rejections.empty(), "try_acquire reports no event");
}

BOOST_AUTO_TEST_CASE(refill_is_exact_over_a_long_run) {
  limiter l(options().token_bucket(1000, 1s, 10), clock);
  int admitted_total = 0;
  for (int step = 0; step <= 10000; ++step) {  // every 100 us for one second, both ends included
    admitted_total += take_all(l);
    if (step < 10000) clock.advance(100us);
  }
  BOOST_TEST(admitted_total == 10 + 1000);
}

BOOST_AUTO_TEST_CASE(a_rate_that_does_not_divide_the_period_rounds_the_interval_up) {
  // 3 a second: a token every 333333334 ns, never every 333333333.
  limiter l(options().token_bucket(3, 1s, 1), clock);
  BOOST_TEST(l.try_acquire());
  clock.advance(333333333ns);
  BOOST_TEST(!l.try_acquire());
  clock.advance(1ns);
  BOOST_TEST(l.try_acquire());
  clock.advance(1s);
  BOOST_TEST(take_all(l) == 1);
}

BOOST_AUTO_TEST_CASE(tokens_per_period) {
  limiter l(options().token_bucket(6, 1min), clock);  // burst defaults to tokens
  BOOST_TEST(take_all(l) == 6);
  BOOST_TEST((l.time_until_permit() == 10s));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(rate_limiter_sliding_window, limiter_fixture)

BOOST_AUTO_TEST_CASE(a_segment_stops_counting_when_the_window_leaves_it) {
  // 4 calls a second, in 4 segments of 250 ms.
  limiter l(options().sliding_window(4, 1s, 4), clock);
  BOOST_TEST(l.try_acquire());
  BOOST_TEST(l.try_acquire());
  clock.advance(250ms);
  BOOST_TEST(take_all(l) == 2);
  clock.advance(50ms);
  BOOST_TEST(!l.try_acquire());
  BOOST_TEST((l.time_until_permit() == 700ms), "the first segment's calls expire at 1 s");
  clock.advance(699ms);
  BOOST_TEST(!l.try_acquire(), "a segment stopped counting before the window left it");
  clock.advance(1ms);  // t = 1 s: the first segment leaves the window
  BOOST_TEST(take_all(l) == 2);
  clock.advance(250ms);  // t = 1.25 s: the second leaves
  BOOST_TEST(take_all(l) == 2);
  clock.advance(10s);
  BOOST_TEST(take_all(l) == 4);
}

BOOST_AUTO_TEST_CASE(never_more_than_the_limit_in_any_window) {
  limiter l(options().sliding_window(10, 100ms, 10), clock);
  // The segment (of 10 ms) each call was admitted in.
  std::vector<std::int64_t> segment;
  for (int step = 0; step < 2000; ++step) {  // every ms for 2 s, at an uneven pace
    const int tries = step % 7;
    for (int i = 0; i < tries; ++i)
      if (l.try_acquire()) segment.push_back(step / 10);
    clock.advance(1ms);
  }
  for (std::size_t i = 0; i + 10 < segment.size(); ++i)
    BOOST_TEST(segment[i + 10] - segment[i] >= 10, "11 calls within 10 segments, from call " << i);
  BOOST_TEST(segment.size() > 150u);
}

BOOST_AUTO_TEST_CASE(waiters_are_admitted_as_segments_expire) {
  limiter l(options().sliding_window(2, 1s, 2).max_wait(2s), clock);
  BOOST_TEST(take_all(l) == 2);
  std::vector<completion<error_code>> done(3);
  for (int i = 0; i < 3; ++i) spawn(io, l(op(i)), done[i]);
  clock.run(io);
  BOOST_TEST(admitted == (std::vector<int>{0, 1, 2}));
  BOOST_TEST((admitted_at == std::vector<time_point>{t0 + 1s, t0 + 1s, t0 + 2s}));
  for (auto& d : done) BOOST_TEST((d.value == error_code{}));
  BOOST_TEST(l.queued() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(rate_limiter_admission, limiter_fixture)

BOOST_AUTO_TEST_CASE(without_max_wait_a_call_is_rejected_at_once_with_a_hint) {
  limiter l(ten_a_second(), clock);
  std::vector<completion<error_code>> done(2);
  spawn(io, l(op(0)), done[0]);
  spawn(io, l(op(1)), done[1]);
  poll();
  BOOST_TEST((done[0].value == error_code{}));
  BOOST_TEST(done[1].times == 1);
  BOOST_TEST((done[1].value == limited));
  BOOST_TEST(admitted == (std::vector<int>{0}), "the rejected call's op ran");
  BOOST_REQUIRE(rejections.size() == 1u);
  BOOST_TEST((rejections[0].reason == rate_limit_reject_reason::no_permit));
  BOOST_TEST((rejections[0].retry_after == 100ms));
  BOOST_TEST(clock.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(a_result_without_error_channel_gets_rate_limited_thrown) {
  limiter l(ten_a_second(), clock);
  BOOST_REQUIRE(l.try_acquire());
  completion<int> done;
  spawn(io, l([]() -> asio::awaitable<int> { co_return 1; }), done);
  poll();
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), boost::system::system_error,
                        [](const auto& e) { return e.code() == limited; });
}

BOOST_AUTO_TEST_CASE(waiters_are_admitted_in_order_at_the_rate) {
  limiter l(ten_a_second().max_wait(1s), clock);
  std::vector<completion<error_code>> done(4);
  for (int i = 0; i < 4; ++i) spawn(io, l(op(i)), done[i]);
  poll();
  BOOST_TEST(l.queued() == 3u);
  BOOST_TEST((l.time_until_permit() == 400ms), "the hint does not count the waiters ahead");
  clock.run(io);
  BOOST_TEST(admitted == (std::vector<int>{0, 1, 2, 3}));
  BOOST_TEST((admitted_at == std::vector<time_point>{t0, t0 + 100ms, t0 + 200ms, t0 + 300ms}));
  for (auto& d : done) BOOST_TEST((d.value == error_code{}));
  BOOST_TEST(rejections.empty());
  BOOST_TEST(l.queued() == 0u);
}

BOOST_AUTO_TEST_CASE(a_newcomer_does_not_pass_a_waiter) {
  limiter l(ten_a_second().max_wait(1s), clock);
  BOOST_REQUIRE(l.try_acquire());
  std::vector<completion<error_code>> done(2);
  spawn(io, l(op(0)), done[0]);
  poll();
  clock.advance(100ms);  // the waiter's token is due, its wake posted and not run
  BOOST_TEST(!l.try_acquire(), "try_acquire took the token of a waiter");
  spawn(io, l(op(1)), done[1]);  // arrives before the waiter has resumed
  clock.run(io);
  BOOST_TEST(admitted == (std::vector<int>{0, 1}));
  BOOST_TEST((admitted_at == std::vector<time_point>{t0 + 100ms, t0 + 200ms}));
}

BOOST_AUTO_TEST_CASE(a_permit_later_than_max_wait_is_rejected_at_once) {
  limiter l(ten_a_second().max_wait(150ms), clock);
  std::vector<completion<error_code>> done(4);
  for (int i = 0; i < 4; ++i) spawn(io, l(op(i)), done[i]);
  poll();
  // Calls 2 and 3 would get theirs at 200 ms: no waiting in vain.
  BOOST_TEST((done[2].value == limited));
  BOOST_TEST((done[3].value == limited));
  BOOST_TEST((clock.now() == t0), "a rejection waited");
  BOOST_TEST((reasons() == std::vector<rate_limit_reject_reason>{rate_limit_reject_reason::max_wait,
                                                                   rate_limit_reject_reason::max_wait}));
  BOOST_TEST((rejections[0].retry_after == 200ms));
  BOOST_TEST(l.queued() == 1u);
  clock.run(io);
  BOOST_TEST(admitted == (std::vector<int>{0, 1}));
  BOOST_TEST((done[1].value == error_code{}));
}

BOOST_AUTO_TEST_CASE(a_permit_at_or_after_the_deadline_is_rejected_at_once) {
  limiter l(ten_a_second().max_wait(duration::max()), clock);
  resilience::context ctx;
  ctx.deadline = t0 + 200ms;
  std::vector<completion<error_code>> done(4);
  for (int i = 0; i < 4; ++i) spawn(io, l.run(op(i), ctx), done[i]);
  poll();
  // Call 2's permit would come at 200 ms: the deadline itself, too late.
  BOOST_TEST((done[2].value == limited));
  BOOST_TEST((done[3].value == limited));
  BOOST_TEST((clock.now() == t0), "it slept towards the deadline");
  BOOST_TEST((reasons() == std::vector<rate_limit_reject_reason>{rate_limit_reject_reason::deadline,
                                                                   rate_limit_reject_reason::deadline}));
  clock.run(io);
  BOOST_TEST(admitted == (std::vector<int>{0, 1}));
  BOOST_TEST((admitted_at[1] == t0 + 100ms));
}

BOOST_AUTO_TEST_CASE(the_tighter_of_max_wait_and_deadline_names_the_reason) {
  limiter l(ten_a_second().max_wait(1s), clock);
  resilience::context ctx;
  ctx.deadline = t0 + 50ms;
  BOOST_REQUIRE(l.try_acquire());
  completion<error_code> by_deadline;
  spawn(io, l.run(op(0), ctx), by_deadline);
  poll();
  limiter m(ten_a_second().max_wait(50ms), clock);
  BOOST_REQUIRE(m.try_acquire());
  ctx.deadline = t0 + 1s;
  completion<error_code> by_max_wait;
  spawn(io, m.run(op(1), ctx), by_max_wait);
  poll();
  BOOST_TEST((by_deadline.value == limited));
  BOOST_TEST((by_max_wait.value == limited));
  BOOST_TEST((reasons() == std::vector<rate_limit_reject_reason>{rate_limit_reject_reason::deadline,
                                                                   rate_limit_reject_reason::max_wait}));
}

BOOST_AUTO_TEST_CASE(a_full_queue_rejects) {
  limiter l(ten_a_second().max_wait(1s).max_queue(1), clock);
  std::vector<completion<error_code>> done(3);
  for (int i = 0; i < 3; ++i) spawn(io, l(op(i)), done[i]);
  poll();
  BOOST_TEST((done[2].value == limited));
  BOOST_TEST((reasons() == std::vector<rate_limit_reject_reason>{rate_limit_reject_reason::queue_full}));
  BOOST_TEST((rejections[0].retry_after == 200ms));
  clock.run(io);
  BOOST_TEST(admitted == (std::vector<int>{0, 1}));
}

BOOST_AUTO_TEST_CASE(on_rejected_that_throws_becomes_the_outcome) {
  limiter l(rate_limiter_options{}.token_bucket(1, 1s).on_rejected(
                [](const resilience::rate_limit_rejection&) { throw std::runtime_error("shed"); }),
            clock);
  BOOST_REQUIRE(l.try_acquire());
  completion<error_code> done;
  spawn(io, l(op(0)), done);
  poll();
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), std::runtime_error,
                        [](const auto& e) { return std::string(e.what()) == "shed"; });
  BOOST_TEST(admitted.empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(rate_limiter_cancellation, limiter_fixture)

// The cancellation reaches the waiter after its timer is due but before its
// wake has run: the call ends cancelled and takes no permit.
BOOST_AUTO_TEST_CASE(a_cancellation_before_the_wake_runs_takes_no_permit) {
  limiter l(ten_a_second().max_wait(1s), clock);
  BOOST_REQUIRE(l.try_acquire());
  completion<error_code> done;
  asio::cancellation_signal signal;
  spawn(io, l(op(0)), done, &signal);
  poll();
  // Emitted from a handler on the io_context, ahead of the wake that the
  // advance posts.
  asio::post(io, [&] { signal.emit(asio::cancellation_type::terminal); });
  clock.advance(100ms);
  poll();
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == aborted));
  BOOST_TEST(admitted.empty());
  BOOST_TEST(l.queued() == 0u);
  BOOST_TEST(l.try_acquire(), "the permit of a cancelled waiter was spent");
}

// The other order: the wake runs first and takes the permit; the call is
// admitted and ends once, with its op's result.
BOOST_AUTO_TEST_CASE(a_cancellation_after_the_wake_ends_the_call_once) {
  limiter l(ten_a_second().max_wait(1s), clock);
  BOOST_REQUIRE(l.try_acquire());
  completion<error_code> done;
  asio::cancellation_signal signal;
  spawn(io, l(op(0)), done, &signal);
  poll();
  clock.advance(100ms);
  asio::post(io, [&] { signal.emit(asio::cancellation_type::terminal); });
  poll();
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == error_code{}));
  BOOST_TEST(admitted == (std::vector<int>{0}));
  BOOST_TEST(l.queued() == 0u);
  BOOST_TEST(!l.try_acquire());
}

BOOST_AUTO_TEST_CASE(a_cancellation_while_the_op_runs_reaches_the_op) {
  limiter l(ten_a_second(), clock);
  completion<error_code> done;
  asio::cancellation_signal signal;
  spawn(io,
        l([this]() -> asio::awaitable<error_code> {
          auto timer = clock.make_timer(co_await asio::this_coro::executor);
          timer.expires_after(1h);
          auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
          co_return ec;
        }),
        done, &signal);
  poll();
  signal.emit(asio::cancellation_type::terminal);
  poll();
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == aborted));
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

using resilience::test::live;
using resilience::test::sleep_an_hour;

// Starts `calls` calls through `l`, runs until each is running or waiting,
// then destroys the io_context: every frame and handler must be gone, no
// handler called, and the queue empty.
template <class Limiter>
void destroy_context_mid_call(const Limiter& l, int calls, int running) {
  resilience::test::destroy_context_mid_calls(
      calls, [&](int* started) { return l([started] { return sleep_an_hour(started); }); },
      [&](int started) {
        BOOST_REQUIRE_EQUAL(started, running);
        BOOST_REQUIRE_EQUAL(l.queued(), static_cast<std::uint32_t>(calls - running));
      });
  BOOST_TEST(l.queued() == 0u, "a waiter was left in the queue");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rate_limiter_context_destroyed_mid_call)

BOOST_AUTO_TEST_CASE(with_waiters_on_manual_clock_timers) {
  manual_clock clock;
  const limiter l(rate_limiter_options{}.token_bucket(10, 1s, 5).max_wait(duration::max()), clock);
  destroy_context_mid_call(l, 2000, 5);
}

// A hedge waiting for a permit: the hedged call's frame, which holds the
// signal behind the waiting attempt's cancellation slot, is freed before the
// attempt's. The waiter must not touch that slot on its way out
// (AddressSanitizer saw it clear the slot in freed memory).
BOOST_AUTO_TEST_CASE(with_a_hedge_waiting_for_a_permit) {
  manual_clock clock;
  const limiter l(rate_limiter_options{}.token_bucket(1, 1h, 1).max_wait(2h), clock);
  BOOST_REQUIRE_EQUAL(take_all(l), 1);
  int started = 0;
  int completed = 0;
  {
    asio::io_context io;
    const auto hedged = resilience::hedging_policy{}.max_attempts(2).delay(1h).clock(clock);
    auto op = [&](const resilience::context& ctx) -> asio::awaitable<error_code> {
      if (ctx.attempt == 1) co_return asio::error::connection_reset;  // not fatal: the hedge starts at once
      co_return co_await l([&started] { return sleep_an_hour(&started); });
    };
    asio::co_spawn(io, hedged(op),
                   [&completed, guard = live(live::handlers)](std::exception_ptr, auto&&...) { ++completed; });
    while (io.poll() != 0) {
    }
    BOOST_REQUIRE_EQUAL(l.queued(), 1u);
  }
  BOOST_TEST(started == 0);
  BOOST_TEST(completed == 0);
  BOOST_TEST(live::handlers == 0, "completion handlers left after the context was destroyed");
  BOOST_TEST(l.queued() == 0u, "a waiter was left in the queue");
}

BOOST_AUTO_TEST_SUITE_END()

// A waiter whose permit is free while the waiter ahead of it has not yet
// resumed to take its own (that waiter's context is busy or stopped) must not
// wake again and again at the same instant: it looks again later, backing
// off. Two contexts, so that the head can be held back.
BOOST_AUTO_TEST_CASE(a_waiter_behind_a_late_head_backs_off_instead_of_spinning) {
  manual_clock clock;
  const limiter l(rate_limiter_options{}.token_bucket(10, 1s, 10).max_wait(1h), clock);
  BOOST_REQUIRE_EQUAL(take_all(l), 10);
  asio::io_context head_io, next_io;
  std::vector<int> admitted;
  auto op = [&admitted](int id) {
    return [&admitted, id]() -> asio::awaitable<error_code> {
      admitted.push_back(id);
      co_return error_code{};
    };
  };
  asio::co_spawn(head_io, l(op(1)), asio::detached);
  head_io.poll();
  asio::co_spawn(next_io, l(op(2)), asio::detached);
  next_io.poll();
  BOOST_REQUIRE_EQUAL(l.queued(), 2u);

  clock.advance(1s);  // a full bucket: permits for both, the head not run
  // A spin would never let the context run out of ready handlers at this
  // instant; a bound turns a hang into a failure.
  int handlers = 0;
  while (handlers < 1000 && next_io.poll_one() != 0) ++handlers;
  BOOST_TEST(handlers < 1000, "the second waiter kept waking while virtual time stood still");
  BOOST_TEST(admitted.empty(), "the second waiter went past the head");

  head_io.restart();
  head_io.poll();
  BOOST_TEST(admitted == std::vector<int>{1});
  // The second looks again after its back-off (at most a permit's spacing).
  clock.advance(100ms);
  next_io.restart();
  next_io.poll();
  BOOST_TEST((admitted == std::vector<int>{1, 2}));
  BOOST_TEST(l.queued() == 0u);
}

BOOST_AUTO_TEST_SUITE(rate_limiter_options_validation)

BOOST_AUTO_TEST_CASE(bad_values_throw_naming_the_field) {
  const rate_limiter_options o;
  BOOST_CHECK_EXCEPTION(o.token_bucket(0, 1s), std::invalid_argument, names("tokens"));
  BOOST_CHECK_EXCEPTION(o.token_bucket(1u << 31, 1h), std::invalid_argument, names("tokens"));
  BOOST_CHECK_EXCEPTION(o.token_bucket(10, 0s), std::invalid_argument, names("per"));
  BOOST_CHECK_EXCEPTION(o.token_bucket(10, -1s), std::invalid_argument, names("per"));
  BOOST_CHECK_EXCEPTION(o.token_bucket(10, 5ns), std::invalid_argument, names("clock tick"));
  BOOST_CHECK_EXCEPTION(o.token_bucket(10, 1s, 0), std::invalid_argument, names("burst"));
  BOOST_CHECK_EXCEPTION(o.token_bucket(1, duration(std::numeric_limits<duration::rep>::max() / 8), 100),
                        std::invalid_argument, names("burst"));
  BOOST_CHECK_EXCEPTION(o.sliding_window(0, 1s, 10), std::invalid_argument, names("limit"));
  BOOST_CHECK_EXCEPTION(o.sliding_window(10, 0s, 10), std::invalid_argument, names("window"));
  BOOST_CHECK_EXCEPTION(o.sliding_window(10, 1s, 0), std::invalid_argument, names("segments"));
  BOOST_CHECK_EXCEPTION(o.sliding_window(10, 1s, 1001), std::invalid_argument, names("segments"));
  BOOST_CHECK_EXCEPTION(o.sliding_window(10, 5ns, 10), std::invalid_argument, names("segments"));
  BOOST_CHECK_EXCEPTION(o.max_wait(-1ms), std::invalid_argument, names("max_wait"));
  BOOST_CHECK_EXCEPTION(o.max_queue(1u << 31), std::invalid_argument, names("max_queue"));
}

BOOST_AUTO_TEST_CASE(defaults_and_good_values) {
  const rate_limiter_options d;
  BOOST_TEST((d.kind() == rate_limiter_options::algorithm::token_bucket));
  BOOST_TEST(d.tokens() == 100u);
  BOOST_TEST((d.per() == 1s));
  BOOST_TEST(d.burst() == 100u);
  BOOST_TEST((d.max_wait() == duration::zero()));
  BOOST_TEST(d.max_queue() == rate_limiter_options::max_limit);
  const auto w = d.sliding_window(5, 1s, 1).max_wait(duration::max()).max_queue(0);
  BOOST_TEST((w.kind() == rate_limiter_options::algorithm::sliding_window));
  BOOST_TEST(w.limit() == 5u);
  BOOST_TEST(w.segments() == 1u);
  BOOST_TEST(d.tokens() == 100u, "a setter changed the value it was called on");
  BOOST_TEST((d.kind() == rate_limiter_options::algorithm::token_bucket));
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// An on_retry hook that a pipeline's tuple can default-construct (clang
// checks that of every stage; a capturing lambda cannot be).
struct count_retries {
  int* n = nullptr;
  template <class Event>
  void operator()(const Event&) const {
    ++*n;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(rate_limiter_with_retry, limiter_fixture)

BOOST_AUTO_TEST_CASE(the_default_classifiers_do_not_call_rate_limited_transient) {
  const auto rejected = resilience::outcome<error_code>::from_value(limited);
  const auto failed = resilience::outcome<error_code>::from_value(asio::error::connection_reset);
  BOOST_TEST(!resilience::any_failure{}(rejected));
  BOOST_TEST(resilience::any_failure{}(failed));
  const auto thrown = resilience::outcome<int>::from_error(limited);
  BOOST_TEST(!resilience::any_failure{}(thrown));
}

BOOST_AUTO_TEST_CASE(a_pipeline_with_retry_does_not_retry_a_rejection_blindly) {
  limiter l(ten_a_second(), clock);
  BOOST_REQUIRE(l.try_acquire());
  int retries = 0;
  const auto call = resilience::pipeline(
      resilience::retry_policy{}.max_attempts(5).clock(clock).on_retry(count_retries{&retries}), l);
  completion<error_code> done;
  spawn(io, call(op(0)), done);
  clock.run(io);
  BOOST_TEST((done.value == limited));
  BOOST_TEST(retries == 0);
  BOOST_TEST(admitted.empty());
  BOOST_TEST((clock.now() == t0));
}

BOOST_AUTO_TEST_CASE(retrying_on_the_limiters_hint_waits_exactly_that_long) {
  limiter l(ten_a_second(), clock);
  BOOST_REQUIRE(l.try_acquire());
  clock.advance(30ms);
  const auto policy = resilience::retry_policy{}
                          .max_attempts(3)
                          .clock(clock)
                          .retry_if([](const resilience::outcome<error_code>& o) { return o.failed(); })
                          .delay_generator(resilience::rate_limit_delay(l, resilience::backoff_delay{}));
  const auto call = resilience::pipeline(policy, l);
  completion<error_code> done;
  spawn(io, call(op(0)), done);
  clock.run(io);
  BOOST_TEST((done.value == error_code{}));
  BOOST_TEST(admitted == (std::vector<int>{0}));
  BOOST_TEST((admitted_at[0] == t0 + 100ms), "the retry did not wait for the limiter's hint");
  BOOST_REQUIRE(rejections.size() == 1u);
  BOOST_TEST((rejections[0].retry_after == 70ms));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(rate_limiter_concurrency)

// Two threads call try_acquire as fast as they can while the main thread
// moves virtual time over one second; however they interleave, the total
// admitted never exceeds what the configuration allows over that second.
template <class Limiter>
int admitted_by_two_threads(const Limiter& l, const manual_clock& clock, duration step, int steps) {
  std::atomic<bool> stop{false};
  std::atomic<int> total{0};
  auto hammer = [&] {
    int mine = 0;
    while (!stop.load(std::memory_order_relaxed))
      if (l.try_acquire()) ++mine;
    while (l.try_acquire()) ++mine;  // what is left at the end
    total.fetch_add(mine);
  };
  std::thread a(hammer), b(hammer);
  for (int i = 0; i < steps; ++i) {
    clock.advance(step);
    std::this_thread::yield();
  }
  stop.store(true);
  a.join();
  b.join();
  return total.load();
}

BOOST_AUTO_TEST_CASE(try_acquire_never_over_admits_a_token_bucket) {
  manual_clock clock;
  const limiter l(rate_limiter_options{}.token_bucket(1000, 1s, 10), clock);
  const int n = admitted_by_two_threads(l, clock, 100us, 10000);
  BOOST_TEST(n <= 10 + 1000);
  BOOST_TEST(n >= 10);
  BOOST_TEST(!l.try_acquire());
}

BOOST_AUTO_TEST_CASE(try_acquire_never_over_admits_a_sliding_window) {
  manual_clock clock;
  const limiter l(rate_limiter_options{}.sliding_window(100, 100ms, 10), clock);
  // Over [0, 1 s]: 101 segments of 10 ms, at most 100 calls in any 10 in a row.
  const int n = admitted_by_two_threads(l, clock, 100us, 10000);
  BOOST_TEST(n <= 100 * 11);
  BOOST_TEST(n >= 100);
  BOOST_TEST(!l.try_acquire());
}

// Waiting calls on the strands of a two-thread pool while the main thread
// moves virtual time on; every 5th call is cancelled from its strand,
// wherever it is then. Only invariants are checked: every call completes
// exactly once, the rate holds, nothing is left queued.
BOOST_AUTO_TEST_CASE(waiting_calls_on_a_thread_pool_keep_the_invariants) {
  manual_clock clock;
  const limiter l(rate_limiter_options{}.token_bucket(100, 1s, 5).max_wait(duration::max()), clock);
  constexpr int calls = 300;
  std::atomic<int> ran{0};
  std::atomic<int> completions{0};
  std::atomic<int> twice{0};
  std::vector<std::atomic<int>> times(calls);
  asio::thread_pool pool(2);
  std::vector<asio::strand<asio::thread_pool::executor_type>> strands;
  // After the pool: co_spawn leaves a handler holding a strand in each signal.
  std::vector<std::unique_ptr<asio::cancellation_signal>> signals;
  for (int i = 0; i < calls; ++i) {
    strands.push_back(asio::make_strand(pool.get_executor()));
    signals.push_back(std::make_unique<asio::cancellation_signal>());
  }
  for (int i = 0; i < calls; ++i) {
    asio::co_spawn(strands[i], l([&ran]() -> asio::awaitable<int> {
                     ran.fetch_add(1);
                     co_return 1;
                   }),
                   asio::bind_cancellation_slot(signals[i]->slot(), [&, i](std::exception_ptr, int) {
                     if (times[i].fetch_add(1) != 0) twice.fetch_add(1);
                     completions.fetch_add(1);
                   }));
    if (i % 5 == 0) asio::post(strands[i], [&, i] { signals[i]->emit(asio::cancellation_type::terminal); });
  }
  // Far more virtual time than the calls need (3 s at this rate).
  for (int step = 0; completions.load() < calls && step < 200000; ++step) {
    clock.advance(1ms);
    std::this_thread::yield();
  }
  if (completions.load() < calls) pool.stop();  // a failure, not a hang
  pool.join();
  BOOST_TEST(completions.load() == calls);
  BOOST_TEST(twice.load() == 0);
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock.now() - t0).count();
  BOOST_TEST(ran.load() <= 5 + elapsed / 10, "more calls than the rate allows");
  BOOST_TEST(ran.load() >= 5);
  BOOST_TEST(l.queued() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
