// resilience/timeout.hpp — bound one call in time.
//
//   using namespace std::chrono_literals;
//   const auto attempt_timeout = resilience::timeout(250ms);
//   auto row = co_await attempt_timeout([&] { return db.async_query(sql); });
//   // or as a stage: resilience::pipeline(retry_policy, attempt_timeout)
//
// If the time passes first, the op is cancelled through its cancellation slot
// (terminal by default), waited for — never detached — and the call ends with
// resilience::error::timeout: in T's error channel, or thrown as a
// boost::system::system_error when T has none. If the op finishes first, its
// result wins and the timer is disarmed.
//
// An op that ignores cancellation is waited for until it finishes on its own.
// Its success is then returned as is (the work was done); its failure becomes
// `timeout`.
//
// A deadline in the context (see deadline.hpp) clamps the timeout: if it comes
// first, the call ends with deadline_exceeded instead. Cancellation of the
// caller is never reported as a timeout: it ends the call with
// operation_aborted.
//
// The op runs as a child of the calling coroutine (co_spawn) on the caller's
// executor; on a multi-threaded io_context, call from a strand.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/error.hpp>
#include <resilience/detail/with_option.hpp>
#include <resilience/stage.hpp>

#include <boost/asio/cancellation_type.hpp>

#include <stdexcept>

namespace resilience {

template <class Clock = steady_clock>
class basic_timeout : public stage_base<basic_timeout<Clock>>, public detail::bounds_op_in_time {
 public:
  explicit basic_timeout(duration limit, Clock clock = {}) : limit_(limit), clock_(std::move(clock)) {
    if (limit <= duration::zero()) throw std::invalid_argument("timeout: duration must be positive");
  }

  // How the op is cancelled when time runs out. Terminal by default; an op
  // must opt in to see partial or total cancellation (its coroutine's filter).
  basic_timeout cancellation(boost::asio::cancellation_type type) const {
    return resilience::detail::with_option(*this, &basic_timeout::type_,
        detail::checked_cancellation(type, "timeout"));
  }

  template <resilience::clock K>
  basic_timeout<K> clock(K k) const {
    basic_timeout<K> t(limit_, std::move(k));
    t.type_ = type_;
    t.on_timeout_ = on_timeout_;
    return t;
  }

  // Called once for each call the bound ended (see expiry_event). With a
  // shared stage it may run on several threads at once.
  basic_timeout on_timeout(expiry_hook hook) const {
    return resilience::detail::with_option(*this, &basic_timeout::on_timeout_, std::move(hook));
  }

  duration limit() const noexcept { return limit_; }
  boost::asio::cancellation_type cancellation_type() const noexcept { return type_; }
  const Clock& clock() const noexcept { return clock_; }

  // run(op) (stage_base): the awaitable holds what it needs of this stage
  // (the limit, a copy of the clock, a share of the hook), so it may outlive
  // the stage.

 private:
  friend stage_base<basic_timeout>;
  template <class T, class Executor, class Op>
  auto call(Op op, const context& parent) const {
    return detail::run_bounded<T, Executor>(
        std::move(op), parent, clock_, limit_, type_, error::timeout, on_timeout_);
  }
  template <class K>
  friend class basic_timeout;

  duration limit_;
  boost::asio::cancellation_type type_ = boost::asio::cancellation_type::terminal;
  detail::shared_hook<void(const expiry_event&)> on_timeout_;
  [[no_unique_address]] Clock clock_;
};

inline basic_timeout<> timeout(duration limit) { return basic_timeout<>(limit); }

}  // namespace resilience
