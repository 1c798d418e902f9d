// resilience/hedging.hpp — more than one attempt in flight, the first answer wins.
//
//   using namespace std::chrono_literals;
//   const auto hedged = resilience::hedging_policy{}
//                           .max_attempts(3)       // the first call and up to 2 hedges
//                           .delay(40ms)           // a hedge when no answer came for 40 ms (about the p95)
//                           .non_fatal_if(resilience::retry_on_errors{boost::asio::error::connection_reset});
//   auto row = co_await hedged([&](const resilience::context& ctx) { return db.async_query(sql); });
//   // as a stage: resilience::pipeline(resilience::deadline_stage(1s), hedged, resilience::timeout(300ms))
//
// gRFC A6 hedging. The op starts; each time delay() passes without an
// outcome that ends the call, one more attempt starts beside the running
// ones, up to max_attempts() in all (delay 0: all of them at once). The
// first outcome that is not a non-fatal failure ends the call: a success, or
// a failure the classifier does not call non-fatal (a cancellation of the
// op's own is never non-fatal). A non-fatal failure starts the next hedge at
// once, not after the delay; when every attempt failed non-fatally the call
// ends with the last failure. The attempts still running are then cancelled
// (terminal cancellation) and waited for before the call returns: nothing is
// left behind, and every attempt completes exactly once.
//
// Each attempt gets its own context: `attempt` is its number (1 for the
// first), `max_attempts` the policy's. With properties attached (context::with),
// each attempt marks its own copy of them, taken when the call starts; the
// copy of the attempt whose outcome the call returns replaces the caller's at
// the end. The value types of such properties must be copyable.
//
// No hedge starts:
//   - at or after the context's deadline. The call itself is not ended at the
//     deadline here: put a deadline stage outside (it cancels the attempts,
//     and the call ends with deadline_exceeded);
//   - when the retry budget refuses it (budget(b), retry_budget.hpp): asked
//     before each hedge, told the outcome of each attempt not cancelled; a
//     refusal ends hedging for the call, the attempts running go on;
//   - when the delay generator says stop(). It is asked, like retry's, after
//     each non-fatal failure, with that outcome and the attempt's context:
//     backoff() starts the next hedge at once, after(d) and at_least(d) start
//     it d from now (a server's pushback, gRFC A6's grpc-retry-pushback-ms;
//     jitter is not applied), stop() starts none any more. The hedges after
//     it follow delay() from there.
//
// Cancellation of the awaiting coroutine cancels every running attempt and
// ends the call, once all of them have completed, with operation_aborted (in
// T's error channel, or thrown as system_error when T has none).
//
// Events: on_hedge before each hedge starts (its number, the time since the
// call began), on_settled once at the end (the attempt whose outcome the
// call returns, 0 if none; attempts started; time taken). What a hook or the
// delay generator throws ends the call with that exception, the running
// attempts cancelled and awaited first.
//
// A first attempt that answers before the delay costs about what a timeout
// stage does: the attempt runs as a child (co_spawn) and the hedge's time is a
// node in the context's shared timer queue, armed only if the attempt is
// still running once co_spawn has run it up to its first suspension. The
// attempts and the hedge timer run on the caller's executor; on a
// multi-threaded io_context, call from a strand.
#pragma once

#include <resilience/classifier.hpp>
#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/detail/parked_joins.hpp>
#include <resilience/detail/timer_queue.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>
#include <resilience/properties.hpp>
#include <resilience/retry.hpp>
#include <resilience/detail/with_option.hpp>
#include <resilience/stage.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace resilience {

// Before a hedge starts.
struct hedge_event {
  std::uint32_t attempt;  // the hedge's number: 2 for the first hedge
  duration elapsed;       // since the call began
};

// Once per call, as it ends.
struct hedge_summary {
  std::uint32_t winner;   // the attempt whose outcome the call returns; 0 if none (cancelled, a hook threw)
  std::uint32_t started;  // attempts started, the first included
  duration elapsed;
};

// gRFC A6's own cap. More attempts at once would multiply a dependency's
// load for little gain, and each one's state is kept in the call's frame,
// which must stay small enough for Asio to recycle it.
inline constexpr std::uint32_t max_hedged_attempts = 5;

namespace detail {
template <class T, class Executor, class Op, class Policy>
boost::asio::awaitable<T, Executor> hedged_call(Op op, const Policy* policy, context ctx);
template <class T, class Executor, class Op, class Held>
boost::asio::awaitable<T, Executor> hedged_call_owning(Op op, Held policy, context ctx) {
  co_return co_await hedged_call<T, Executor>(std::move(op), &deref(policy), ctx);
}
// The stage's call: a call referring to the policy runs in one frame.
template <class T, class Executor, class Op, class Held>
constexpr auto hedged_call_for() {
  if constexpr (std::is_pointer_v<Held>) {
    return &hedged_call<T, Executor, Op, std::remove_cvref_t<std::remove_pointer_t<Held>>>;
  } else {
    return &hedged_call_owning<T, Executor, Op, Held>;
  }
}
}  // namespace detail

template <class Classifier = any_failure, class Clock = steady_clock, class Delay = backoff_delay>
class basic_hedging_policy : public value_stage_base<basic_hedging_policy<Classifier, Clock, Delay>> {
  template <class, class, class>
  friend class basic_hedging_policy;

