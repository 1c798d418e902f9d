// resilience/redis/impl/fleet_limiter.hpp — the coroutine of a call through
// the fleet-wide limiter. Included at the end of
// resilience/redis/fleet_limiter.hpp, which states the contract; not to be
// included on its own.
#pragma once

namespace resilience::redis {
namespace detail {

// What the round trip a call waited for did, to that call's sink: a failure
// (and the fall-back it caused) goes to the call that started it.
inline void report_round_trip(const permit_decision& d, const context& ctx) {
  if (!d.round_trip_failed) [[likely]]
    return;
  event failed{event_kind::fleet_round_trip_failed};
  failed.error = d.round_trip_failed;
  ctx.report(failed);
  if (d.fell_back) {
    event fell{event_kind::fleet_fell_back};
    fell.error = d.round_trip_failed;
    ctx.report(fell);
  }
}

template <class Executor>
auto async_refill(limiter_core* core, time_point now) {
  boost::asio::use_awaitable_t<Executor> token;
  return boost::asio::async_initiate<boost::asio::use_awaitable_t<Executor>, void(permit_decision)>(
      [core, now](auto handler) {
        auto ex = boost::asio::get_associated_executor(handler);
        core->refill(now, [h = std::make_shared<decltype(handler)>(std::move(handler)), ex](permit_decision d) {
          boost::asio::post(ex, [h, d] { std::move(*h)(d); });
        });
      },
      token);
}

template <class T, class Executor, class Op, class Clock>
boost::asio::awaitable<T, Executor> stage_call(Op op, limiter_core* core, const Clock* clock, context ctx) {
  const time_point give_up = saturating_add(clock->now(), core->options().max_wait());
  for (;;) {
    const time_point now = clock->now();
    permit_decision d = core->try_take(now);
    if (d.resumed) [[unlikely]]
      ctx.report(event{event_kind::fleet_resumed});
    if (d.what == permit_decision::kind::ask_redis) {
      d = co_await async_refill<Executor>(core, now);
      report_round_trip(d, ctx);
      // The round trip is not cancelled (it ends within command_timeout);
      // a caller cancelled meanwhile ends here, without a permit.
      const auto state = co_await boost::asio::this_coro::cancellation_state;
      if (state.cancelled() != boost::asio::cancellation_type::none)
        co_return outcome<T>::from_error(boost::asio::error::operation_aborted).get();
    }
    if (d.what == permit_decision::kind::admitted) break;
    if (d.what == permit_decision::kind::ask_redis) {
      // The lease went to callers ahead: ask again, while there is time.
      if (clock->now() < ctx.deadline) continue;
      d.what = permit_decision::kind::rejected;
    }
    const time_point at = saturating_add(clock->now(), d.retry_after);
    if (at > give_up || at >= ctx.deadline) {
      core->reject();
      ctx.report(resilience::detail::refusal_event(event_kind::fleet_rate_limited, resilience::error::rate_limited,
                                                   d.retry_after));
      // Throwing off for the turn (see yield_after_refusal).
      const bool throws = co_await boost::asio::this_coro::throw_if_cancelled();
      co_await boost::asio::this_coro::throw_if_cancelled(false);
      co_await resilience::detail::yield_after_refusal<Executor>(throws);
      co_return outcome<T>::from_error(resilience::error::rate_limited).get();
    }
    auto timer = clock->make_timer(co_await boost::asio::this_coro::executor);
    timer.expires_at(at);
    auto [ec] = co_await timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable_t<Executor>{}));
    if (ec) co_return outcome<T>::from_error(boost::asio::error::operation_aborted).get();
  }
  co_return co_await resilience::detail::invoke_op(op, ctx);
}

}  // namespace detail
}  // namespace resilience::redis
