// Helpers shared by the test executables.
#pragma once

#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <variant>

namespace resilience::test {

namespace asio = boost::asio;

// Runs `io` until `done()` holds, for tests against real I/O (a
// redis-server, a socket); fails the test after 10 s of real time (the I/O
// takes microseconds: the bound only keeps a broken test from hanging).
inline void run_until(asio::io_context& io, const std::function<bool()>& done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    BOOST_TEST_REQUIRE((std::chrono::steady_clock::now() < give_up), "not done within 10 s");
    io.restart();
    io.run_one_for(std::chrono::milliseconds(10));
  }
}

// What a spawned coroutine finished with, recorded once.
template <class T>
struct completion {
  int times = 0;
  std::exception_ptr exception;
  std::optional<T> value;

  bool done() const { return times > 0; }
};

template <>
struct completion<void> {
  int times = 0;
  std::exception_ptr exception;
  bool done() const { return times > 0; }
};

// co_spawn with a handler that records the result and how often it came.
template <class T, class Awaitable>
void spawn(asio::io_context& io, Awaitable a, completion<T>& out, asio::cancellation_signal* cancel = nullptr) {
  auto handler = [&out](std::exception_ptr e, auto... v) {
    ++out.times;
    out.exception = e;
    if constexpr (!std::is_void_v<T>) {
      if (!e) out.value.emplace(std::move(v)...);
    }
  };
  if (cancel) {
    asio::co_spawn(io, std::move(a), asio::bind_cancellation_slot(cancel->slot(), handler));
  } else {
    asio::co_spawn(io, std::move(a), handler);
  }
}

// Rethrows a recorded exception, to check its type and text.
template <class T>
void rethrow(const completion<T>& c) {
  BOOST_REQUIRE(c.exception);
  std::rethrow_exception(c.exception);
}

// Counts live objects of its kind: an op's frame, a completion handler.
struct live {
  static inline int ops = 0;
  static inline int handlers = 0;
  int* counter;
  explicit live(int& c) : counter(&c) { ++*counter; }
  live(const live& o) : counter(o.counter) { ++*counter; }
  ~live() { --*counter; }
};

// Sleeps for an hour on a real timer: long past the end of any test.
inline asio::awaitable<boost::system::error_code> sleep_an_hour(int* started) {
  live frame(live::ops);
  ++*started;
  asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::hours(1));
  auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return ec;
}

// What a helper that returns the awaitable does: its stage is gone before
// the call runs. On the heap, so that a use after its end is certain to be
// reported (ASan).
template <class Stage, class Op>
auto call_through_local(Stage stage, Op op) {
  auto local = std::make_unique<const Stage>(std::move(stage));
  return (*local)(std::move(op));
}

}  // namespace resilience::test
