// resilience/retry.hpp — co_retry: retry an awaitable operation with backoff.
//
//   using namespace std::chrono_literals;
//   const auto policy = resilience::retry_policy{}
//                           .max_attempts(5)
//                           .backoff(resilience::backoff::exponential(100ms, 2.0, 5s))
//                           .jitter(resilience::jitter::full)
//                           .time_limit(20s);
//   int rows = co_await resilience::co_retry([&] { return db.async_count(); }, policy);
//
// `op` is a callable that returns `asio::awaitable<T>`, taking nothing or a
// `const resilience::context&`. co_retry returns the op's T.
//
// Attempts, not retries: max_attempts(5) calls op at most 5 times (1 attempt
// and up to 4 retries). A policy stops at the first of:
//   - an outcome its classifier does not call transient (success included):
//     returned as is;
//   - max_attempts reached: the last attempt's own outcome is returned, its
//     exception rethrown as is or its error value returned as is;
//   - the time limit, or the deadline of an enclosing deadline stage
//     (context::deadline): if the next delay would end past it, co_retry gives
//     up at once with the last outcome instead of sleeping; once the deadline
//     has passed, it ends with error::deadline_exceeded;
//   - a circuit breaker's rejection (error::circuit_open), unless the policy
//     was told to wait_out_open_circuit(breaker);
//   - cancellation of the awaiting coroutine (its cancellation slot): co_retry
//     ends at once with operation_aborted (in T's error channel, or thrown as
//     boost::system::system_error when T has none), and calls op no more. A
//     cancellation is never retried, whatever the classifier says.
//
// Waits use a timer of the policy's clock, bound to the coroutine's
// cancellation slot. A zero delay yields (post) instead of arming a timer.
//
// The policy is a value type, validated as it is built (std::invalid_argument
// names the field). It may be shared by any number of concurrent calls on any
// threads; an lvalue policy is referenced, not copied, so it must outlive
// the calls that use it. An rvalue policy is moved into the call.
#pragma once

#include <resilience/backoff.hpp>
#include <resilience/classifier.hpp>
#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/detail/sleep.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>
#include <resilience/random.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <concepts>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace resilience {

// What on_retry hooks receive, once per retry, before the wait.
template <class T>
struct retry_event {
  std::uint32_t attempt;       // the attempt that just failed, 1-based
  std::uint32_t max_attempts;  // the policy's limit
  const outcome<T>& result;    // what that attempt produced
  duration backoff;            // the delay before jitter
  duration delay;              // the delay after jitter: what is waited
};

struct no_retry_hook {
  template <class T>
  void operator()(const retry_event<T>&) const noexcept {}
};

// The validated numbers of a retry policy.
struct retry_options {
  std::uint32_t max_attempts = 3;
  backoff delays = backoff::exponential(std::chrono::milliseconds(100), 2.0, std::chrono::seconds(10))
                       .with_jitter(jitter::full);
  duration time_limit = duration::max();  // max() means none

  friend bool operator==(const retry_options&, const retry_options&) = default;
};

namespace detail {

// Compiled in lib/: the text of a log line, and a failure's description.
std::string describe_failure(const std::exception_ptr& ex, const error_code& ec);
std::string format_retry_line(std::uint32_t attempt, std::uint32_t max_attempts, std::string_view failure,
                              duration backoff, duration delay);

template <class P>
const P& deref(const P* p) noexcept {
  return *p;
}
template <class P>
const P& deref(const P& p) noexcept {
  return p;
}

template <class T, class Executor, class Op, class Holder>
boost::asio::awaitable<T, Executor> retry_loop(Op op, Holder holder, context ctx);

}  // namespace detail

template <class Classifier = retry_any_failure, class OnRetry = no_retry_hook, class Clock = steady_clock>
class basic_retry_policy {
  template <class, class, class>
  friend class basic_retry_policy;

 public:
  using classifier_type = Classifier;
  using clock_type = Clock;
  using logger_type = std::function<void(std::string_view)>;

  basic_retry_policy() = default;

  // For pipeline(): no wait of this stage ends past the context's deadline.
  static constexpr bool respects_deadline = true;

