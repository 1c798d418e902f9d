// resilience/context.hpp — what an operation may know about the call it is in.
//
//   co_await resilience::co_retry(
//       [&](const resilience::context& ctx) -> asio::awaitable<int> {
//         log("attempt {} of {}", ctx.attempt, ctx.max_attempts);
//         co_return co_await query(db);
//       },
//       policy);
//
// An operation may take a `const context&`, or nothing. Each stage of a
// pipeline keeps its own copy and passes it inward, adjusted: a retry stage
// sets the attempt number, a deadline stage tightens the deadline. A context
// is a few words, so copying it costs nothing worth measuring. Copies share
// the call's properties (a pointer): what the op marks, every stage and the
// caller see. `ctx.remaining()` and `ctx.now()` read the call's clock, the
// one its stages read (virtual time under a manual clock).
#pragma once

#include <resilience/clock.hpp>
#include <resilience/event.hpp>
#include <resilience/properties.hpp>

#include <concepts>
#include <cstdint>
#include <utility>

namespace resilience {

struct context {
  // 1-based number of the current attempt of the innermost retry stage.
  std::uint32_t attempt = 1;
  // The most attempts that retry stage makes (1 outside any retry;
  // unlimited_attempts, the largest value, when only time or cancellation
  // bounds it).
  std::uint32_t max_attempts = 1;
  // The time by which the whole call must be done; time_point::max() if none.
  time_point deadline = time_point::max();

  // The call's properties (properties.hpp), shared by the op and every
  // stage; null when the caller attached none.
  properties* props = nullptr;

  // The clock the call's stages read, set by the stages that read one
  // (retry, timeout, deadline, hedging) while they run; null means the
  // steady clock. Read it through now() and remaining(). It points into the
  // call: a copy of the context kept past the call must not read it (on the
  // steady clock it stays null, and nothing dangles).
  const clock_ref* clock = nullptr;

  // Where the call's stages report their events (event.hpp): set by
  // pipeline(...).events(sink), a client's or a server's options; null for
  // none. The sink outlives the call.
  event_sink* events = nullptr;

  // The deadline an enclosing stage's own timer ends the call at, and
  // reports (a deadline or timeout stage, a server's handler bound);
  // time_point::max() for none. A stage whose bound is this same deadline
  // leaves the report to it: each expiry is reported once.
  time_point watched_deadline = time_point::max();

  // Reports `e` to the call's sink, if it has one.
  void report(const event& e) const noexcept {
    if (events) [[unlikely]]
      events->on_event(e);
  }

  bool has_deadline() const noexcept { return deadline != time_point::max(); }

  // Whether an expiry at `deadline` is an enclosing stage's to report.
  bool expiry_reported_outside() const noexcept { return has_deadline() && deadline == watched_deadline; }

  // This context with `p` attached. A temporary would be gone before the
  // call ends, so it is refused.
  context with(properties& p) const noexcept {
    context c = *this;
    c.props = &p;
    return c;
  }
  context with(properties&&) const = delete;

  // Marks a property for the rest of the call. Without properties attached
  // there is nowhere to keep it (and nothing could read it): returns false.
  template <class T, class V>
  bool set(const property_key<T>& key, V&& value) const {
    if (!props) return false;
    props->set(key, std::forward<V>(value));
    return true;
  }
  template <class T>
  const T* find(const property_key<T>& key) const noexcept {
    return props ? props->find(key) : nullptr;
  }
  template <class T>
  T value_or(const property_key<T>& key, T fallback) const {
    const T* v = find(key);
    return v ? *v : std::move(fallback);
  }

  // The time on the call's clock.
  time_point now() const noexcept { return clock ? clock->now() : std::chrono::steady_clock::now(); }

  // Time left until the deadline on the call's clock (or on `c`), never
  // negative; duration::max() if none.
  duration remaining() const noexcept { return has_deadline() ? left_at(now()) : duration::max(); }
  template <class C>
    requires requires(const C& c) { { c.now() } -> std::same_as<time_point>; }
  duration remaining(const C& c) const noexcept {
    return has_deadline() ? left_at(c.now()) : duration::max();
  }

 private:
  duration left_at(time_point t) const noexcept { return t >= deadline ? duration::zero() : deadline - t; }
};

}  // namespace resilience
