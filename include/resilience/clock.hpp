// resilience/clock.hpp — time, injected.
//
// Strategies never read a global clock: they take a Clock, which gives the
// time (`now()`) and makes timers on an executor (`make_timer(ex)`). The
// default is the steady clock with Asio's own timers; tests and simulations
// use resilience::testing::manual_clock, whose time moves only when told.
// Both measure time as std::chrono::steady_clock::time_point, so deadlines
// and durations mean the same thing with either.
//
//   auto policy = resilience::retry_policy{}.clock(manual);  // virtual time
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <concepts>
#include <limits>
#include <type_traits>

#include <time.h>

namespace resilience {

using time_point = std::chrono::steady_clock::time_point;
using duration = std::chrono::steady_clock::duration;

struct steady_clock {
  template <class Executor>
  using timer_type = boost::asio::basic_waitable_timer<
      std::chrono::steady_clock, boost::asio::wait_traits<std::chrono::steady_clock>, Executor>;

  time_point now() const noexcept { return std::chrono::steady_clock::now(); }

  // The same clock as of its last tick (a few milliseconds behind at most),
  // for books kept in coarser steps, such as a retry budget's buckets: it
  // costs a fraction of now(). Strategies use it through
  // detail::coarse_now, which falls back to now() for other clocks.
  time_point coarse_now() const noexcept {
#if defined(CLOCK_MONOTONIC_COARSE)
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
#else
    return now();
#endif
  }

  template <class Executor>
  timer_type<Executor> make_timer(const Executor& ex) const {
    return timer_type<Executor>(ex);
  }
};

namespace detail {
template <class C>
time_point coarse_now(const C& c) noexcept {
  if constexpr (requires { { c.coarse_now() } -> std::same_as<time_point>; }) {
    return c.coarse_now();
  } else {
    return c.now();
  }
}
}  // namespace detail

// What a strategy needs of a clock: its time, and timers that wait on it with
// `expires_after(d)` and `async_wait(token)` and honour cancellation slots.
template <class C>
concept clock = std::copy_constructible<C> && requires(const C& c, boost::asio::any_io_executor ex) {
  { c.now() } -> std::same_as<time_point>;
  c.make_timer(ex);
};

// A clock seen without its type: what context::now() and
// context::remaining() read, and what a circuit breaker's shared core keeps.
// Refers to the clock, which must outlive it.
class clock_ref {
 public:
  // Constrained so that copying a clock_ref never asks whether it is a clock.
  template <class C>
    requires(!std::is_same_v<C, clock_ref> && clock<C>)
  explicit clock_ref(const C& c) noexcept : clock_(&c), now_(&read<C>) {}
  template <class C>
    requires(!std::is_same_v<C, clock_ref> && clock<C>)
  explicit clock_ref(const C&&) = delete;  // a temporary clock would be gone

  time_point now() const noexcept { return now_(clock_); }
  // The clock, if it is a C (as std::function::target); null otherwise.
  template <class C>
  const C* target() const noexcept {
    return now_ == &read<C> ? static_cast<const C*>(clock_) : nullptr;
  }

 private:
  template <class C>
  static time_point read(const void* c) noexcept {
    return static_cast<const C*>(c)->now();
  }

  const void* clock_;
  time_point (*now_)(const void*) noexcept;
};

namespace detail {
// Kept in a stage's coroutine frame: tells the contexts it passes inward
// which clock the stage reads, so that the op's ctx.remaining() runs on the
// same time. On the steady clock, which a context assumes, it is empty and
// does nothing: the default path pays neither a store nor a wider context.
template <class C>
class clock_anchor {
 public:
  explicit clock_anchor(const C& c) noexcept : ref_(c) {}
  template <class Context>
  void attach(Context& ctx) const noexcept {
    ctx.clock = &ref_;
  }

 private:
  clock_ref ref_;
};
template <>
class clock_anchor<steady_clock> {
 public:
  explicit clock_anchor(const steady_clock&) noexcept {}
  template <class Context>
  void attach(Context&) const noexcept {}
};
}  // namespace detail

// now + d without overflow: a huge d means "never".
// Any t and d: time before the clock's epoch or a negative d cannot overflow
// either way.
inline time_point saturating_add(time_point t, duration d) noexcept {
  using rep = duration::rep;
  const rep at = t.time_since_epoch().count();
  const rep by = d.count();
  if (by > 0 && at > std::numeric_limits<rep>::max() - by) return time_point::max();
  if (by < 0 && at < std::numeric_limits<rep>::min() - by) return time_point::min();
  return t + d;
}

}  // namespace resilience