  // -- building (each returns a new policy; the old one is unchanged) --

  // Total calls of op, the first one included. At least 1.
  basic_retry_policy max_attempts(std::uint32_t n) const {
    if (n == 0)
      throw std::invalid_argument("retry_policy: max_attempts must be at least 1 (it counts the first attempt)");
    auto p = *this;
    p.options_.max_attempts = n;
    return p;
  }

  // The delays between attempts: replaces the whole schedule, its jitter
  // included (a backoff made without with_jitter() has none).
  basic_retry_policy backoff(const resilience::backoff& b) const {
    auto p = *this;
    p.options_.delays = b;
    return p;
  }

  // Changes only the jitter of the current schedule.
  basic_retry_policy jitter(resilience::jitter j) const {
    auto p = *this;
    p.options_.delays = options_.delays.with_jitter(j);
    return p;
  }

  // Stops retrying, never an attempt: no wait starts that would end more
  // than `limit` after the call began (co_retry gives up with the last
  // outcome instead), as tenacity's stop_after_delay. An attempt in progress
  // runs to its end and its outcome stands, so a call may last longer than
  // `limit`. For a bound on the whole call, attempts included (Polly's outer
  // timeout), put a deadline_stage outside the retry. Must be positive.
  basic_retry_policy time_limit(duration limit) const {
    if (limit <= duration::zero()) throw std::invalid_argument("retry_policy: time_limit must be positive");
    auto p = *this;
    p.options_.time_limit = limit;
    return p;
  }

  basic_retry_policy random(random_source r) const {
    auto p = *this;
    p.random_ = std::move(r);
    return p;
  }

  // A line per retry, formatted with fmt: the failure, the attempt, the delay.
  basic_retry_policy logger(logger_type log) const {
    auto p = *this;
    p.logger_ = std::move(log);
    return p;
  }

  // By default a circuit breaker's rejection (error::circuit_open) ends the
  // call: retrying it only waits on a dependency known to be down. With
  // this, it is retried like a transient failure, after waiting out the time
  // `breaker` says is left before it lets a probe through, instead of the
  // policy's own delay. `breaker` is anything with
  // `duration time_until_probe() const` and must outlive the policy.
  template <class Breaker>
  basic_retry_policy wait_out_open_circuit(const Breaker& breaker) const
    requires requires { { breaker.time_until_probe() } -> std::convertible_to<duration>; }
  {
    auto p = *this;
    p.open_circuit_ = {&breaker, [](const void* b) -> duration {
                         return static_cast<const Breaker*>(b)->time_until_probe();
                       }};
    return p;
  }

  // The policy refers to `breaker`: a temporary one would be gone.
  template <class Breaker>
  basic_retry_policy wait_out_open_circuit(const Breaker&&) const = delete;

  // Which outcomes are transient. Cancellation never is, whatever `c` says.
  template <class C>
  basic_retry_policy<C, OnRetry, Clock> retry_if(C c) const {
    return rebind<C, OnRetry, Clock>(std::move(c), on_retry_, clock_);
  }

  // Called before every wait with a retry_event<T>. Runs on the calling
  // coroutine's executor; with a shared policy it must be thread-safe.
  template <class H>
  basic_retry_policy<Classifier, H, Clock> on_retry(H hook) const {
    return rebind<Classifier, H, Clock>(classifier_, std::move(hook), clock_);
  }

  template <resilience::clock K>
  basic_retry_policy<Classifier, OnRetry, K> clock(K k) const {
    return rebind<Classifier, OnRetry, K>(classifier_, on_retry_, std::move(k));
  }

  // -- reading --

  const retry_options& options() const noexcept { return options_; }
  const Classifier& classifier() const noexcept { return classifier_; }
  const Clock& clock() const noexcept { return clock_; }
  const random_source& random() const noexcept { return random_; }

  // -- running --

