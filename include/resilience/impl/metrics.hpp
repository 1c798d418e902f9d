// resilience/impl/metrics.hpp — the metered stage's coroutine. Included at
// the end of resilience/metrics.hpp, which declares it and states the
// contract; not to be included on its own.
#pragma once

namespace resilience::detail {

template <class T, class Executor, class Op, class Clock, class Failure>
boost::asio::awaitable<T, Executor> metered_call(Op op, const duration_series* series, Clock clock, Failure failure,
                                                 context ctx) {
  const std::size_t slot = series->slot_of(ctx.attempt);
  const time_point start = clock.now();
  try {
    if constexpr (std::is_void_v<T>) {
      co_await invoke_op(op, ctx);
      series->record(slot, call_outcome::success, clock.now() - start);
      co_return;
    } else {
      T value = co_await invoke_op(op, ctx);
      call_outcome how = value_outcome(value);
      if constexpr (!std::is_same_v<Failure, no_failure_rule>) {
        if (how == call_outcome::success) {
          // The classifier reads an outcome: the value goes in and comes back out.
          outcome<T> o = outcome<T>::from_value(std::move(value));
          if (classify(failure, o, ctx)) how = call_outcome::error;
          value = std::move(o).get();
        }
      }
      series->record(slot, how, clock.now() - start);
      co_return std::move(value);
    }
  } catch (...) {
    series->record(slot, current_exception_outcome(), clock.now() - start);
    throw;
  }
}

}  // namespace resilience::detail
