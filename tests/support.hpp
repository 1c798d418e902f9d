// Helpers shared by the test files, one copy each. The HTTP and Redis
// sections at the end are opted into by the files that need them.
#pragma once

#include <resilience/deadline.hpp>
#include <resilience/error.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>
#include <resilience/timeout.hpp>

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
#include <cstddef>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <variant>
#include <vector>

namespace resilience::test {

namespace asio = boost::asio;
using namespace std::chrono_literals;

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

// A predicate for BOOST_CHECK_EXCEPTION: the std::invalid_argument names `field`.
inline auto names(const char* field) {
  return [field](const std::invalid_argument& e) { return std::string(e.what()).find(field) != std::string::npos; };
}

// Checks that make() throws std::invalid_argument naming `field`.
template <class Make>
void throws_naming(Make make, const std::string& field) {
  try {
    make();
    BOOST_ERROR("no exception for " << field);
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(std::string(e.what()).find(field) != std::string::npos, e.what());
  }
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Emits its own cancellation, then makes a call through `stage` (a coroutine
// function, not a lambda: a lambda's captures would be gone before its body
// runs).
template <class Stage, class Op>
auto cancel_then_call(const Stage& stage, asio::cancellation_signal& signal, Op op) -> decltype(stage(std::move(op))) {
  co_await asio::this_coro::throw_if_cancelled(false);  // else Asio throws at the co_await below
  signal.emit(asio::cancellation_type::terminal);
  co_return co_await stage(std::move(op));
}

// An op that counts its calls and succeeds at once.
inline auto counting(int& calls) {
  return [&calls]() -> asio::awaitable<error_code> {
    ++calls;
    co_return error_code{};
  };
}

// Starts `calls` calls, each made by `make(&started)`, runs until each is
// suspended, calls `suspended(started)`, then destroys the io_context: every
// frame and handler must be gone, and no handler called.
template <class Make, class Suspended>
void destroy_context_mid_calls(int calls, Make make, Suspended suspended) {
  int started = 0;
  int completed = 0;
  {
    asio::io_context io;
    for (int i = 0; i < calls; ++i) {
      asio::co_spawn(io, make(&started), [&completed, guard = live(live::handlers)](std::exception_ptr, auto&&...) {
        ++completed;
      });
    }
    while (io.poll() != 0) {
    }
    suspended(started);
  }
  BOOST_TEST(completed == 0);
  BOOST_TEST(live::ops == 0, "op frames left after the context was destroyed");
  BOOST_TEST(live::handlers == 0, "completion handlers left after the context was destroyed");
}

// -- circuit breakers ----------------------------------------------------------

// A circuit_state's name (found by argument-dependent lookup).
template <class State>
std::string name(State s) {
  return std::string(to_string(s));
}

// One call through `b`, which must admit it, ending as a success or a failure.
template <class Breaker>
void succeed(Breaker& b) {
  auto p = b.try_acquire();
  BOOST_REQUIRE(p);
  p.record_success();
}
template <class Breaker>
void fail(Breaker& b) {
  auto p = b.try_acquire();
  BOOST_REQUIRE(p);
  p.record_failure();
}
template <class Breaker>
void fail(Breaker& b, int n) {
  for (int i = 0; i < n; ++i) fail(b);
}

// -- retry, timeout and deadline on virtual time ---------------------------------

inline const error_code reset = asio::error::connection_reset;
inline const error_code refused = asio::error::connection_refused;
inline const error_code aborted = asio::error::operation_aborted;
inline const error_code timeout_error = error::timeout;
inline const error_code deadline_error = error::deadline_exceeded;

// An io_context, a manual clock, and a policy on it with a predictable
// (jitter-free) exponential schedule of 100 ms, 200 ms, ...
struct retry_time {
  asio::io_context io;
  testing::manual_clock clock;
  std::vector<time_point> attempts;  // when op was called

  auto policy() const {
    return retry_policy{}
        .max_attempts(5)
        .backoff(backoff::exponential(100ms, 2.0, 10s))
        .jitter(jitter::none)
        .clock(clock);
  }

  // An op that fails with `failures[i]` on call i and then returns `value`.
  auto failing(std::vector<error_code> failures, int value = 42) {
    return [this, failures, value]() -> asio::awaitable<boost::system::result<int>> {
      const std::size_t i = attempts.size();
      attempts.push_back(clock.now());
      if (i < failures.size()) co_return failures[i];
      co_return value;
    };
  }

  int calls() const { return static_cast<int>(attempts.size()); }
  duration since_start(std::size_t i) const { return attempts.at(i) - time_point{}; }
};

// An io_context, a manual clock, stages on it, and ops that take virtual
// time and count what became of them.
struct timed_stages {
  asio::io_context io;
  testing::manual_clock clock;
  int calls = 0;
  int finished = 0;  // ops that ran to their end, however they ended
  std::vector<time_point> started;
  std::vector<context> contexts;

  auto timeout(duration d) const { return resilience::timeout(d).clock(clock); }
  auto deadline(duration d) const { return basic_deadline_stage<testing::manual_clock>(d, clock); }
  auto retry() const { return retry_policy{}.max_attempts(10).backoff(backoff::constant(300ms).with_jitter(resilience::jitter::none)).clock(clock); }

  // Takes `work` of virtual time, then answers `value`; a cancellation ends
  // the wait early with operation_aborted in the error channel.
  auto slow(duration work, int value = 1) {
    return [this, work, value](const context& ctx) -> asio::awaitable<boost::system::result<int>> {
      ++calls;
      started.push_back(clock.now());
      contexts.push_back(ctx);
      auto t = clock.make_timer(co_await asio::this_coro::executor);
      t.expires_after(work);
      auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
      ++finished;
      if (ec) co_return ec;
      co_return value;
    };
  }

  // Like slow(), but the answer is a plain int and failures are exceptions.
  auto slow_throwing(duration work) {
    return [this, work]() -> asio::awaitable<int> {
      ++calls;
      auto t = clock.make_timer(co_await asio::this_coro::executor);
      t.expires_after(work);
      co_await t.async_wait(asio::use_awaitable);
      ++finished;
      co_return 7;
    };
  }

  // Ignores cancellation: always takes `work`, then answers `result`.
  auto stubborn(duration work, boost::system::result<int> result) {
    return [this, work, result]() -> asio::awaitable<boost::system::result<int>> {
      ++calls;
      co_await asio::this_coro::reset_cancellation_state(asio::disable_cancellation());
      auto t = clock.make_timer(co_await asio::this_coro::executor);
      t.expires_after(work);
      co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
      ++finished;
      co_return result;
    };
  }

  duration now() const { return clock.now() - time_point{}; }
};

// -- options over their extreme values -------------------------------------------
// One table per options type over the extreme values of each field. A row
// either names the field its std::invalid_argument must name, or is accepted;
// an accepted row is then run on virtual time, where it must end once, on
// time, within its bounds and without overflow (UBSan aborts on any).
namespace extremes {

constexpr duration tick{1};
constexpr duration dmax = duration::max();
constexpr duration dmin = duration::min();
constexpr double inf = std::numeric_limits<double>::infinity();
inline const double not_a_number = std::numeric_limits<double>::quiet_NaN();
constexpr double dbl_max = std::numeric_limits<double>::max();
constexpr double denorm = std::numeric_limits<double>::denorm_min();

// The field a row's std::invalid_argument must name; none: it is accepted.
using rejects = std::optional<std::string>;
inline const rejects accepted = std::nullopt;

// Calls make() and checks the verdict: the value if it was (rightly)
// accepted. Any other exception, or a verdict not met, fails the row.
template <class Make>
auto enter(const std::string& row, Make make, const rejects& expected) -> std::optional<decltype(make())> {
  try {
    auto value = make();
    if (expected) {
      BOOST_ERROR(row << ": accepted; expected std::invalid_argument naming " << *expected);
      return std::nullopt;
    }
    return value;
  } catch (const std::invalid_argument& e) {
    if (!expected) {
      BOOST_ERROR(row << ": rejected, expected accepted: " << e.what());
    } else {
      BOOST_TEST(std::string(e.what()).find(*expected) != std::string::npos,
                 row << ": the message names " << *expected << ": " << e.what());
    }
  } catch (const std::exception& e) {
    BOOST_ERROR(row << ": threw " << typeid(e).name() << " (" << e.what() << "), not std::invalid_argument");
  }
  return std::nullopt;
}

inline time_point add(time_point t, duration d) { return saturating_add(t, d); }

// Virtual time, and ops that take some of it.
struct virtual_calls {
  asio::io_context io;
  testing::manual_clock clock;
  std::vector<time_point> calls;

  // Takes `d`, then answers 7; a cancellation ends it with its error.
  auto taking(duration d) {
    return [this, d]() -> asio::awaitable<boost::system::result<int>> {
      calls.push_back(clock.now());
      auto timer = clock.make_timer(co_await asio::this_coro::executor);
      timer.expires_after(d);
      auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return ec;
      co_return 7;
    };
  }

  // Fails at once with connection_reset `failures` times, then answers 7.
  auto failing(std::size_t failures) {
    return [this, failures]() -> asio::awaitable<boost::system::result<int>> {
      calls.push_back(clock.now());
      if (calls.size() <= failures) co_return error_code(asio::error::connection_reset);
      co_return 7;
    };
  }

  // Runs one call to its end on virtual time.
  template <class Awaitable>
  completion<boost::system::result<int>> run(Awaitable a) {
    completion<boost::system::result<int>> done;
    spawn(io, std::move(a), done);
    clock.run(io);
    io.restart();
    return done;
  }

  duration elapsed() const { return clock.now() - time_point{}; }
};

// What a call through a bound should end with: 7 after `work` if the bound
// is later, else `reason` at the bound.
inline void check_bounded_call(const std::string& row, virtual_calls& vt,
                               const completion<boost::system::result<int>>& done, duration work,
                               std::optional<duration> bound, error_code reason) {
  BOOST_TEST_REQUIRE(done.times == 1, row << ": the call ends once");
  BOOST_TEST_REQUIRE(!done.exception, row);
  if (!bound || *bound > work) {
    BOOST_TEST(done.value->has_value(), row << ": " << done.value->error().message());
    BOOST_TEST((vt.elapsed() == work), row);
  } else if (*bound < work) {
    BOOST_TEST((done.value->error() == reason), row << ": " << done.value->error().message());
    BOOST_TEST((vt.elapsed() == *bound), row);
  }
}

}  // namespace extremes

// -- HTTP dates ------------------------------------------------------------------

constexpr std::chrono::sys_days ymd(int y, unsigned m, unsigned d) {
  return std::chrono::sys_days{std::chrono::year{y} / std::chrono::month{m} / std::chrono::day{d}};
}
constexpr std::chrono::sys_seconds at(int y, unsigned m, unsigned d, int hh, int mm, int ss) {
  return std::chrono::sys_seconds{ymd(y, m, d)} + std::chrono::hours{hh} + std::chrono::minutes{mm} +
         std::chrono::seconds{ss};
}

// RFC 9110's example date.
inline constexpr std::chrono::sys_seconds rfc_example = at(1994, 11, 6, 8, 49, 37);

}  // namespace resilience::test
