#include "support.hpp"

#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <stdexcept>
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

BOOST_AUTO_TEST_SUITE_END()
