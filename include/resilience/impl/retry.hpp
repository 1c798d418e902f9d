// resilience/impl/retry.hpp — the retry loop: how an attempt is judged and
// told to the budget, the waits, and the coroutines of co_retry. Included at
// the end of resilience/retry.hpp, which declares what is defined here and
// states its contract; not to be included on its own.
#pragma once

namespace resilience {

namespace detail {

// Whether `o` ends the call: success or a permanent failure. Cancellation
// always ends it, whatever the classifier says.
template <class Policy, class T>
[[gnu::always_inline]] inline bool is_final(const Policy& policy, const outcome<T>& o, const context& ctx) {
  const error_code ec = o.error();
  if (is_cancellation(ec)) return true;
  if (ec == error::circuit_open) return !policy.waits_out_open_circuit();
  return !classify(policy.classifier(), o, ctx);
}

// is_final, telling the policy's budget how the attempt went: a transient
// failure, or not; not sent when refused here (reached_no_server()). A
// cancellation is not told.
template <class Policy, class T>
[[gnu::always_inline]] inline bool settle_attempt(const Policy& policy, const outcome<T>& o, const context& ctx,
                                                  bool first_attempt) {
  const bool final = is_final(policy, o, ctx);
  if (policy.budget().budget) {
    const error_code ec = o.error();
    if (!is_cancellation(ec))
      policy.budget().record(reached_no_server(ec) ? attempt_verdict::not_sent : verdict_of(o, !final), first_attempt);
  }
  return final;
}

// `window` as the nominal delay, that fraction of it as the jittered one.
inline delay with_window(duration window, double jittered_fraction) noexcept {
  return {window, duration(static_cast<duration::rep>(static_cast<double>(window.count()) * jittered_fraction))};
}
// `d` (nominal part positive) stretched or shrunk to a nominal `window`,
// its jittered part the same fraction of it: the jitter keeps its shape.
inline delay rescaled(delay d, duration window) noexcept {
  return with_window(window, static_cast<double>(d.actual.count()) / static_cast<double>(d.nominal.count()));
}

// retry_policy::fit_to_time_left: a backoff delay whose nominal part exceeds
// an equal share of the time left for the retries left (and the attempt
// after each) is scaled down, nominal and actual by one factor, so that its
// jitter still spreads clients over the share. backoff::decorrelated's draw
// is both its nominal and its actual delay: scaled, it would be the share
// itself for every client, so it is drawn again, uniformly in the share.
inline delay fit_to_time_left(delay d, duration left, std::uint32_t retries_left, const backoff& schedule,
                              const random_source& random) {
  const duration share = left / (static_cast<duration::rep>(retries_left) + 1);
  if (d.nominal <= share) return d;
  if (schedule.kind() == backoff::shape::decorrelated) return with_window(share, random.next_unit());
  return rescaled(d, share);
}

// retry_delay::after_then_backoff: `given`, then the schedule's delay on
// top, its window widened to at least half of `given` (by one factor, so its
// jitter keeps its shape): clients a server turned away together with one
// Retry-After come back spread over a good part of it, not over a schedule
// of a few milliseconds. The widening stops where the retry would no longer
// fit the time left.
inline delay spread_after(duration given, delay backoff, time_point give_up_at, time_point now) noexcept {
  duration window = std::max(backoff.nominal, given / 2);
  if (give_up_at != time_point::max() && give_up_at - now > given)
    window = std::max(backoff.nominal, std::min(window, give_up_at - now - given - duration(1)));
  if (window > backoff.nominal && backoff.nominal > duration::zero())
    backoff = rescaled(backoff, window);
  return {saturating_sum(given, backoff.nominal), saturating_sum(given, backoff.actual)};
}

// A retry the budget refused: the call ends with its last outcome (or the
// budget's own error). Out of line: the retries' coroutine stays small, and
// so does every unit that includes it.
template <class T, class Policy>
[[gnu::noinline]] void refuse_retry(const Policy& policy, const context& ctx, std::optional<outcome<T>>& last) {
  policy.notify_budget_refused(ctx.attempt, *last);
  ctx.report(event_about(event_kind::budget_refused, *last, ctx.attempt));
  if (policy.budget_refusal_is_error()) last.emplace(outcome<T>::from_error(error::retry_budget_exhausted));
}

// Everything after a transient failure: waits and further attempts. A
// coroutine of its own so that the success path's frame stays small; `ctx`
// and `last` live in the caller's frame, so this one holds no copy of them.
//
// Asio 1.81's co_spawn posts once at the end of a coroutine that never
// suspended, and that post throws out of io_context::run when the coroutine
// was cancelled meanwhile (say, by a hook or the op emitting the caller's
// signal). A call that ends as a cancellation therefore yields once first,
// with throwing switched off; `throws` is the setting to restore.
template <class T, class Executor, class Op, class Policy>
boost::asio::awaitable<T, Executor> retry_after_failure(Op& op, const Policy& policy, context& ctx,
                                                        std::optional<outcome<T>>& last, time_point give_up_at,
                                                        bool throws) {
  namespace asio = boost::asio;
  using clock_type = std::remove_cvref_t<decltype(policy.clock())>;
  const retry_options& options = policy.options();
  const auto cancellation = co_await asio::this_coro::cancellation_state;
  const auto cancelled = [&] { return cancellation.cancelled() != asio::cancellation_type::none; };

  delay_sequence delays{options.delays};
  bool aborted = false;
  for (;;) {
    if (cancelled()) {
      aborted = true;
      break;
    }
    if (ctx.attempt >= options.max_attempts) break;  // exhausted

    // No wait may end past the time limit or the deadline: give up now
    // instead, with the last outcome (deadline_exceeded if it has passed).
    delay next = delays.next(policy.random());
    const bool bounded = give_up_at != time_point::max();
    time_point now = bounded ? policy.clock().now() : time_point{};
    if (bounded && options.fit_to_time_left && options.max_attempts != unlimited_attempts && now < give_up_at)
      next = fit_to_time_left(next, give_up_at - now, options.max_attempts - ctx.attempt, options.delays,
                              policy.random());
    using delay_type = std::remove_cvref_t<decltype(policy.delay_generator())>;
    if constexpr (!requires { requires delay_type::is_default; }) {
      const retry_delay decision = policy.delay_generator()(*last, std::as_const(ctx));
      if (decision.decision() == retry_delay::kind::stop) break;
      if (decision.decision() != retry_delay::kind::backoff) {
        const duration given = decision.is_jittered() ? jitter_given(options.delays, decision.given(), policy.random())
                                                      : decision.given();
        if (decision.decision() == retry_delay::kind::pushback) {
          next = delay{decision.given(), given};
          delays.restart();
        } else {
          if (decision.decision() == retry_delay::kind::after) {
            next = delay{decision.given(), given};
          } else if (decision.decision() == retry_delay::kind::after_then_backoff) {
            next = spread_after(given, next, give_up_at, now);
          } else {
            next = delay{std::max(next.nominal, decision.given()), std::max(next.actual, given)};
          }
          delays.waited(next.actual);
        }
      }
    }
    if (!bounded && next.actual != duration::zero()) now = policy.clock().now();
    // A wait that would never end (duration::max(), an isolated breaker)
    // means "forever": give up now rather than sleep for centuries.
    if (next.actual != duration::zero() && saturating_add(now, next.actual) == time_point::max()) break;
    // A wait that ends at the deadline itself leaves the next attempt no
    // time at all: that is past it too. (The time limit allows it.)
    if (give_up_at != time_point::max() &&
        (next.actual > give_up_at - now || (ctx.has_deadline() && next.actual >= ctx.deadline - now))) {
      if (now >= ctx.deadline) last.emplace(outcome<T>::from_error(error::deadline_exceeded));
      break;
    }
    // Asked last, when nothing else stops the retry: a refusal is a retry
    // that would have happened. A budget that can tell now refuses before
    // the wait (asked as for the retry itself, so that it counts the
    // refusal, or takes the retry if it has room again); otherwise it is
    // asked when the wait ends.
    bool taken = false;
    if (!policy.budget().would_allow_retry()) {
      if (!policy.budget().allows_retry()) {
        refuse_retry(policy, ctx, last);
        break;
      }
      taken = true;
    }
    policy.notify_retry(retry_event<T>{ctx.attempt, options.max_attempts, *last, next.nominal, next.actual});
    ctx.report(event_about(event_kind::retry, *last, ctx.attempt, next.actual));
    // A hook may have cancelled the call itself.
    if (cancelled()) {
      aborted = true;
      break;
    }

    if (next.actual == duration::zero()) {
      co_await yield_once<Executor>();
    } else if constexpr (uses_timer_queue<clock_type, Executor>) {
      queued_sleep<Executor> sleep;
      co_await sleep.until(saturating_add(now, next.actual));
    } else {
      auto timer = policy.clock().make_timer(co_await asio::this_coro::executor);
      timer.expires_after(next.actual);
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable_t<Executor>{}));
    }
    // Either way, a cancellation during the wait ends the call.
    if (cancelled()) {
      aborted = true;
      break;
    }
    // The retry itself, as it is about to be sent: the budget bounds the
    // load when it lands (a Retry-After's wait may end in an outage).
    if (!taken && !policy.budget().allows_retry()) {
      refuse_retry(policy, ctx, last);
      break;
    }
    ++ctx.attempt;
    try {
      if constexpr (std::is_void_v<T>) {
        co_await invoke_op(op, ctx);
        last.emplace(outcome<T>::from_value({}));
      } else {
        // Named, so that the outcome made from it is no temporary of an
        // expression that suspends: it takes no room in the frame.
        T value = co_await invoke_op(op, ctx);
        last.emplace(outcome<T>::from_value(std::move(value)));
      }
    } catch (...) {
      last.emplace(outcome<T>::from_current_exception());
    }
    if (settle_attempt(policy, *last, ctx, false)) break;
  }

