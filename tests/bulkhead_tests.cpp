// The bulkhead: admission up to N at once, a bounded FIFO queue, leaving the
// queue on max_wait or cancellation (a cancelled waiter: queue_tests.cpp),
// permits returned on every path (including an execution context destroyed
// mid-call; the plain case in lifecycle_tests.cpp), options, and a
// multi-threaded run that checks only invariants.
#include "support.hpp"

#include <resilience/bulkhead.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/testing/manual_clock.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::bulkhead_options;
using resilience::bulkhead_reject_reason;
using resilience::duration;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::names;
using resilience::test::spawn;

namespace {

using bulkhead = resilience::basic_bulkhead<manual_clock>;
const error_code full = resilience::error::bulkhead_full;
using resilience::test::aborted;

// Virtual time, ops that hold their slot for a while on it, and what the
// bulkhead reported.
struct bulkhead_fixture {
  asio::io_context io;
  manual_clock clock;
  std::vector<int> admitted;  // op ids, in the order the ops started
  std::vector<int> finished;
  std::vector<bulkhead_reject_reason> rejections;
  int inside = 0;
  int most_inside = 0;

  bulkhead_options options(std::uint32_t n, std::uint32_t queue) {
    return bulkhead_options{}.max_concurrent(n).max_queue(queue).on_rejected(
        [this](const resilience::bulkhead_rejection& r) { rejections.push_back(r.reason); });
  }

  // An op that holds its slot for `d` of virtual time, then answers its id.
  auto op(int id, duration d = 1s) {
    return [this, id, d]() -> asio::awaitable<error_code> {
      admitted.push_back(id);
      struct scope {
        bulkhead_fixture* f;
        explicit scope(bulkhead_fixture* x) : f(x) { f->most_inside = std::max(f->most_inside, ++f->inside); }
        ~scope() { --f->inside; }
      } in(this);
      auto timer = clock.make_timer(co_await asio::this_coro::executor);
      timer.expires_after(d);
      auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      if (!ec) finished.push_back(id);
      co_return ec;
    };
  }

