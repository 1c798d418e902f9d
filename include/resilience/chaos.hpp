// resilience/chaos.hpp — faults injected on purpose, to see how the rest copes.
//
//   using namespace std::chrono_literals;
//   resilience::chaos_switch chaos_on{false};             // flipped at run time, e.g. from an admin endpoint
//   const auto flaky = resilience::chaos_error(boost::asio::error::connection_reset,
//                                              resilience::chaos_options{}
//                                                  .rate(0.05)              // 5% of the calls...
//                                                  .enabled_by(chaos_on)    // ...while the switch is on
//                                                  .random(resilience::random_source::seeded(7)));
//   const auto slow = resilience::chaos_latency(300ms, resilience::chaos_options{}.rate(0.01).enabled_by(chaos_on));
//   // innermost, where the dependency would fail:
//   const auto call = resilience::pipeline(retry_policy, attempt_timeout, slow, flaky);
//
// Four faults, one per stage, each decided before the op is called:
//   chaos_error(ec)        the call ends with ec (in T's error channel, or
//                          thrown as system_error when T has none); op not called
//   chaos_outcome(v)       the call returns v (chaos_outcome() for a void op);
//                          op not called
//   chaos_exception(e)     the call throws a copy of e; op not called
//   chaos_latency(d)       the call waits d on the stage's clock, then calls
//                          the op. The wait ends early on cancellation of the
//                          caller (operation_aborted, op not called) and at
//                          the context's deadline (deadline_exceeded, op not
//                          called). In a pipeline it waits on the pipeline's
//                          clock (pipeline(...).clock(c)).
//
// When: a call gets the fault when the switch (if any) is on, the predicate
// (if any) says yes for its context, and a draw from the random source falls
// under the rate — in that order, each asked only if the one before said yes.
// The rate is 1 unless set (every call, if nothing else says no); at 0
// nothing is injected and nothing asked. A draw is made only for a rate
// strictly between 0 and 1, so a seeded random source gives the same
// sequence of injections for the same sequence of calls.
//
// The switch is the run-time control: one small thread-safe object that
// stages refer to (so it must outlive them), read with one relaxed atomic
// load per call. Turned off, a stage calls the op and does nothing else: no
// predicate, no draw, no allocation.
//
// on_injected runs once per injection, before the fault takes effect, with
// what was injected; what it throws becomes the call's outcome, and a hook
// that cancels the caller ends the call with operation_aborted. Hooks and
// predicates of a stage shared between threads must be thread-safe.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/detail/sleep.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>
#include <resilience/random.hpp>
#include <resilience/stage.hpp>
#include <resilience/detail/with_option.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace resilience {

// Turns chaos on and off at run time for every stage that refers to it.
class chaos_switch {
 public:
  explicit chaos_switch(bool enabled) noexcept : enabled_(enabled) {}
  chaos_switch(const chaos_switch&) = delete;
  chaos_switch& operator=(const chaos_switch&) = delete;

  void enable() noexcept { set(true); }
  void disable() noexcept { set(false); }
  // Relaxed: the flag guards no other data; a call that starts after the
  // change on another thread sees it, one already deciding may not.
  void set(bool on) noexcept { enabled_.store(on, std::memory_order_relaxed); }
  bool enabled() const noexcept { return enabled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> enabled_;
};

enum class chaos_fault : std::uint8_t { error, outcome, exception, latency };

// What on_injected receives: the fault, and what it carries.
struct chaos_injection {
  chaos_fault fault;
  error_code error;              // for chaos_fault::error
  std::exception_ptr exception;  // for chaos_fault::exception: a copy of what is thrown
  duration latency{};            // for chaos_fault::latency: the wait, before the deadline shortens it
  std::uint32_t attempt;         // the context's attempt number
};

class chaos_options {
 public:
  chaos_options() = default;

  // Share of the calls that get the fault, in [0, 1]; 1 by default.
  chaos_options rate(double r) const;
  // Asked with the call's context; false spares the call. Must not be empty.
  chaos_options inject_if(std::function<bool(const context&)> predicate) const;
  // Where the draws come from; the per-thread source by default.
  chaos_options random(random_source source) const;
  // The run-time switch, referred to: it must outlive every stage built
  // with these options.
  chaos_options enabled_by(const chaos_switch& s) const {
    return resilience::detail::with_option(*this, &chaos_options::switch_, &s);
  }
  chaos_options enabled_by(const chaos_switch&&) const = delete;
  // Once per injection, on the calling thread. An empty function: none.
  chaos_options on_injected(std::function<void(const chaos_injection&)> hook) const;

  double rate() const noexcept { return rate_; }
  std::function<bool(const context&)> predicate() const { return predicate_.function(); }
  const random_source& random() const noexcept { return random_; }
  const chaos_switch* switch_ref() const noexcept { return switch_; }
  std::function<void(const chaos_injection&)> on_injected() const { return on_injected_.function(); }

