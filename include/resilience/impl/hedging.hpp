// resilience/impl/hedging.hpp — the hedged call's coroutine, around its
// join (detail/hedge_join.hpp: the attempts, the hedge timer, the first
// acceptable outcome). Included at the end of resilience/hedging.hpp, which
// declares what is defined here and states its contract; not to be
// included on its own.
#pragma once

namespace resilience {

namespace detail {

// GCC 12 may take the frame's operator delete for a mismatch of its operator
// new once this coroutine's start is inlined (-Wmismatched-new-delete): both
// are Asio's frame allocator.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
template <class T, class Executor, class Op, class Policy>
boost::asio::awaitable<T, Executor> hedged_call(Op op, const Policy* policy, context ctx) {
  namespace asio = boost::asio;
  using join_type = hedge_join<T, Executor, Op, Policy>;
  using classifier = typename Policy::classifier_type;
  const auto caller = co_await asio::this_coro::cancellation_state;
  if (caller.cancelled() != asio::cancellation_type::none)
    co_return outcome<T>::from_error(asio::error::operation_aborted).get();
  const clock_anchor<std::remove_cvref_t<decltype(policy->clock())>> anchor(policy->clock());
  anchor.attach(ctx);
  const time_point start = policy->clock().now();
  if (start >= ctx.deadline) co_return outcome<T>::from_error(error::deadline_exceeded).get();
  // Each attempt's own properties, copied before any attempt can mark them.
  std::unique_ptr<properties[]> props;
  if (ctx.props) {
    props = std::make_unique<properties[]>(policy->max_attempts());
    for (std::uint32_t i = 0; i < policy->max_attempts(); ++i) props[i].copy_from(*ctx.props);
  }

  join_type join(&op, policy, ctx, co_await asio::this_coro::executor, start);
  join.props = props.get();
  if (caller.slot().is_connected()) caller.slot().template emplace<hedge_canceller<join_type>>(&join);
  const auto finish = [&] {
    if (caller.slot().is_connected()) caller.slot().clear();
    if (ctx.props && join.chosen() != 0 && !join.aborted()) ctx.props->swap(props[join.chosen() - 1]);
    if (policy->shared_on_settled()) {
      policy->shared_on_settled()(hedge_summary{join.aborted() ? 0 : join.chosen(), join.started(),
                                         policy->clock().now() - start});
    }
  };

  // Until the first attempt completes, this frame awaits it directly.
  using signature = typename spawn_signature<T>::type;
  asio::as_tuple_t<asio::use_awaitable_t<Executor>> token{asio::use_awaitable_t<Executor>{}};
  auto first = co_await asio::async_initiate<decltype(token), signature>(
      [&](auto handler) { join.launch_first(std::move(handler)); }, token);

  // The common case: the first attempt answered alone, with a success.
  if constexpr (judges_successes_as<classifier, false> && !std::is_void_v<T>) {
    const auto& e = std::get<0>(first);
    if (!e && join.started() == 1 && !join.aborted()) {
      auto& v = spawned_value<T>(first);
      if (!outcome_traits<T>::error(v).failed() && join.disarm()) {
        join.mark_first_done();
        policy->budget().record(attempt_verdict::success, true);
        finish();
        co_return std::move(v);
      }
    }
  }
  std::apply([&](auto&&... parts) { join.attempt_done(0, spawned_outcome<T>(std::move(parts)...)); },
             std::move(first));

  // The rest: hedges, losers, the timer. Asio would throw from the wait once
  // the caller is cancelled; the wait is mandatory, so that is switched off.
  bool throws = true;
  bool switched = false;
  while (!join.finished()) {
    if (caller.cancelled() != asio::cancellation_type::none) {
      join.abort();  // it may have come while no canceller was installed
      if (!switched) {
        throws = co_await asio::this_coro::throw_if_cancelled();
        co_await asio::this_coro::throw_if_cancelled(false);
        switched = true;
      }
      if (join.finished()) break;
    }
    // Asio clears the caller's slot each time this frame resumes: the
    // canceller goes back in for every wait.
    asio::use_awaitable_t<Executor> wait;
    co_await asio::async_initiate<asio::use_awaitable_t<Executor>, void()>(
        [&](auto resume) {
          if (caller.slot().is_connected()) caller.slot().template emplace<hedge_canceller<join_type>>(&join);
          join.park(std::move(resume));
        },
        wait);
  }
  if (switched) co_await asio::this_coro::throw_if_cancelled(throws);

  finish();
  if (join.aborted() || caller.cancelled() != asio::cancellation_type::none)
    co_return outcome<T>::from_error(asio::error::operation_aborted).get();
  co_return std::move(*join.result()).get();
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace detail

}  // namespace resilience