  void poll() {
    while (io.poll() != 0) {
    }
    io.restart();
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(bulkhead_admission, bulkhead_fixture)

BOOST_AUTO_TEST_CASE(n_calls_run_at_once_and_the_next_one_queues) {
  bulkhead b(options(2, 10), clock);
  std::vector<completion<error_code>> done(3);
  for (int i = 0; i < 3; ++i) spawn(io, b(op(i)), done[i]);
  poll();
  BOOST_TEST(admitted == (std::vector<int>{0, 1}));
  BOOST_TEST(b.in_flight() == 2u);
  BOOST_TEST(b.queued() == 1u);
  clock.advance(1s);
  poll();
  BOOST_TEST(admitted == (std::vector<int>{0, 1, 2}), "the waiter was not admitted when a slot came free");
  BOOST_TEST(b.in_flight() == 1u);
  BOOST_TEST(b.queued() == 0u);
  clock.run(io);
  for (auto& d : done) {
    BOOST_TEST(d.times == 1);
    BOOST_TEST((d.value == error_code{}));
  }
  BOOST_TEST(most_inside == 2);
  BOOST_TEST(b.in_flight() == 0u);
  BOOST_TEST(rejections.empty());
}

BOOST_AUTO_TEST_CASE(waiters_are_admitted_in_order_of_arrival) {
  bulkhead b(options(1, 10), clock);
  std::vector<completion<error_code>> done(6);
  // Different lengths, so a wrong order would also change the finishing order.
  for (int i = 0; i < 6; ++i) spawn(io, b(op(i, std::chrono::milliseconds(60 - 10 * i))), done[i]);
  clock.run(io);
  BOOST_TEST(admitted == (std::vector<int>{0, 1, 2, 3, 4, 5}));
  BOOST_TEST(finished == (std::vector<int>{0, 1, 2, 3, 4, 5}));
  BOOST_TEST(most_inside == 1);
}

BOOST_AUTO_TEST_CASE(a_freed_slot_goes_to_the_first_waiter_not_to_a_newcomer) {
  bulkhead b(options(1, 10), clock);
  auto held = b.try_acquire();
  BOOST_REQUIRE(held);
  std::vector<completion<error_code>> done(3);
  spawn(io, b(op(0)), done[0]);
  spawn(io, b(op(1)), done[1]);
  poll();
  BOOST_REQUIRE(b.queued() == 2u);
  held.release();  // handed to waiter 0; its resumption is posted, not run
  BOOST_TEST(b.in_flight() == 1u, "the slot was freed instead of handed over");
  BOOST_TEST(b.queued() == 1u);
  BOOST_TEST(!b.try_acquire(), "a newcomer took the slot handed to a waiter");
  spawn(io, b(op(2)), done[2]);  // arrives before waiter 0 has resumed
  clock.run(io);
  BOOST_TEST(admitted == (std::vector<int>{0, 1, 2}));
  BOOST_TEST(b.in_flight() == 0u);
}

BOOST_AUTO_TEST_CASE(a_full_queue_rejects_without_calling_the_op) {
  bulkhead b(options(1, 1), clock);
  auto held = b.try_acquire();
  std::vector<completion<error_code>> done(2);
  spawn(io, b(op(0)), done[0]);
  spawn(io, b(op(1)), done[1]);
  poll();
  BOOST_TEST(done[1].times == 1);
  BOOST_TEST((done[1].value == full));
  BOOST_TEST(!done[0].done());
  BOOST_TEST(b.queued() == 1u);
  BOOST_TEST(rejections == (std::vector<bulkhead_reject_reason>{bulkhead_reject_reason::queue_full}));
  held.release();
  clock.run(io);
  BOOST_TEST(admitted == (std::vector<int>{0}), "the rejected call's op ran");
  BOOST_TEST(b.in_flight() == 0u);
}

BOOST_AUTO_TEST_CASE(no_queue_rejects_at_once_and_a_result_without_error_channel_throws) {
  bulkhead b(options(1, 0), clock);
  auto held = b.try_acquire();
  completion<int> done;
  int calls = 0;
  spawn(io, b([&]() -> asio::awaitable<int> {
          ++calls;
          co_return 1;
        }),
        done);
  poll();
  BOOST_TEST(done.times == 1);
  BOOST_TEST(calls == 0);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), boost::system::system_error,
                        [](const auto& e) { return e.code() == full; });
  BOOST_TEST(b.queued() == 0u);
}

BOOST_AUTO_TEST_CASE(max_wait_ends_the_wait_with_bulkhead_full_and_leaves_the_queue) {
  bulkhead b(options(1, 5).max_wait(100ms), clock);
  auto held = b.try_acquire();
  completion<error_code> done;
  spawn(io, b(op(0)), done);
  poll();
  BOOST_REQUIRE(b.queued() == 1u);
  clock.advance(99ms);
  poll();
  BOOST_TEST(!done.done(), "gave up before max_wait");
  BOOST_TEST(b.queued() == 1u);
  clock.advance(1ms);
  poll();
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == full));
  BOOST_TEST(b.queued() == 0u);
  BOOST_TEST(rejections == (std::vector<bulkhead_reject_reason>{bulkhead_reject_reason::max_wait}));
  held.release();
  BOOST_TEST(b.in_flight() == 0u, "the slot went to a waiter that had left");
  BOOST_TEST(admitted.empty());
  BOOST_TEST(clock.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(an_admitted_waiter_disarms_its_max_wait) {
  bulkhead b(options(1, 5).max_wait(100ms), clock);
  auto held = b.try_acquire();
  completion<error_code> done;
  spawn(io, b(op(0, 1s)), done);
  poll();
  clock.advance(50ms);
  held.release();
  poll();
  BOOST_TEST(admitted == (std::vector<int>{0}));
  clock.run(io);
  BOOST_TEST((done.value == error_code{}));
  BOOST_TEST(rejections.empty(), "max_wait fired for a call that was admitted");
}

BOOST_AUTO_TEST_CASE(a_grant_and_max_wait_at_the_same_moment_lose_no_slot) {
  bulkhead b(options(1, 5).max_wait(100ms), clock);
  auto held = b.try_acquire();
  std::vector<completion<error_code>> done(2);
  spawn(io, b(op(0)), done[0]);
  spawn(io, b(op(1)), done[1]);
  poll();
  clock.advance(100ms);  // both timers due, their handlers posted and not run
  held.release();        // ...and the first waiter handed the slot first
  poll();
  // The grant came first: waiter 0 runs; waiter 1 timed out.
  BOOST_TEST(admitted == (std::vector<int>{0}));
  BOOST_TEST((done[1].value == full));
  clock.run(io);
  BOOST_TEST((done[0].value == error_code{}));
  BOOST_TEST(b.in_flight() == 0u);
  BOOST_TEST(b.queued() == 0u);
}

BOOST_AUTO_TEST_CASE(a_stage_in_a_pipeline) {
  bulkhead b(options(1, 5), clock);
  const auto call = resilience::pipeline(b, resilience::timeout(500ms).clock(clock));
  std::vector<completion<error_code>> done(2);
  spawn(io, call(op(0, 100ms)), done[0]);
  spawn(io, call(op(1, 1s)), done[1]);
  clock.run(io);
  BOOST_TEST((done[0].value == error_code{}));
  BOOST_TEST((done[1].value == resilience::error::timeout));
  BOOST_TEST(admitted == (std::vector<int>{0, 1}));
  BOOST_TEST(b.in_flight() == 0u);
}

BOOST_AUTO_TEST_CASE(try_acquire_is_raii) {
  bulkhead b(options(2, 0), clock);
  {
    auto p1 = b.try_acquire();
    auto p2 = b.try_acquire();
    BOOST_TEST(static_cast<bool>(p1));
    BOOST_TEST(static_cast<bool>(p2));
    BOOST_TEST(!b.try_acquire());
    BOOST_TEST(b.in_flight() == 2u);
    auto moved = std::move(p1);
    BOOST_TEST(!p1);
    BOOST_TEST(b.in_flight() == 2u);
    moved.release();
    moved.release();  // once only
    BOOST_TEST(b.in_flight() == 1u);
  }
  BOOST_TEST(b.in_flight() == 0u);
  BOOST_TEST(rejections.empty(), "try_acquire reports no event");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(bulkhead_cancellation, bulkhead_fixture)

BOOST_AUTO_TEST_CASE(a_call_cancelled_while_its_op_runs_gives_its_slot_to_the_next) {
  bulkhead b(options(1, 5), clock);
  std::vector<completion<error_code>> done(2);
  asio::cancellation_signal signal;
  spawn(io, b(op(0, 1h)), done[0], &signal);
  spawn(io, b(op(1, 1s)), done[1]);
  poll();
  BOOST_REQUIRE(b.queued() == 1u);
  signal.emit(asio::cancellation_type::terminal);
  poll();
  BOOST_TEST((done[0].value == aborted));
  BOOST_TEST(admitted == (std::vector<int>{0, 1}));
  clock.run(io);
  BOOST_TEST((done[1].value == error_code{}));
  BOOST_TEST(b.in_flight() == 0u);
}

BOOST_AUTO_TEST_CASE(an_op_that_throws_gives_its_slot_back) {
  bulkhead b(options(1, 5), clock);
  completion<int> thrown;
  completion<error_code> next;
  spawn(io, b([]() -> asio::awaitable<int> {
          throw std::runtime_error("boom");
          co_return 0;
        }),
        thrown);
  spawn(io, b(op(1)), next);
  clock.run(io);
  BOOST_CHECK_THROW(resilience::test::rethrow(thrown), std::runtime_error);
  BOOST_TEST(admitted == (std::vector<int>{1}));
  BOOST_TEST((next.value == error_code{}));
  BOOST_TEST(b.in_flight() == 0u);
}

// The deterministic form of "the slot is handed to a waiter while it is
// being cancelled": the grant is made, then the cancellation comes before
// the waiter's resumption has run. The slot must go on to the next waiter.
BOOST_AUTO_TEST_CASE(a_slot_handed_to_a_waiter_cancelled_meanwhile_goes_to_the_next) {
  bulkhead b(options(1, 5).max_wait(1h), clock);
  auto held = b.try_acquire();
  std::vector<completion<error_code>> done(2);
  asio::cancellation_signal signal;
  spawn(io, b(op(0)), done[0], &signal);
  spawn(io, b(op(1)), done[1]);
  poll();
  held.release();                                  // granted to waiter 0, resumption posted
  signal.emit(asio::cancellation_type::terminal);  // before it runs
  BOOST_TEST(b.in_flight() == 1u);
  poll();
  BOOST_TEST((done[0].value == aborted));
  BOOST_TEST(admitted == (std::vector<int>{1}), "the slot handed to the cancelled waiter was lost or used");
  clock.run(io);
  BOOST_TEST((done[1].value == error_code{}));
  BOOST_TEST(b.in_flight() == 0u);
  BOOST_TEST(b.queued() == 0u);
}

// The cancellation and max_wait's expiry both posted, the cancellation
// first: it takes the waiter out; the timer's handler, run after, must
// neither end the call again nor report a rejection.
BOOST_AUTO_TEST_CASE(a_cancellation_racing_max_wait_ends_the_call_once) {
  bulkhead b(options(1, 5).max_wait(100ms), clock);
  auto held = b.try_acquire();
  completion<error_code> done;
  asio::cancellation_signal signal;
  spawn(io, b(op(0)), done, &signal);
  poll();
  asio::post(io, [&] { signal.emit(asio::cancellation_type::terminal); });
  clock.advance(100ms);
  poll();
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == aborted));
  BOOST_TEST(rejections.empty());
  BOOST_TEST(b.queued() == 0u);
  held.release();
  BOOST_TEST(b.in_flight() == 0u);
  BOOST_TEST(admitted.empty());
}

