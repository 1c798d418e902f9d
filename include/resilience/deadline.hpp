// resilience/deadline.hpp — a point in time by which a whole call must be done.
//
//   using namespace std::chrono_literals;
//   // Relative: each call through the stage gets 2 s from when it starts.
//   const auto two_seconds = resilience::deadline_stage(2s);
//   // Absolute: a deadline that arrived with an inbound request.
//   auto inbound = resilience::deadline::after(request_budget);
//   auto reply = co_await resilience::deadline_stage(inbound)(
//       [&](const resilience::context& ctx) { return call_backend(ctx.remaining()); });
//
// Inside a deadline stage every nested layer sees the tightest deadline
// (ctx.deadline): co_retry starts no attempt or wait that would end past it,
// attempt timeouts are clamped to what remains, and an op can read it to send
// it on (for example in an outgoing header). When it passes, the op is
// cancelled, waited for, and the call ends with error::deadline_exceeded —
// never plain operation_aborted, which stays reserved for cancellation from
// outside.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/error.hpp>
#include <resilience/detail/with_option.hpp>
#include <resilience/stage.hpp>

#include <boost/asio/cancellation_type.hpp>

#include <algorithm>
#include <compare>
#include <optional>
#include <stdexcept>

namespace resilience {

class deadline {
 public:
  // No deadline.
  constexpr deadline() noexcept = default;
  constexpr explicit deadline(time_point at) noexcept : at_(at) {}

  template <resilience::clock C = steady_clock>
  static deadline after(duration d, const C& clock = {}) {
    if (d < duration::zero()) throw std::invalid_argument("deadline: duration must not be negative");
    return deadline(saturating_add(clock.now(), d));
  }

  constexpr bool is_set() const noexcept { return at_ != time_point::max(); }
  constexpr time_point at() const noexcept { return at_; }

  // Time left, never negative; duration::max() when no deadline is set.
  template <resilience::clock C = steady_clock>
  duration remaining(const C& clock = {}) const {
    if (!is_set()) return duration::max();
    const time_point now = clock.now();
    return now >= at_ ? duration::zero() : at_ - now;
  }

  template <resilience::clock C = steady_clock>
  bool expired(const C& clock = {}) const {
    return is_set() && clock.now() >= at_;
  }

  friend constexpr auto operator<=>(const deadline&, const deadline&) = default;

 private:
  time_point at_ = time_point::max();
};

template <class Clock = steady_clock>
class basic_deadline_stage : public stage_base<basic_deadline_stage<Clock>>, public detail::bounds_op_in_time {
 public:
  // Each call gets `budget` from when it starts.
  explicit basic_deadline_stage(duration budget, Clock clock = {}) : budget_(budget), clock_(std::move(clock)) {
    if (budget <= duration::zero()) throw std::invalid_argument("deadline_stage: budget must be positive");
  }
  // Every call must be done by `d` (for example, one that came with a request).
  explicit basic_deadline_stage(deadline d, Clock clock = {}) : absolute_(d), clock_(std::move(clock)) {}

  template <resilience::clock K>
  basic_deadline_stage<K> clock(K k) const {
    auto d = budget_ ? basic_deadline_stage<K>(*budget_, std::move(k)) : basic_deadline_stage<K>(absolute_, std::move(k));
    d.on_deadline_ = on_deadline_;
    return d;
  }

  // Called once for each call this stage's own timer ended (see
  // expiry_event). In a pipeline that keeps the deadline without a timer of
  // its own, the attempt timeout inside reports it instead, with reason
  // deadline_exceeded.
  basic_deadline_stage on_deadline(expiry_hook hook) const {
    return resilience::detail::with_option(*this, &basic_deadline_stage::on_deadline_, std::move(hook));
  }

  // The relative budget, if the stage has one: pipelines check attempt
  // timeouts against it when they are built.
  std::optional<duration> budget() const noexcept { return budget_; }
  const Clock& clock() const noexcept { return clock_; }

  // run(op) (stage_base): the budget starts when the call starts, not when
  // the awaitable is made. The awaitable holds what it needs of this stage
  // (a copy of the clock, a share of the hook), so it may outlive the stage.

  static constexpr bool can_run_tightened = true;

  // Only tightens the context's deadline and runs op: no timer, no child.
  // pipeline() uses this when every stage inside respects the deadline and
  // the innermost one bounds the op itself (a timeout clamped to the
  // deadline): the bound is then kept without a timer of its own.
  template <class Op>
  auto run_tightened(Op op, const context& parent = {}) const {
    return tighten<detail::op_value_t<Op>, detail::op_executor_t<Op>>(std::move(op), parent, clock_, absolute_.at(),
                                                                      budget_);
  }

 private:
  friend stage_base<basic_deadline_stage>;
  template <class T, class Executor, class Op>
  auto call(Op op, context parent) const {
    parent.deadline = std::min(parent.deadline, absolute_.at());
    return detail::run_bounded<T, Executor>(
        std::move(op), parent, clock_, budget_.value_or(duration::max()), boost::asio::cancellation_type::terminal,
        error::deadline_exceeded, on_deadline_);
  }
  template <class T, class Executor, class Op>
  static boost::asio::awaitable<T, Executor> tighten(Op op, context ctx, Clock clock, time_point absolute,
                                                     std::optional<duration> budget) {
    const detail::clock_anchor<Clock> anchor(clock);
    anchor.attach(ctx);
    const time_point now = clock.now();
    ctx.deadline = std::min({ctx.deadline, absolute, budget ? saturating_add(now, *budget) : time_point::max()});
    if (now >= ctx.deadline) co_return outcome<T>::from_error(error::deadline_exceeded).get();
    co_return co_await detail::invoke_op(op, ctx);
  }

  template <class K>
  friend class basic_deadline_stage;

  std::optional<duration> budget_;
  deadline absolute_;
  detail::shared_hook<void(const expiry_event&)> on_deadline_;
  [[no_unique_address]] Clock clock_;
};

inline basic_deadline_stage<> deadline_stage(duration budget) { return basic_deadline_stage<>(budget); }
inline basic_deadline_stage<> deadline_stage(deadline d) { return basic_deadline_stage<>(d); }

}  // namespace resilience
