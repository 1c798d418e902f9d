// resilience/impl/rate_limiter.hpp — the coroutines of a rate limiter's
// call: straight through with a permit, or the wait for one in a frame of
// its own. Included at the end of resilience/rate_limiter.hpp, which states
// the contract; not to be included on its own.
#pragma once

namespace resilience {
namespace detail {

// The wait for a permit, in a frame of its own: calls that go straight
// through do not carry the node and the timer in theirs. Returns the turn it
// ended with (granted, or rejected and why), or nothing when cancelled.
template <class Clock, class Executor>
boost::asio::awaitable<std::optional<rate_limit_turn>, Executor> rate_limit_queue(rate_limiter_core* core,
                                                                                  const Clock* clock,
                                                                                  time_point deadline) {
  namespace asio = boost::asio;
  const auto cs = co_await asio::this_coro::cancellation_state;
  if (cs.cancelled() != asio::cancellation_type::none) co_return std::nullopt;
  time_point now = clock->now();
  const time_point give_up = saturating_add(now, core->options().max_wait());
  rate_limit_waiter node;
  rate_limit_wait_guard guard{core, &node, {}};
  rate_limit_turn turn = core->enqueue(node, now, give_up, deadline);
  if (turn.what == rate_limit_turn::kind::wait) {
    auto timer = clock->make_timer(co_await asio::this_coro::executor);
    asio::cancellation_signal timer_cancel;
    if (cs.slot().is_connected()) {
      guard.slot = cs.slot();
      guard.slot.template emplace<rate_limit_canceller>(core, &node, &timer_cancel);
    }
    while (turn.what == rate_limit_turn::kind::wait) {
      timer.expires_at(turn.at);
      co_await timer.async_wait(
          asio::bind_cancellation_slot(timer_cancel.slot(), asio::as_tuple(asio::use_awaitable_t<Executor>{})));
      if (cs.cancelled() != asio::cancellation_type::none) {
        guard.leave_slot();
        co_return std::nullopt;
      }
      now = clock->now();
      turn = core->wake(node, now, give_up, deadline);
    }
    guard.leave_slot();
  }
  co_return turn;
}

template <class T, class Executor, class Op, class Clock>
boost::asio::awaitable<T, Executor> stage_call(Op op, rate_limiter_core* core, const Clock* clock, context ctx) {
  if (!core->try_acquire(clock->now())) {
    // Without a wait, rejected without a frame for the queue: nothing would wait in it.
    rate_limit_turn turn{rate_limit_turn::kind::rejected, {}, rate_limit_reject_reason::no_permit,
                         core->options().max_wait() == duration::zero() ? core->time_until_permit(clock->now())
                                                                        : duration::zero()};
    if (core->options().max_wait() != duration::zero()) {
      const auto waited = co_await rate_limit_queue<Clock, Executor>(core, clock, ctx.deadline);
      if (!waited) co_return outcome<T>::from_error(boost::asio::error::operation_aborted).get();
      turn = *waited;
    }
    if (turn.what != rate_limit_turn::kind::granted) {
      const auto& hook = core->options().on_rejected();
      report_hooked(ctx, [&] { if (hook) hook(rate_limit_rejection{turn.reason, turn.retry_after}); },
                    refusal_event(event_kind::rate_limited, error::rate_limited, turn.retry_after));
      // Throwing off for the turn (see yield_after_refusal).
      const bool throws = co_await boost::asio::this_coro::throw_if_cancelled();
      co_await boost::asio::this_coro::throw_if_cancelled(false);
      co_await yield_after_refusal<Executor>(throws);
      co_return outcome<T>::from_error(error::rate_limited).get();
    }
  }
  co_return co_await invoke_op(op, ctx);
}

}  // namespace detail
}  // namespace resilience