BOOST_AUTO_TEST_CASE(on_rejected_that_throws_becomes_the_outcome) {
  bulkhead b(bulkhead_options{}.max_concurrent(1).max_queue(1).max_wait(10ms).on_rejected(
                 [](const resilience::bulkhead_rejection& r) {
                   throw std::runtime_error(r.reason == bulkhead_reject_reason::queue_full ? "full" : "waited");
                 }),
             clock);
  auto held = b.try_acquire();
  std::vector<completion<error_code>> done(2);
  spawn(io, b(op(0)), done[0]);
  spawn(io, b(op(1)), done[1]);
  clock.run(io);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done[1]), std::runtime_error,
                        [](const auto& e) { return std::string(e.what()) == "full"; });
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done[0]), std::runtime_error,
                        [](const auto& e) { return std::string(e.what()) == "waited"; });
  BOOST_TEST(admitted.empty());
  BOOST_TEST(b.queued() == 0u);
  held.release();
  BOOST_TEST(b.in_flight() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(bulkhead_options_validation)

BOOST_AUTO_TEST_CASE(bad_values_throw_naming_the_field) {
  BOOST_CHECK_EXCEPTION(bulkhead_options{}.max_concurrent(0), std::invalid_argument, names("max_concurrent"));
  BOOST_CHECK_EXCEPTION(bulkhead_options{}.max_concurrent(1u << 31), std::invalid_argument, names("max_concurrent"));
  BOOST_CHECK_EXCEPTION(bulkhead_options{}.max_queue(1u << 31), std::invalid_argument, names("max_queue"));
  BOOST_CHECK_EXCEPTION(bulkhead_options{}.max_wait(0s), std::invalid_argument, names("max_wait"));
  BOOST_CHECK_EXCEPTION(bulkhead_options{}.max_wait(-1ms), std::invalid_argument, names("max_wait"));
}

BOOST_AUTO_TEST_CASE(defaults_and_good_values) {
  const bulkhead_options d;
  BOOST_TEST(d.max_concurrent() == 10u);
  BOOST_TEST(d.max_queue() == 0u);
  BOOST_TEST((d.max_wait() == duration::max()));
  const auto o = d.max_concurrent(1).max_queue(0).max_wait(1ns).max_wait(duration::max());
  BOOST_TEST(o.max_concurrent() == 1u);
  BOOST_TEST((o.max_wait() == duration::max()));
  BOOST_TEST(d.max_concurrent() == 10u, "a setter changed the value it was called on");
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

using resilience::test::live;
using resilience::test::sleep_an_hour;

// Starts `calls` calls through `b`, runs until each is running or queued,
// optionally frees `held` (a grant then waits to run), then destroys the
// io_context: every frame and handler must be gone, no handler called, and
// the bulkhead empty.
template <class Bulkhead>
void destroy_context_mid_call(const Bulkhead& b, int calls, std::uint32_t running,
                              resilience::bulkhead_permit* held = nullptr) {
  resilience::test::destroy_context_mid_calls(
      calls, [&](int* started) { return b([started] { return sleep_an_hour(started); }); },
      [&](int started) {
        BOOST_REQUIRE_EQUAL(started, static_cast<int>(running));
        BOOST_REQUIRE_EQUAL(b.in_flight(), running + (held && *held ? 1u : 0u));
        if (held) held->release();
      });
  BOOST_TEST(b.in_flight() == 0u, "a permit was not returned");
  BOOST_TEST(b.queued() == 0u, "a waiter was left in the queue");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bulkhead_context_destroyed_mid_call)

BOOST_AUTO_TEST_CASE(with_waiters_on_max_wait_timers) {
  manual_clock clock;
  const bulkhead b(bulkhead_options{}.max_concurrent(10).max_queue(20000).max_wait(1h), clock);
  destroy_context_mid_call(b, 2000, 10);
}

BOOST_AUTO_TEST_CASE(with_a_grant_not_yet_taken) {
  const resilience::bulkhead b(bulkhead_options{}.max_concurrent(1).max_queue(100));
  auto held = b.try_acquire();
  destroy_context_mid_call(b, 50, 0, &held);
}

// A bulkhead shared by two contexts: the slot that one context's waiter
// waits for is given back on another thread while that waiter's context is
// being destroyed. Whichever comes first, the grant must not reach the
// waiter once its context has begun to shut down (ThreadSanitizer saw the
// grant post into a scheduler in the middle of its shutdown, and touch the
// waiter's freed frame). The outcome is the same for every interleaving; the
// rounds give ThreadSanitizer interleavings to look at.
BOOST_AUTO_TEST_CASE(while_another_thread_gives_the_slot_back) {
  for (int round = 0; round < 300; ++round) {
    const resilience::bulkhead b(bulkhead_options{}.max_concurrent(1).max_queue(10));
    auto held = b.try_acquire();  // the only slot, held by a call elsewhere
    int started = 0;
    std::thread releaser;
    {
      asio::io_context io;
      asio::co_spawn(io, b([&started] { return sleep_an_hour(&started); }), asio::detached);
      io.poll();
      BOOST_REQUIRE_EQUAL(b.queued(), 1u);
      releaser = std::thread([&held] { held.release(); });
    }
    releaser.join();
    BOOST_REQUIRE_EQUAL(started, 0);
    BOOST_REQUIRE_EQUAL(b.in_flight(), 0u);
    BOOST_REQUIRE_EQUAL(b.queued(), 0u);
  }
  BOOST_TEST(live::ops == 0, "op frames left after the contexts were destroyed");
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

asio::awaitable<void> stress_call(const resilience::bulkhead& b, const std::function<void()>& enter,
                                  std::atomic<int>& inside, int i) {
  co_await b([&enter, &inside, i]() -> asio::awaitable<int> {
    enter();
    struct leave {
      std::atomic<int>* n;
      ~leave() { n->fetch_sub(1); }  // a cancelled op ends by an exception at a co_await
    } guard{&inside};
    for (int k = 0; k < 3; ++k) co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
    co_return i;
  });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bulkhead_concurrency)

// Calls on strands of a thread pool, some cancelled, some timing out, plus
// raw permits from plain threads. Only invariants are checked: never more
// than N inside, every call completes exactly once, nothing left at the end.
BOOST_AUTO_TEST_CASE(stress_invariants) {
  constexpr std::uint32_t limit = 3;
  constexpr int calls = 4000;
  const resilience::bulkhead b(bulkhead_options{}.max_concurrent(limit).max_queue(calls).max_wait(1h));
  std::atomic<int> inside{0};
  std::atomic<int> over_limit{0};
  std::atomic<int> completions{0};
  std::atomic<int> twice{0};
  std::vector<std::atomic<int>> times(calls);
  asio::thread_pool pool(3);
  std::vector<asio::strand<asio::thread_pool::executor_type>> strands;
  // After the pool: co_spawn leaves a handler holding a strand in each signal.
  std::vector<std::unique_ptr<asio::cancellation_signal>> signals;
  for (int i = 0; i < calls; ++i) {
    strands.push_back(asio::make_strand(pool.get_executor()));
    signals.push_back(std::make_unique<asio::cancellation_signal>());
  }
  const std::function<void()> enter = [&] {
    if (inside.fetch_add(1) + 1 > static_cast<int>(limit)) over_limit.fetch_add(1);
  };
  for (int i = 0; i < calls; ++i) {
    asio::co_spawn(strands[i], stress_call(b, enter, inside, i),
                   asio::bind_cancellation_slot(signals[i]->slot(), [&, i](std::exception_ptr) {
                     if (times[i].fetch_add(1) != 0) twice.fetch_add(1);
                     completions.fetch_add(1);
                   }));
    // Every 7th call is cancelled from its own strand, wherever it is then.
    if (i % 7 == 0)
      asio::post(strands[i], [&, i] { signals[i]->emit(asio::cancellation_type::terminal); });
  }
  std::thread raw([&] {
    for (int k = 0; k < 2000; ++k) {
      if (auto p = b.try_acquire()) {
        enter();
        inside.fetch_sub(1);
      }
    }
  });
  raw.join();
  pool.join();
  BOOST_TEST(over_limit.load() == 0, "more than max_concurrent calls inside at once");
  BOOST_TEST(completions.load() == calls);
  BOOST_TEST(twice.load() == 0);
  BOOST_TEST(b.in_flight() == 0u);
  BOOST_TEST(b.queued() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