  // The stage interface: run op under this policy inside a parent context.
  // The awaitable refers to this policy, which must outlive it; a temporary
  // policy is moved into the call instead.
  template <class Op>
  auto run(Op op, const context& parent = {}) const& {
    return detail::retry_loop<detail::op_value_t<Op>, detail::op_executor_t<Op>>(std::move(op), this, parent);
  }
  template <class Op>
  auto run(Op op, const context& parent = {}) && {
    return detail::retry_loop<detail::op_value_t<Op>, detail::op_executor_t<Op>>(std::move(op), std::move(*this),
                                                                                 parent);
  }

  bool waits_out_open_circuit() const noexcept { return open_circuit_.breaker != nullptr; }
  duration open_circuit_time_left() const { return open_circuit_.time_left(open_circuit_.breaker); }

  // Called by retry_loop, once per retry.
  template <class T>
  void notify_retry(const retry_event<T>& e) const {
    on_retry_(e);
    if (logger_) {
      logger_(detail::format_retry_line(e.attempt, e.max_attempts,
                                        detail::describe_failure(e.result.exception(), e.result.error()),
                                        e.backoff, e.delay));
    }
  }

 private:
  // Where a circuit_open wait comes from: only read after a rejection.
  struct open_circuit_source {
    const void* breaker = nullptr;
    duration (*time_left)(const void*) = nullptr;
  };

  basic_retry_policy(retry_options o, random_source r, logger_type l, open_circuit_source b, Classifier c,
                     OnRetry h, Clock k)
      : options_(std::move(o)), random_(std::move(r)), logger_(std::move(l)), open_circuit_(b),
        classifier_(std::move(c)), on_retry_(std::move(h)), clock_(std::move(k)) {}

  template <class C, class H, class K>
  basic_retry_policy<C, H, K> rebind(C c, H h, K k) const {
    return basic_retry_policy<C, H, K>(options_, random_, logger_, {open_circuit_.breaker, open_circuit_.time_left},
                                       std::move(c), std::move(h), std::move(k));
  }

  retry_options options_;
  random_source random_;
  logger_type logger_;
  open_circuit_source open_circuit_;
  [[no_unique_address]] Classifier classifier_{};
  [[no_unique_address]] OnRetry on_retry_{};
  [[no_unique_address]] Clock clock_{};
};

using retry_policy = basic_retry_policy<>;

// Runs op under the default policy, which the call owns.
template <class Op>
auto co_retry(Op op) {
  return detail::retry_loop<detail::op_value_t<Op>, detail::op_executor_t<Op>>(std::move(op), retry_policy{},
                                                                               context{});
}

// Runs op under policy. See the top of this header.
template <class Op, class Policy>
auto co_retry(Op op, Policy&& policy, const context& parent = {}) {
  using P = std::remove_cvref_t<Policy>;
  using T = detail::op_value_t<Op>;
  using E = detail::op_executor_t<Op>;
  if constexpr (std::is_lvalue_reference_v<Policy>) {
    return detail::retry_loop<T, E>(std::move(op), static_cast<const P*>(&policy), parent);
  } else {
    return detail::retry_loop<T, E>(std::move(op), P(std::move(policy)), parent);
  }
}

