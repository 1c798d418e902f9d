// resilience/impl/chaos.hpp — the coroutines of a call through a
// chaos stage. Included at the end of resilience/chaos.hpp, which states
// the contract; not to be included on its own.
#pragma once

namespace resilience {
namespace detail {

template <class T, class Executor, class Op, class Clock>
boost::asio::awaitable<T, Executor> wait_then_call(Op& op, const Clock* clock, duration latency, context ctx) {
  namespace asio = boost::asio;
  const auto cancellation = co_await asio::this_coro::cancellation_state;
  if (cancellation.cancelled() != asio::cancellation_type::none)
    co_return outcome<T>::from_error(asio::error::operation_aborted).get();
  const time_point now = clock->now();
  if (now >= ctx.deadline) co_return outcome<T>::from_error(error::deadline_exceeded).get();
  const time_point wanted = saturating_add(now, latency);
  const bool cut_by_deadline = ctx.deadline < wanted;
  auto timer = clock->make_timer(co_await asio::this_coro::executor);
  timer.expires_at(cut_by_deadline ? ctx.deadline : wanted);
  const auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable_t<Executor>{}));
  // A failed wait without a cancellation of the caller: the clock is gone.
  if (ec || cancellation.cancelled() != asio::cancellation_type::none)
    co_return outcome<T>::from_error(asio::error::operation_aborted).get();
  if (cut_by_deadline) co_return outcome<T>::from_error(error::deadline_exceeded).get();
  co_return co_await invoke_op(op, ctx);
}

template <class T, class Executor, class Op, class Held>
boost::asio::awaitable<T, Executor> chaos_call(Op op, Held held, context ctx) {
  using Stage = std::remove_cvref_t<decltype(deref(held))>;
  const Stage* stage = &deref(held);
  if (!stage->options().should_inject(ctx)) co_return co_await invoke_op(op, ctx);
  using fault_type = typename Stage::fault_type;
  const fault_type& fault = stage->fault();
  chaos_injection what{fault_type::kind, {}, {}, {}, ctx.attempt};
  if constexpr (fault_type::kind == chaos_fault::error) {
    what.error = fault.error;
  } else if constexpr (fault_type::kind == chaos_fault::exception) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(fault.exception)>, std::exception_ptr>) {
      what.exception = fault.exception;
    } else {
      what.exception = std::make_exception_ptr(fault.exception);
    }
  } else if constexpr (fault_type::kind == chaos_fault::latency) {
    what.latency = fault.latency;
  }
  stage->options().report(what);
  {
    event e{event_kind::fault_injected};
    e.attempt = ctx.attempt;
    e.error = what.error;
    e.delay = what.latency;
    ctx.report(e);
  }
  // The hook may have cancelled the caller: that is final. Yield first, with
  // throwing off: Asio 1.81's co_spawn posts once after a coroutine that
  // never suspended, and that post throws out of io_context::run once the
  // caller is cancelled.
  namespace asio = boost::asio;
  const auto cancellation = co_await asio::this_coro::cancellation_state;
  if (cancellation.cancelled() != asio::cancellation_type::none) {
    const bool throws = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await yield_once<Executor>();
    co_await asio::this_coro::throw_if_cancelled(throws);
    co_return outcome<T>::from_error(asio::error::operation_aborted).get();
  }
  // An injected outcome stands in for a call that never suspends here.
  if constexpr (fault_type::kind != chaos_fault::latency) {
    const bool throws = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await yield_after_refusal<Executor>(throws);
  }

  if constexpr (fault_type::kind == chaos_fault::error) {
    co_return outcome<T>::from_error(fault.error).get();
  } else if constexpr (fault_type::kind == chaos_fault::exception) {
    std::rethrow_exception(what.exception);
  } else if constexpr (fault_type::kind == chaos_fault::latency) {
    // In a frame of its own: calls that get no fault do not carry the timer.
    co_return co_await wait_then_call<T, Executor>(op, &fault.clock, fault.latency, ctx);
  } else {
    co_return stand_in<T>(fault);  // nothing, for a void op
  }
}

}  // namespace detail
}  // namespace resilience