  // Whether this call gets the fault. The switch is read inline: that is
  // the whole cost of a disabled stage.
  bool should_inject(const context& ctx) const {
    if (switch_ && !switch_->enabled()) return false;
    return decide(ctx);
  }

  // Runs on_injected, if set.
  void report(const chaos_injection& what) const {
    if (on_injected_) on_injected_(what);
  }

 private:
  bool decide(const context& ctx) const;

  double rate_ = 1.0;
  // Shared by the copies each call makes.
  detail::shared_hook<bool(const context&)> predicate_;
  random_source random_;
  const chaos_switch* switch_ = nullptr;
  detail::shared_hook<void(const chaos_injection&)> on_injected_;
};

namespace detail {

template <chaos_fault K>
struct fault_of_kind {
  static constexpr chaos_fault kind = K;
};
struct inject_error : fault_of_kind<chaos_fault::error> {
  error_code error;
};
template <class V>
struct inject_outcome : fault_of_kind<chaos_fault::outcome> {
  V value;
};
template <>
struct inject_outcome<void> : fault_of_kind<chaos_fault::outcome> {};
template <class E>
struct inject_exception : fault_of_kind<chaos_fault::exception> {
  E exception;
};
template <class Clock>
struct inject_latency : fault_of_kind<chaos_fault::latency> {
  duration latency;
  [[no_unique_address]] Clock clock;
};

template <class F>
inline constexpr bool is_latency = F::kind == chaos_fault::latency;

// The call's coroutines (impl/chaos.hpp). The latency fault: a wait on the
// clock, bounded by the deadline, then the op.
template <class T, class Executor, class Op, class Clock>
boost::asio::awaitable<T, Executor> wait_then_call(Op& op, const Clock* clock, duration latency, context ctx);
template <class T, class Executor, class Op, class Held>
boost::asio::awaitable<T, Executor> chaos_call(Op op, Held held, context ctx);

}  // namespace detail

template <class Fault>
class basic_chaos : public value_stage_base<basic_chaos<Fault>> {
 public:
  using fault_type = Fault;
  // For pipeline(): no fault waits past the context's deadline.
  static constexpr bool respects_deadline = true;

  basic_chaos(Fault fault, chaos_options options) : fault_(std::move(fault)), options_(std::move(options)) {}

  const chaos_options& options() const noexcept { return options_; }
  const Fault& fault() const noexcept { return fault_; }

  // Only the latency fault reads a clock (the pipeline's, through .clock(k)).
  const auto& clock() const noexcept
    requires detail::is_latency<Fault>
  {
    return fault_.clock;
  }
  template <resilience::clock K>
  auto clock(K k) const
    requires detail::is_latency<Fault>
  {
    using F = detail::inject_latency<K>;
    return basic_chaos<F>(F{{}, fault_.latency, std::move(k)}, options_);
  }

  // The stage interface is value_stage_base's: run(op) holds a copy of this
  // stage (a temporary one is moved in), so the awaitable may outlive it;
  // run_referenced(op), what a pipeline holding the stage does, refers to it.

 private:
  friend value_stage_base<basic_chaos>;
  template <class T, class Executor, class Op, class Held>
  static constexpr auto call = &detail::chaos_call<T, Executor, Op, Held>;
  Fault fault_;
  chaos_options options_;
};

// The call ends with `ec`, which must be a failure.
basic_chaos<detail::inject_error> chaos_error(error_code ec, chaos_options options = {});

// The call returns a copy of `value`, converted to the op's T.
template <class V>
basic_chaos<detail::inject_outcome<std::decay_t<V>>> chaos_outcome(V&& value, chaos_options options = {}) {
  return {{{}, std::forward<V>(value)}, std::move(options)};
}
// For a void op: the call succeeds without running it.
inline basic_chaos<detail::inject_outcome<void>> chaos_outcome(chaos_options options = {}) {
  return {{}, std::move(options)};
}

// The call throws a copy of `e` (an exception_ptr is rethrown as is, and
// must not be null).
template <class E>
basic_chaos<detail::inject_exception<std::decay_t<E>>> chaos_exception(E&& e, chaos_options options = {}) {
  if constexpr (std::is_same_v<std::decay_t<E>, std::exception_ptr>) {
    if (!e) throw std::invalid_argument("chaos_exception: exception must not be null");
  }
  return {{{}, std::forward<E>(e)}, std::move(options)};
}

// The call waits `latency` (positive) on the steady clock, or on the clock
// given with .clock(k), before the op runs.
basic_chaos<detail::inject_latency<steady_clock>> chaos_latency(duration latency, chaos_options options = {});

}  // namespace resilience

#include <resilience/impl/chaos.hpp>