  if (aborted) {
    if (!last->cancelled()) last.emplace(outcome<T>::from_error(asio::error::operation_aborted));
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await yield_once<Executor>();
    co_await asio::this_coro::throw_if_cancelled(throws);
  }
  co_return std::move(*last).get();
}

// The context as the first attempt's classifier (or op) reads it.
template <class Policy>
[[gnu::always_inline]] inline void number_first_attempt(context& ctx, const Policy& policy) noexcept {
  ctx.attempt = 1;
  ctx.max_attempts = policy.options().max_attempts;
}

// The context, made if the call has none yet, as the first attempt's
// classifier (or op) reads it.
template <class Parent, class Anchor, class Policy>
[[gnu::always_inline]] inline void ready_context(Parent& parent, const Anchor& anchor, const Policy& policy) noexcept {
  make_context(parent);
  anchor.attach(context_in(parent));
  number_first_attempt(context_in(parent), policy);
}

// GCC 12 may take the frame's operator delete for a mismatch of its operator
// new once this coroutine's start is inlined (-Wmismatched-new-delete): both
// are Asio's frame allocator.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
template <class T, class Executor, class Op, class Holder, class Parent>
boost::asio::awaitable<T, Executor> retry_loop(Op op, Holder holder, Parent parent) {
  namespace asio = boost::asio;
  const auto& policy = deref(holder);
  // The attempt's number, for whoever reads the context: an op that takes
  // one sees it now; otherwise only the failure path's classifier can, and
  // a call without a parent makes its context only then.
  constexpr bool op_sees_context = std::is_invocable_v<Op&, const context&>;
  const clock_anchor<std::remove_cvref_t<decltype(policy.clock())>> anchor(policy.clock());
  if constexpr (op_sees_context) ready_context(parent, anchor, policy);

  // Asio throws from any co_await once the caller is cancelled, so every
  // await below is preceded by this check: it ends the call with
  // operation_aborted in T's own error channel instead.
  const auto cancellation = co_await asio::this_coro::cancellation_state;
  if (cancellation.cancelled() != asio::cancellation_type::none)
    co_return outcome<T>::from_error(asio::error::operation_aborted).get();
  // Read the clock only when a limit or a deadline needs it: the plain
  // success path stays free of it. `started` is read only under a limit.
  late<time_point> started;
  if (policy.options().time_limit != duration::max() || deadline_of(parent) != time_point::max()) {
    const time_point now = policy.clock().now();
    if (now >= deadline_of(parent)) co_return outcome<T>::from_error(error::deadline_exceeded).get();
    started.make(now);
  }

  // The first attempt, inline: on success this is all co_retry does, and
  // `first` is never touched.
  using classifier = typename std::remove_cvref_t<decltype(policy)>::classifier_type;
  late<std::optional<outcome<T>>> first;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await invoke_op(op, context_in(parent));
      if constexpr (judges_successes_as<classifier, false>) {
        policy.budget().record(attempt_verdict::success, true);
        co_return;
      }
      first.make(outcome<T>::from_value({}));
    } else {
      T value = co_await invoke_op(op, context_in(parent));
      if constexpr (judges_successes_as<classifier, false>) {
        if (!outcome_traits<T>::error(value).failed()) {
          policy.budget().record(attempt_verdict::success, true);
          co_return value;
        }
      }
      first.make(std::in_place, std::in_place, std::move(value));
    }
  } catch (...) {
    first.make(outcome<T>::from_current_exception());
  }
  const typename late<std::optional<outcome<T>>>::owner first_made{first.value};
  if constexpr (!op_sees_context) ready_context(parent, anchor, policy);
  context& ctx = context_in(parent);
  if (settle_attempt(policy, *first.value, ctx, true)) co_return take(std::move(*first.value));
  // The op, or a hook inside it, may have cancelled the call: awaiting the
  // rest must not throw then, it ends the call as a cancellation itself.
  bool throws = true;
  if (cancellation.cancelled() != asio::cancellation_type::none) {
    throws = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
  }
  // No wait of the call ends past this.
  const duration time_limit = policy.options().time_limit;
  const time_point give_up_at =
      time_limit != duration::max() ? std::min(saturating_add(started.value, time_limit), ctx.deadline)
                                    : ctx.deadline;
  co_return co_await retry_after_failure<T, Executor>(op, policy, ctx, first.value, give_up_at, throws);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace detail

}  // namespace resilience

