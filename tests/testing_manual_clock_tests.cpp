#include "support.hpp"

#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using resilience::duration;
using resilience::time_point;
using resilience::testing::manual_clock;

BOOST_AUTO_TEST_SUITE(virtual_time)

BOOST_AUTO_TEST_CASE(time_starts_at_zero_and_moves_only_when_told) {
  manual_clock clock;
  BOOST_TEST(clock.now().time_since_epoch().count() == 0);
  clock.advance(5s);
  BOOST_TEST((clock.now() == time_point(5s)));
  manual_clock copy = clock;
  copy.advance(1s);
  BOOST_TEST((clock.now() == time_point(6s)), "copies share one time line");
  BOOST_CHECK_THROW(clock.advance(-1ms), std::invalid_argument);
  BOOST_CHECK_THROW(clock.advance_to(time_point(1s)), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(waits_complete_in_expiry_order_at_their_time) {
  asio::io_context io;
  manual_clock clock;
  std::vector<std::pair<int, time_point>> fired;
  auto t1 = clock.make_timer(io.get_executor());
  auto t2 = clock.make_timer(io.get_executor());
  t1.expires_after(3s);
  t2.expires_after(1s);
  t1.async_wait([&](boost::system::error_code ec) { fired.emplace_back(ec ? -1 : 1, clock.now()); });
  t2.async_wait([&](boost::system::error_code ec) { fired.emplace_back(ec ? -2 : 2, clock.now()); });
  BOOST_TEST(clock.pending() == 2u);
  BOOST_TEST(io.poll() == 0u, "nothing fires before its time");
  clock.run(io);
  BOOST_REQUIRE(fired.size() == 2u);
  BOOST_TEST(fired[0].first == 2);
  BOOST_TEST((fired[0].second == time_point(1s)));
  BOOST_TEST(fired[1].first == 1);
  BOOST_TEST((fired[1].second == time_point(3s)));
  BOOST_TEST(clock.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(cancel_and_destruction_abort_pending_waits) {
  asio::io_context io;
  manual_clock clock;
  std::vector<boost::system::error_code> results;
  {
    auto t = clock.make_timer(io.get_executor());
    t.expires_after(1s);
    t.async_wait([&](boost::system::error_code ec) { results.push_back(ec); });
    BOOST_TEST(t.cancel() == 1u);
    t.expires_after(1s);
    t.async_wait([&](boost::system::error_code ec) { results.push_back(ec); });
  }  // destroyed with a wait pending
  clock.run(io);
  BOOST_REQUIRE(results.size() == 2u);
  BOOST_TEST((results[0] == asio::error::operation_aborted));
  BOOST_TEST((results[1] == asio::error::operation_aborted));
  BOOST_TEST((clock.now() == time_point(0s)), "aborted waits do not move time");
}

BOOST_AUTO_TEST_CASE(cancellation_slot_aborts_a_wait_in_a_coroutine) {
  asio::io_context io;
  manual_clock clock;
  asio::cancellation_signal signal;
  resilience::test::completion<boost::system::error_code> done;
  // A named lambda: its coroutine refers to its captures until it finishes.
  auto wait_an_hour = [&]() -> asio::awaitable<boost::system::error_code> {
    auto t = clock.make_timer(co_await asio::this_coro::executor);
    t.expires_after(1h);
    auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return ec;
  };
  resilience::test::spawn(io, wait_an_hour(), done, &signal);
  clock.run_for(io, 1s);
  BOOST_TEST(!done.done());
  BOOST_TEST(clock.pending() == 1u);
  signal.emit(asio::cancellation_type::terminal);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((*done.value == asio::error::operation_aborted));
  BOOST_TEST((clock.now() == time_point(1s)), "run_for stops at its limit; cancel does not advance");
}

BOOST_AUTO_TEST_CASE(run_for_never_passes_its_limit) {
  asio::io_context io;
  manual_clock clock;
  bool fired = false;
  auto t = clock.make_timer(io.get_executor());
  t.expires_after(10s);
  t.async_wait([&](boost::system::error_code) { fired = true; });
  clock.run_for(io, 9s);
  BOOST_TEST(!fired);
  clock.run_for(io, 1s);
  BOOST_TEST(fired);
}


namespace {

using io_timer = manual_clock::timer_type<asio::io_context::executor_type>;
constexpr duration tick{1};

// How the waits given its handlers ended.
struct tally {
  int fired = 0;
  int aborted = 0;
  auto handler() {
    return [this](boost::system::error_code ec) { ++(ec == asio::error::operation_aborted ? aborted : fired); };
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(cancel_ends_only_its_own_timers_waits) {
  asio::io_context io;
  manual_clock clock;
  constexpr int n = 100;
  std::vector<io_timer> timers;
  timers.reserve(n);
  std::vector<tally> waits(n);
  for (int i = 0; i < n; ++i) {
    auto& t = timers.emplace_back(clock.make_timer(io.get_executor()));
    t.expires_after(1s + i * 1ms);
    t.async_wait(waits[i].handler());
  }
  BOOST_TEST(timers[40].cancel() == 1u);
  BOOST_TEST(timers[40].cancel() == 0u, "nothing left to cancel");
  timers[50].async_wait(waits[50].handler());  // two waits on one timer
  BOOST_TEST(timers[50].expires_after(1h) == 2u);
  asio::cancellation_signal signal;
  timers[70].async_wait(asio::bind_cancellation_slot(signal.slot(), waits[70].handler()));
  signal.emit(asio::cancellation_type::terminal);
  BOOST_TEST(timers[70].cancel() == 1u, "the slot ended one wait, cancel the other");
  BOOST_TEST(clock.pending() == static_cast<std::size_t>(n - 3));

  clock.advance(1s + 10ms);  // waits 0 to 10 are due
  BOOST_TEST(timers[5].cancel() == 0u, "a completed wait is not cancelled");
  BOOST_TEST(timers[20].cancel() == 1u);
  clock.run(io);
  for (int i = 0; i < n; ++i) {
    const int aborted = i == 40 || i == 20 ? 1 : i == 50 || i == 70 ? 2 : 0;
    BOOST_TEST(waits[i].aborted == aborted, "timer " << i);
    BOOST_TEST(waits[i].fired == 1 - std::min(aborted, 1), "timer " << i);
  }
}

BOOST_AUTO_TEST_CASE(a_moved_timer_takes_its_waits_along) {
  asio::io_context io;
  manual_clock clock;
  tally waits;
  std::optional<io_timer> from(clock.make_timer(io.get_executor()));
  from->expires_after(1s);
  from->async_wait(waits.handler());
  from->async_wait(waits.handler());
  io_timer to(std::move(*from));
  from.reset();
  BOOST_TEST(clock.pending() == 2u, "destroying the moved-from timer cancels nothing");
  BOOST_TEST(to.cancel() == 2u);
  to.expires_after(1s);
  to.async_wait(waits.handler());
  clock.run(io);
  BOOST_TEST(waits.aborted == 2);
  BOOST_TEST(waits.fired == 1);
}

// The extremes of every call that takes a span of time, one row each: a
// clock at `start` is given `d` through advance, advance_to (as the time
// start + d), expires_after and run_for. `after` is where time ends; none
// means the span is negative, which only expires_after accepts (as Asio's
// timers do: the wait is due at once).
BOOST_AUTO_TEST_CASE(extreme_spans_saturate_and_negative_ones_are_refused) {
  struct extreme {
    const char* what;
    time_point start;
    duration d;
    std::optional<time_point> after;
  };
  const time_point max = time_point::max();
  const time_point near_max = max - 1h;
  const extreme rows[] = {
      {"zero", time_point{}, duration::zero(), time_point{}},
      {"one tick", time_point{}, tick, time_point{tick}},
      {"max", time_point{}, duration::max(), max},
      {"one tick near max", near_max, tick, near_max + tick},
      {"max near max saturates", near_max, duration::max(), max},
      {"one tick at max saturates", max, tick, max},
      {"max at max", max, duration::max(), max},
      {"zero at max", max, duration::zero(), max},
      {"negative tick", time_point{}, -tick, std::nullopt},
      {"negative tick at max", max, -tick, std::nullopt},
      {"min near max", near_max, duration::min(), std::nullopt},
  };
  const auto names = [](const char* call) {
    return [call](const std::invalid_argument& e) { return std::string(e.what()).starts_with(std::string(call) + ":"); };
  };

  for (const extreme& row : rows) {
    BOOST_TEST_CONTEXT(row.what) {
      const time_point end = row.after.value_or(row.start);
      {
        manual_clock clock;
        clock.advance_to(row.start);
        if (row.after) {
          clock.advance(row.d);
        } else {
          BOOST_CHECK_EXCEPTION(clock.advance(row.d), std::invalid_argument, names("manual_clock::advance"));
        }
        BOOST_TEST((clock.now() == end), "advance");
      }
      {
        // One wait a tick from the start and one at max: advance_to(max)
        // completes every wait.
        asio::io_context io;
        manual_clock clock;
        clock.advance_to(row.start);
        tally waits;
        auto soon = clock.make_timer(io.get_executor());
        soon.expires_after(tick);
        soon.async_wait(waits.handler());
        auto last = clock.make_timer(io.get_executor());
        last.expires_at(max);
        last.async_wait(waits.handler());
        if (row.after) {
          clock.advance_to(*row.after);
        } else {
          BOOST_CHECK_EXCEPTION(clock.advance_to(row.start + row.d), std::invalid_argument,
                                names("manual_clock::advance_to"));
        }
        io.poll();
        const int due = int(resilience::saturating_add(row.start, tick) <= end) + int(max <= end);
        BOOST_TEST((clock.now() == end), "advance_to");
        BOOST_TEST(waits.fired == due, "advance_to");
        BOOST_TEST(clock.pending() == static_cast<std::size_t>(2 - due), "advance_to");
      }
      {
        asio::io_context io;
        manual_clock clock;
        clock.advance_to(row.start);
        auto t = clock.make_timer(io.get_executor());
        t.expires_after(row.d);
        const time_point expiry = row.after ? *row.after : row.start + row.d;
        BOOST_TEST((t.expiry() == expiry), "expires_after");
        tally wait;
        t.async_wait(wait.handler());
        io.poll();
        BOOST_TEST(wait.fired == int(expiry <= row.start), "expires_after: a wait already due completes at once");
        if (row.after) {
          clock.run_for(io, row.d);
          BOOST_TEST(wait.fired == 1, "run_for");
        } else {
          BOOST_CHECK_EXCEPTION(clock.run_for(io, row.d), std::invalid_argument, names("manual_clock::run_for"));
        }
        BOOST_TEST((clock.now() == end), "run_for");
        BOOST_TEST(clock.pending() == 0u, "run_for");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(advances_from_several_threads_add_up) {
  manual_clock clock;
  constexpr int per_thread = 20000;
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&] {
      for (int n = 0; n < per_thread; ++n) {
        try {
          clock.advance(tick);
        } catch (const std::invalid_argument&) {
          ++refused;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  BOOST_TEST(refused == 0);
  BOOST_TEST(clock.now().time_since_epoch().count() == 2 * per_thread);
}

// The timer's thread checks for pending waits without the clock's lock while
// another thread completes them: every wait still ends exactly once.
BOOST_AUTO_TEST_CASE(timers_used_on_one_thread_while_another_advances) {
  asio::io_context io;
  manual_clock clock;
  std::atomic<bool> stop{false};
  std::thread advancer([&] {
    while (!stop.load()) clock.advance(1ms);
  });
  tally waits;
  int armed = 0;
  std::size_t cancelled = 0;
  for (int i = 0; i < 4000; ++i) {
    auto t = clock.make_timer(io.get_executor());
    t.expires_after(std::chrono::milliseconds(i % 3));
    t.async_wait(waits.handler());
    ++armed;
    switch (i % 4) {
      case 0:
        cancelled += t.cancel();
        break;
      case 1:
        cancelled += t.expires_after(1ms);
        t.async_wait(waits.handler());
        ++armed;
        break;
      case 2: {
        auto moved = std::move(t);
        cancelled += moved.cancel();
        break;
      }
      default:
        break;  // destroyed as it is
    }
    io.poll();
  }
  stop = true;
  advancer.join();
  clock.run(io);
  BOOST_TEST(waits.fired + waits.aborted == armed);
  BOOST_TEST(static_cast<std::size_t>(waits.aborted) >= cancelled);
  BOOST_TEST(clock.pending() == 0u);
}

namespace {

// Counts the coroutine frames alive.
struct counted {
  explicit counted(int* live) : live(live) { ++*live; }
  counted(const counted&) = delete;
  ~counted() { --*live; }
  int* live;
};

// The clock by pointer: the frame holds no copy of it.
asio::awaitable<void> sleep_on(const manual_clock* clock, duration d, int* live) {
  counted frame(live);
  auto t = clock->make_timer(co_await asio::this_coro::executor);
  t.expires_after(d);
  co_await t.async_wait(asio::use_awaitable);
}

// The clock by value, as a call owns a temporary policy that holds one.
asio::awaitable<void> sleep_with_copy(manual_clock clock, duration d, int* live) {
  counted frame(live);
  auto t = clock.make_timer(co_await asio::this_coro::executor);
  t.expires_after(d);
  co_await t.async_wait(asio::use_awaitable);
}

constexpr int many_calls = 10000;

}  // namespace

BOOST_AUTO_TEST_CASE(destroying_the_context_first_frees_the_frames_waiting_on_the_clock) {
  int live = 0;
  int completed = 0;
  std::optional<manual_clock> clock(std::in_place);
  {
    asio::io_context io;
    for (int i = 0; i < many_calls; ++i)
      asio::co_spawn(io, sleep_on(&*clock, 1s + (i % 100) * 1ms, &live), [&](std::exception_ptr) { ++completed; });
    io.poll();
    BOOST_REQUIRE(live == many_calls);
    BOOST_REQUIRE(clock->pending() == static_cast<std::size_t>(many_calls));
    // Half complete: their handlers wait in the context's queue, unrun.
    clock->advance(1s + 49ms);
    BOOST_REQUIRE(clock->pending() == static_cast<std::size_t>(many_calls / 2));
  }
  BOOST_TEST(live == 0, "frames left after their context was destroyed");
  BOOST_TEST(completed == 0);
  BOOST_TEST(clock->pending() == 0u, "the context's waits go with it");

  // The clock lives on, and serves a new context (perhaps at the same address).
  {
    asio::io_context io;
    tally wait;
    auto t = clock->make_timer(io.get_executor());
    t.expires_after(1s);
    t.async_wait(wait.handler());
    clock->run(io);
    BOOST_TEST(wait.fired == 1);
  }
  clock.reset();  // ASan and LSan: nothing touched after free, nothing leaked
}

BOOST_AUTO_TEST_CASE(destroying_every_copy_of_the_clock_first_frees_the_frames_waiting_on_it) {
  int live = 0;
  int completed = 0;
  asio::io_context io;
  std::optional<manual_clock> clock(std::in_place);
  std::optional<manual_clock> copy(*clock);
  for (int i = 0; i < many_calls; ++i)
    asio::co_spawn(io, sleep_on(&*clock, 1s + (i % 100) * 1ms, &live), [&](std::exception_ptr) { ++completed; });
  io.poll();
  BOOST_REQUIRE(live == many_calls);
  clock.reset();
  BOOST_TEST(live == many_calls, "a copy still holds the time line");
  BOOST_TEST(copy->pending() == static_cast<std::size_t>(many_calls));
  copy.reset();
  // Asio unwinds a dropped coroutine through its executor.
  io.poll();
  BOOST_TEST(live == 0, "frames left after the last copy of their clock was destroyed");
  BOOST_TEST(completed == 0, "dropped, not completed: nothing could ever complete them");
  BOOST_TEST(io.stopped(), "no work left behind");
}

BOOST_AUTO_TEST_CASE(frames_that_hold_the_last_copies_of_the_clock_go_with_their_context) {
  int live = 0;
  {
    asio::io_context io;
    {
      manual_clock clock;
      for (int i = 0; i < 1000; ++i) asio::co_spawn(io, sleep_with_copy(clock, 1s, &live), asio::detached);
      io.poll();
    }
    BOOST_REQUIRE(live == 1000);
  }
  BOOST_TEST(live == 0);  // and LSan: the clock's state went with the last frame
}

BOOST_AUTO_TEST_CASE(a_wait_after_the_clock_is_gone_is_aborted_at_once) {
  asio::io_context io;
  std::optional<manual_clock> clock(std::in_place);
  auto t = clock->make_timer(io.get_executor());
  clock.reset();
  tally wait;
  BOOST_TEST(t.expires_after(1s) == 0u);
  t.async_wait(wait.handler());
  io.poll();
  BOOST_TEST(wait.aborted == 1);
}

BOOST_AUTO_TEST_CASE(a_cancellation_after_the_clock_is_gone_is_harmless) {
  asio::io_context io;
  asio::cancellation_signal signal;
  tally wait;
  std::optional<manual_clock> clock(std::in_place);
  std::optional<io_timer> t(clock->make_timer(io.get_executor()));
  t->expires_after(1s);
  t->async_wait(asio::bind_cancellation_slot(signal.slot(), wait.handler()));
  clock.reset();  // drops the wait; its canceller stays in the slot
  signal.emit(asio::cancellation_type::terminal);  // the timer still holds the clock's state
  t.reset();
  signal.emit(asio::cancellation_type::terminal);  // nothing holds it now
  io.poll();
  BOOST_TEST(wait.fired + wait.aborted == 0);
}

// advance() may run on any thread: on one that moves time while another
// destroys a context with waits due, each wait is either posted before the
// context stops taking posts or dropped with it (ThreadSanitizer saw the
// posts land in a scheduler mid-shutdown). The outcome is the same for every
// interleaving; the rounds give ThreadSanitizer interleavings to look at.
BOOST_AUTO_TEST_CASE(advance_on_another_thread_while_a_context_is_destroyed) {
  manual_clock clock;
  int woke = 0;
  const auto sleeper = [&clock, &woke]() -> asio::awaitable<void> {
    auto t = clock.make_timer(co_await asio::this_coro::executor);
    t.expires_after(1ms);
    co_await t.async_wait(asio::use_awaitable);
    ++woke;
  };
  for (int round = 0; round < 300; ++round) {
    std::thread advancer;
    {
      asio::io_context io;
      for (int k = 0; k < 4; ++k) asio::co_spawn(io, sleeper(), asio::detached);
      io.poll();  // four waits on the clock, in frames only the context owns
      advancer = std::thread([&clock] { clock.advance(1ms); });
    }
    advancer.join();
  }
  BOOST_TEST(woke == 0, "a context that never ran again resumed a wait");
  BOOST_TEST(clock.pending() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