namespace detail {

// Whether `o` ends the call: success or a permanent failure. Cancellation
// always ends it, whatever the classifier says.
template <class Policy, class T>
[[gnu::always_inline]] inline bool is_final(const Policy& policy, const outcome<T>& o) {
  const error_code ec = o.error();
  if (is_cancellation(ec)) return true;
  if (ec == error::circuit_open) return !policy.waits_out_open_circuit();
  return !policy.classifier()(o);
}

// Everything after a transient failure: waits and further attempts. A
// coroutine of its own so that the success path's frame stays small; `last`
// lives in the caller's frame, so this one holds no copy of an outcome.
//
// Asio 1.81's co_spawn posts once at the end of a coroutine that never
// suspended, and that post throws out of io_context::run when the coroutine
// was cancelled meanwhile (say, by a hook or the op emitting the caller's
// signal). A call that ends as a cancellation therefore yields once first,
// with throwing switched off; `throws` is the setting to restore.
template <class T, class Executor, class Op, class Policy>
boost::asio::awaitable<T, Executor> retry_after_failure(Op& op, const Policy& policy, context ctx,
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
    if (policy.waits_out_open_circuit() && last->error() == error::circuit_open) {
      // The breaker knows when it will let a probe through; with no time
      // left (half-open, probes all taken) the policy's own delay stands. A
      // breaker held open (isolated) will not say: waiting is pointless.
      // "Forever" (an isolated breaker, an endless break) ends the call now.
      const duration left = policy.open_circuit_time_left();
      if (saturating_add(policy.clock().now(), left) == time_point::max()) break;
      if (left > duration::zero()) next = {left, left};
    }
    const bool bounded = give_up_at != time_point::max();
    const time_point now = bounded || next.actual != duration::zero() ? policy.clock().now() : time_point{};
    if (bounded && next.actual > give_up_at - now) {
      if (now >= ctx.deadline) last.emplace(outcome<T>::from_error(error::deadline_exceeded));
      break;
    }
    policy.notify_retry(retry_event<T>{ctx.attempt, options.max_attempts, *last, next.nominal, next.actual});
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
    ++ctx.attempt;
    try {
      if constexpr (std::is_void_v<T>) {
        co_await invoke_op(op, ctx);
        last.emplace(outcome<T>::from_value({}));
      } else {
        last.emplace(outcome<T>::from_value(co_await invoke_op(op, ctx)));
      }
    } catch (...) {
      last.emplace(outcome<T>::from_current_exception());
    }
    if (is_final(policy, *last)) break;
  }

  if (aborted) {
    if (!last->cancelled()) last.emplace(outcome<T>::from_error(asio::error::operation_aborted));
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await yield_once<Executor>();
    co_await asio::this_coro::throw_if_cancelled(throws);
  }
  co_return std::move(*last).get();
}

template <class T, class Executor, class Op, class Holder>
boost::asio::awaitable<T, Executor> retry_loop(Op op, Holder holder, context ctx) {
  namespace asio = boost::asio;
  const auto& policy = deref(holder);
  const retry_options& options = policy.options();
  ctx.attempt = 1;
  ctx.max_attempts = options.max_attempts;

  // Asio throws from any co_await once the caller is cancelled, so every
  // await below is preceded by this check: it ends the call with
  // operation_aborted in T's own error channel instead.
  const auto cancellation = co_await asio::this_coro::cancellation_state;
  const auto aborted = [] { return outcome<T>::from_error(asio::error::operation_aborted).get(); };
  if (cancellation.cancelled() != asio::cancellation_type::none) co_return aborted();
  // Read the clock only when a limit or a deadline needs it: the plain
  // success path stays free of it.
  time_point give_up_at = time_point::max();
  if (options.time_limit != duration::max() || ctx.has_deadline()) {
    const time_point now = policy.clock().now();
    if (now >= ctx.deadline) co_return outcome<T>::from_error(error::deadline_exceeded).get();
    give_up_at = std::min(saturating_add(now, options.time_limit), ctx.deadline);
  }

  // The first attempt, inline: on success this is all co_retry does.
  using classifier = typename std::remove_cvref_t<decltype(policy)>::classifier_type;
  std::optional<outcome<T>> first;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await invoke_op(op, ctx);
      if constexpr (ignores_successes<classifier>) co_return;
      first.emplace(outcome<T>::from_value({}));
    } else {
      T value = co_await invoke_op(op, ctx);
      if constexpr (ignores_successes<classifier>) {
        if (!outcome_traits<T>::error(value).failed()) co_return value;
      }
      first.emplace(outcome<T>::from_value(std::move(value)));
    }
  } catch (...) {
    first.emplace(outcome<T>::from_current_exception());
  }
  if (is_final(policy, *first)) co_return std::move(*first).get();
  // The op, or a hook inside it, may have cancelled the call: awaiting the
  // rest must not throw then, it ends the call as a cancellation itself.
  bool throws = true;
  if (cancellation.cancelled() != asio::cancellation_type::none) {
    throws = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
  }
  co_return co_await retry_after_failure<T, Executor>(op, policy, ctx, first, give_up_at, throws);
}

}  // namespace detail
}  // namespace resilience