namespace resilience {

template <class Classifier, class OnRetry, class Clock, class Delay>
template <class T>
void basic_retry_policy<Classifier, OnRetry, Clock, Delay>::notify_budget_refused(std::uint32_t attempt,
                                                                                  const outcome<T>& last) const {
  if (!listeners_) return;
  const std::string failure = detail::describe_outcome(last);
  if (listeners_->logger) listeners_->logger(detail::format_budget_line(attempt, options_.max_attempts, failure));
  if (listeners_->on_budget_refused)
    listeners_->on_budget_refused(budget_refusal{attempt, options_.max_attempts, failure});
}

template <class Classifier, class OnRetry, class Clock, class Delay>
template <class T>
void basic_retry_policy<Classifier, OnRetry, Clock, Delay>::notify_retry(const retry_event<T>& e) const {
  on_retry_(e);
  if (listeners_ && listeners_->logger) {
    listeners_->logger(detail::format_retry_line(e.attempt, e.max_attempts, detail::describe_outcome(e.result), e.backoff,
                                      e.delay));
  }
}

namespace detail {
// co_retry's two forms: Parent is a context or no_parent.
template <class Op, class Policy, class Parent>
auto start_retry(Op op, Policy&& policy, const Parent& parent) {
  using P = std::remove_cvref_t<Policy>;
  using T = op_value_t<Op>;
  using E = op_executor_t<Op>;
  if constexpr (is_reference_wrapper<P>) {
    // std::cref(policy): referred to, so it must outlive the call.
    using Referred = std::remove_cv_t<typename P::type>;
    return retry_loop<T, E, Op, const Referred*, Parent>(std::move(op), &policy.get(), parent);
  } else {
    // Copied (or moved) into the call: an awaitable that outlives a helper's
    // local policy still has its own.
    if constexpr (std::is_lvalue_reference_v<Policy> && !std::is_copy_constructible_v<P>) {
      return retry_loop<T, E, Op, const P*, Parent>(std::move(op), &policy, parent);  // see Lifetimes
    } else if constexpr (std::is_lvalue_reference_v<Policy>) {
      return retry_loop<T, E, Op, copied_into_frame<P>, Parent>(std::move(op), copied_into_frame<P>(policy), parent);
    } else {
      return retry_loop<T, E, Op, P, Parent>(std::move(op), P(std::move(policy)), parent);
    }
  }
}
}  // namespace detail

// co_retry(op, policy, parent) and co_retry(op, policy): see the top of retry.hpp.
template <awaitable_op Op, class Policy>
auto co_retry(Op op, Policy&& policy, const context& parent) {
  return detail::start_retry(std::move(op), std::forward<Policy>(policy), parent);
}
template <awaitable_op Op, class Policy>
auto co_retry(Op op, Policy&& policy) {
  return detail::start_retry(std::move(op), std::forward<Policy>(policy), detail::no_parent{});
}

}  // namespace resilience
