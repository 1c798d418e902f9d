// resilience/stage.hpp — what a stage is, and the bases that give every
// stage its call methods.
//
// An op is what a stage runs (awaitable_op, below). A stage is an object
// with
//
//   template <awaitable_op Op> auto run(Op op, const context& parent = {}) const;
//   template <awaitable_op Op> auto operator()(Op op, const context& parent = {}) const;  // = run
//
// returning an asio::awaitable of the op's value type on the op's executor.
// run() copies `parent` into the call it makes (the coroutine's parameter
// is a `context` by value): a pipeline with an event sink hands its first
// stage a context that lives only as long as the call expression.
// A stage writes only its call, and one of two bases writes the rest:
//
// - stage_base<S>: S has shared state (a breaker, a limiter, a bulkhead),
//   which the call refers to and which must outlive it (a temporary one is
//   refused where it is made a stage of a pipeline: see compile_fail/);
//   shared_state_stage<S, Core, Clock> adds the clock and the core such an
//   S owns, and their accessors; or
//   S copies into its call what the call needs (a timeout's duration and
//   clock), so the call may outlive it. S writes
//
//     template <class T, class Executor, class Op>
//     auto call(Op op, const context& parent) const;
//
// - value_stage_base<S>: S is a policy that is copied (retry, hedging,
//   fallback, chaos). run() copies a named stage into the call's frame, or
//   moves a temporary in, so the awaitable may outlive the stage;
//   run_referenced() refers to it instead (what a pipeline that holds the
//   stage does: no copy per call). S writes
//
//     template <class T, class Executor, class Op, class Held>
//     static constexpr auto call = &detail::my_call<T, Executor, Op, Held>;
//
//   naming the coroutine
//
//     template <class T, class Executor, class Op, class Held>
//     boost::asio::awaitable<T, Executor> my_call(Op op, Held self, context parent);
//
//   where detail::deref(self) is the stage (Held is the stage, a copy made in
//   the frame, or a pointer to it). The holder is the coroutine's own
//   parameter, made in place, so a named stage is copied once. A move-only
//   S is never copied: its run() on a named stage refers to it, as
//   run_referenced() does.
//
// In both, T and Executor are the op's value type and executor; S may keep
// its call private and befriend its base. Adding a strategy is its options,
// its call, its events: see docs/design.md.
#pragma once

#include <resilience/context.hpp>

#include <boost/asio/awaitable.hpp>

#include <concepts>
#include <new>
#include <type_traits>
#include <utility>

namespace resilience {

namespace detail {
template <class A>
inline constexpr bool is_asio_awaitable = false;
template <class T, class Executor>
inline constexpr bool is_asio_awaitable<boost::asio::awaitable<T, Executor>> = true;
}  // namespace detail

// What every strategy runs: a callable taking `const context&` or nothing
// and returning `asio::awaitable<T, Executor>`. A plain value, a callable
// that needs other arguments, or another kind of awaitable is not one.
template <class Op>
concept awaitable_op =
    std::move_constructible<Op> &&
    ((std::is_invocable_v<Op&, const context&> &&
      detail::is_asio_awaitable<std::remove_cvref_t<std::invoke_result_t<Op&, const context&>>>) ||
     (!std::is_invocable_v<Op&, const context&> && std::is_invocable_v<Op&> &&
      detail::is_asio_awaitable<std::remove_cvref_t<std::invoke_result_t<Op&>>>));

namespace detail {

template <class A>
struct awaitable_parts;
template <class T, class Executor>
struct awaitable_parts<boost::asio::awaitable<T, Executor>> {
  using value_type = T;
  using executor_type = Executor;
};

template <class Op>
decltype(auto) invoke_op(Op& op, const context& ctx) {
  if constexpr (std::is_invocable_v<Op&, const context&>) {
    return op(ctx);
  } else {
    static_assert(std::is_invocable_v<Op&>, "op must be callable with () or (const resilience::context&)");
    return op();
  }
}

template <class Op>
using op_awaitable_t = std::remove_cvref_t<decltype(invoke_op(std::declval<Op&>(), std::declval<const context&>()))>;
template <class Op>
using op_value_t = typename awaitable_parts<op_awaitable_t<Op>>::value_type;
template <class Op>
using op_executor_t = typename awaitable_parts<op_awaitable_t<Op>>::executor_type;

// A stage named by an lvalue, copied once, straight into the call's frame:
// the argument only points at the stage, and moving it into the frame (which
// happens while the call is being made, so the stage is alive) makes the
// copy. No temporary is copied, moved and destroyed on the way.
template <class P>
class copied_into_frame {
 public:
  explicit copied_into_frame(const P& p) noexcept : source_(&p) {}
  copied_into_frame(copied_into_frame&& other) {
    ::new (static_cast<void*>(&copy_)) P(*other.source_);
    source_ = &copy_;
  }
  copied_into_frame(const copied_into_frame&) = delete;
  copied_into_frame& operator=(const copied_into_frame&) = delete;
  ~copied_into_frame() {
    if (source_ == &copy_) copy_.~P();
  }
  const P& get() const noexcept { return *source_; }