 public:
  using classifier_type = Classifier;
  using clock_type = Clock;
  using delay_generator_type = Delay;
  using hedge_hook = std::function<void(const hedge_event&)>;
  using settled_hook = std::function<void(const hedge_summary&)>;

  // For pipeline(): no hedge starts past the context's deadline.
  static constexpr bool respects_deadline = true;

  basic_hedging_policy() = default;

  // Attempts in all, the first included: 1 (no hedging) to
  // max_hedged_attempts (5); 2 by default.
  basic_hedging_policy max_attempts(std::uint32_t n) const {
    if (n < 1 || n > max_hedged_attempts)
      throw std::invalid_argument("hedging_policy::max_attempts: must be in [1, 5]");
    return resilience::detail::with_option(*this, &basic_hedging_policy::max_attempts_, n);
  }
  // Time without a final outcome before the next hedge starts: 0 (every
  // attempt at once) or more; 100 ms by default.
  basic_hedging_policy delay(duration d) const {
    if (d < duration::zero()) throw std::invalid_argument("hedging_policy::delay: must not be negative");
    return resilience::detail::with_option(*this, &basic_hedging_policy::delay_, d);
  }
  // Which failures are non-fatal (gRFC A6's nonFatalStatusCodes): a
  // classifier over `const outcome<T>&` (and the attempt's context).
  // Default: any failure but a cancellation.
  template <class C>
  basic_hedging_policy<C, Clock, Delay> non_fatal_if(C c) const {
    return rebind<C, Clock, Delay>(std::move(c), clock_, delay_gen_);
  }
  // After a non-fatal failure: `f(const outcome<T>&, const context&)`
  // returns a retry_delay (see the top of this header).
  template <class F>
  basic_hedging_policy<Classifier, Clock, F> delay_generator(F f) const {
    return rebind<Classifier, Clock, F>(classifier_, clock_, std::move(f));
  }
  template <resilience::clock K>
  basic_hedging_policy<Classifier, K, Delay> clock(K k) const {
    return rebind<Classifier, K, Delay>(classifier_, std::move(k), delay_gen_);
  }
  // Asked before each hedge, told each attempt's outcome (retry_budget.hpp).
  // Shared: it must outlive the policy.
  template <retry_budget B>
  basic_hedging_policy budget(B& budget) const {
    return resilience::detail::with_option(*this, &basic_hedging_policy::budget_, detail::budget_ref::to(budget));
  }
  // The policy refers to the budget: a temporary one would be gone.
  template <class B>
  basic_hedging_policy budget(B&& budget) const
    requires(!std::is_lvalue_reference_v<B>)
  = delete;

  // Run on the caller's executor; with a shared policy they must be
  // thread-safe.
  basic_hedging_policy on_hedge(hedge_hook h) const {
    return resilience::detail::with_option(*this, &basic_hedging_policy::on_hedge_, std::move(h));
  }
  basic_hedging_policy on_settled(settled_hook h) const {
    return resilience::detail::with_option(*this, &basic_hedging_policy::on_settled_, std::move(h));
  }

  std::uint32_t max_attempts() const noexcept { return max_attempts_; }
  duration delay() const noexcept { return delay_; }
  const Classifier& classifier() const noexcept { return classifier_; }
  const Clock& clock() const noexcept { return clock_; }
  const Delay& delay_generator() const noexcept { return delay_gen_; }
  const detail::budget_ref& budget() const noexcept { return budget_; }
  hedge_hook on_hedge() const { return on_hedge_.function(); }
  settled_hook on_settled() const { return on_settled_.function(); }
  // What a call runs: the hooks its copies share.
  const detail::shared_hook<void(const hedge_event&)>& shared_on_hedge() const noexcept { return on_hedge_; }
  const detail::shared_hook<void(const hedge_summary&)>& shared_on_settled() const noexcept { return on_settled_; }

  // The stage interface is value_stage_base's: run(op) holds a copy of this
  // policy (a temporary one is moved in), so the awaitable may outlive it;
  // run_referenced(op), what a pipeline holding the policy does, refers to it.

 private:
  friend value_stage_base<basic_hedging_policy>;
  template <class T, class Executor, class Op, class Held>
  static constexpr auto call = detail::hedged_call_for<T, Executor, Op, Held>();
  basic_hedging_policy(Classifier c, Clock k, Delay d)
      : classifier_(std::move(c)), clock_(std::move(k)), delay_gen_(std::move(d)) {}

  template <class C, class K, class D>
  basic_hedging_policy<C, K, D> rebind(C c, K k, D d) const {
    basic_hedging_policy<C, K, D> p(std::move(c), std::move(k), std::move(d));
    p.max_attempts_ = max_attempts_;
    p.delay_ = delay_;
    p.budget_ = budget_;
    p.on_hedge_ = on_hedge_;
    p.on_settled_ = on_settled_;
    return p;
  }

  std::uint32_t max_attempts_ = 2;
  duration delay_ = std::chrono::milliseconds(100);
  detail::budget_ref budget_;
  // Shared by the copies each call makes.
  detail::shared_hook<void(const hedge_event&)> on_hedge_;
  detail::shared_hook<void(const hedge_summary&)> on_settled_;
  [[no_unique_address]] Classifier classifier_{};
  [[no_unique_address]] Clock clock_{};
  [[no_unique_address]] Delay delay_gen_{};
};

using hedging_policy = basic_hedging_policy<>;

}  // namespace resilience

#include <resilience/detail/hedge_join.hpp>
#include <resilience/impl/hedging.hpp>