 private:
  const P* source_;  // the original until moved, then the copy
  union {
    P copy_;
  };
};

// The stage a value stage's call holds, however it holds it.
template <class P>
const P& deref(const P* p) noexcept {
  return *p;
}
template <class P>
const P& deref(const copied_into_frame<P>& p) noexcept {
  return p.get();
}
template <class P>
const P& deref(const P& p) noexcept {
  return p;
}

// The result a constant stands in for (chaos_outcome(v), fallback_value(v)
// and their forms without a value): `h.value` as a T, or nothing for a void op.
template <class T, class Holder>
T stand_in(const Holder& h) {
  if constexpr (requires { h.value; }) {
    static_assert(!std::is_void_v<T>,
                  "a value (chaos_outcome(v), fallback_value(v)) stands in for an op with a value; "
                  "chaos_outcome() and fallback_value() stand in for a void op");
    static_assert(std::is_constructible_v<T, const decltype(h.value)&>,
                  "the value that stands in must convert to the op's value type");
    return T(h.value);
  } else {
    static_assert(std::is_void_v<T>, "chaos_outcome() and fallback_value() without a value stand in for a void op only");
  }
}

}  // namespace detail

// Calls op with the context, or with nothing if it takes nothing: what a
// stage's coroutine does to run the op it decorates. A function object, so
// that argument-dependent lookup never picks it for the library's own
// unqualified calls.
inline constexpr struct {
  template <awaitable_op Op>
  auto operator()(Op& op, const context& ctx) const {
    return detail::invoke_op(op, ctx);
  }
} invoke_op{};

template <class S>
class stage_base {
 public:
  template <awaitable_op Op>
  auto run(Op op, const context& parent = {}) const {
    return static_cast<const S&>(*this).template call<detail::op_value_t<Op>, detail::op_executor_t<Op>>(
        std::move(op), parent);
  }
  template <awaitable_op Op>
  auto operator()(Op op, const context& parent = {}) const {
    return run(std::move(op), parent);
  }
};

// operator() as run(), for a stage that writes its own run() because its
// calls take a shape of their own (a pipeline, the type-erased pipeline, a
// registry's breaker stage): by lvalue, and moved from.
template <class S>
class run_as_call {
 public:
  template <awaitable_op Op>
  auto operator()(Op op, const context& parent = {}) const& {
    return static_cast<const S&>(*this).run(std::move(op), parent);
  }
  template <awaitable_op Op>
  auto operator()(Op op, const context& parent = {}) && {
    return static_cast<S&&>(*this).run(std::move(op), parent);
  }
};

namespace detail {
// For pipeline(): a stage that bounds the op it runs in time (a timeout, a
// deadline stage), and never waits past the context's deadline.
struct bounds_op_in_time {
  static constexpr bool bounds_op = true;
  static constexpr bool respects_deadline = true;
};
}  // namespace detail

// A strategy whose state every call shares (a breaker, a throttle, a
// bulkhead, a limiter): it owns its clock and its core, a thread-safe
// Core(Options) or Core(Options, clock_ref), and is neither copied nor moved,
// since stages, permits and waiting calls refer to both. S inherits the
// constructor, (Options = {}, Clock = {}); its call is the coroutine its
// core's namespace names stage_call, found by argument-dependent lookup:
//
//   template <resilience::clock Clock = steady_clock>
//   class basic_x : public shared_state_stage<basic_x<Clock>, detail::x_core, Clock> {
//    public:
//     using basic_x::shared_state_stage::shared_state_stage;
//   };
//   namespace detail {
//   template <class T, class Executor, class Op, class Clock>
//   boost::asio::awaitable<T, Executor> stage_call(Op op, x_core* core, const Clock* clock, context ctx);
//   }
//
// The core says whether its calls ever wait past the context's deadline
// (Core::respects_deadline), which a pipeline reads to drop a redundant timer.
template <class S, class Core, class Clock>
class shared_state_stage : public stage_base<S> {
 public:
  using clock_type = Clock;
  static constexpr bool respects_deadline = Core::respects_deadline;
  using options_type = std::remove_cvref_t<decltype(std::declval<const Core&>().options())>;

  explicit shared_state_stage(options_type options = {}, Clock clock = {})
      : clock_(std::move(clock)), core_(make_core(std::move(options))) {}
  shared_state_stage(const shared_state_stage&) = delete;
  shared_state_stage& operator=(const shared_state_stage&) = delete;

  const options_type& options() const noexcept { return core_.options(); }
  const Clock& clock() const noexcept { return clock_; }

 protected:
  ~shared_state_stage() = default;

  Clock clock_;
  mutable Core core_;

 private:
  friend stage_base<S>;
  template <class T, class Executor, class Op>
  auto call(Op op, const context& parent) const {
    return stage_call<T, Executor>(std::move(op), &core_, &clock_, parent);
  }

  // The clock is made first: a core keeps a reference to it.
  Core make_core(options_type options) const {
    if constexpr (std::is_constructible_v<Core, options_type, clock_ref>) {
      return Core(std::move(options), clock_ref(clock_));
    } else {
      return Core(std::move(options));
    }
  }
};

// A stage that calls through a strategy's shared state with a classifier
// of the caller's (breaker.stage(c), throttle.stage(c)): cheap to copy, it
// refers to the strategy, which must outlive it. Its call is its core's
// stage_call with the classifier.
template <class Core, class Classifier, class Clock>
class judged_stage : public stage_base<judged_stage<Core, Classifier, Clock>> {
 public:
  // For pipeline(): neither a breaker nor a throttle ever waits.
  static constexpr bool respects_deadline = true;

  judged_stage(Core& core, const Clock& clock, Classifier c) : core_(&core), clock_(&clock), classifier_(std::move(c)) {}

  // For pipeline(): the clock the strategy reads, checked against the others.
  const Clock& clock() const noexcept { return *clock_; }

 private:
  friend stage_base<judged_stage>;
  template <class T, class Executor, class Op>
  auto call(Op op, const context& parent) const {
    return stage_call<T, Executor>(std::move(op), core_, clock_, classifier_, parent);
  }
  Core* core_;
  const Clock* clock_;
  [[no_unique_address]] Classifier classifier_;
};

// A shared-state strategy whose calls a classifier judges (a breaker, a
// throttle): run(op) and strategy(op) judge with Default; stage(c) gives a
// stage judging with the caller's classifier, stage() one with Default.
template <class S, class Core, class Clock, class Default>
class judged_state_stage : public shared_state_stage<S, Core, Clock> {
 public:
  using judged_state_stage::shared_state_stage::shared_state_stage;  // (options = {}, clock = {})

  judged_stage<Core, Default, Clock> stage() const& { return {this->core_, this->clock_, {}}; }
  template <class C>
  judged_stage<Core, C, Clock> stage(C classifier) const& {
    return {this->core_, this->clock_, std::move(classifier)};
  }
  // A stage refers to its strategy: one from a temporary would dangle.
  void stage() const&& = delete;
  template <class C>
  void stage(C) const&& = delete;

 protected:
  ~judged_state_stage() = default;
};

// The holder reaches the call's coroutine as a prvalue: a copied_into_frame
// copies the stage when the coroutine moves it into its frame, and only then.
template <class S>
class value_stage_base {
 public:
  template <awaitable_op Op>
  auto run(Op op, const context& parent = {}) const& {
    if constexpr (std::is_copy_constructible_v<S>) {
      return call_for<Op, detail::copied_into_frame<S>>(std::move(op), detail::copied_into_frame<S>(self()), parent);
    } else {
      return run_referenced(std::move(op), parent);  // see "Lifetimes" in docs/semantics.md
    }
  }
  template <awaitable_op Op>
  auto run(Op op, const context& parent = {}) && {
    return call_for<Op, S>(std::move(op), static_cast<S&&>(*this), parent);
  }
  // Refers to this stage, which must outlive the call: never a temporary.
  template <awaitable_op Op>
  auto run_referenced(Op op, const context& parent = {}) const& {
    return call_for<Op, const S*>(std::move(op), &self(), parent);
  }
  template <awaitable_op Op>
  auto run_referenced(Op op, const context& parent = {}) && = delete;

  template <awaitable_op Op>
  auto operator()(Op op, const context& parent = {}) const& {
    return run(std::move(op), parent);
  }
  template <awaitable_op Op>
  auto operator()(Op op, const context& parent = {}) && {
    return static_cast<value_stage_base&&>(*this).run(std::move(op), parent);
  }

 private:
  const S& self() const noexcept { return static_cast<const S&>(*this); }
  template <class Op, class Held>
  static constexpr auto call_for = S::template call<detail::op_value_t<Op>, detail::op_executor_t<Op>, Op, Held>;
};

}  // namespace resilience
