// resilience/pipeline.hpp — strategies composed into one call.
//
//   using namespace std::chrono_literals;
//   const auto call_backend = resilience::pipeline(
//       resilience::deadline_stage(2s),                          // outermost
//       resilience::retry_policy{}.max_attempts(4),
//       resilience::timeout(300ms));                             // innermost: each attempt
//   std::string body = co_await call_backend([&](const resilience::context& ctx) {
//     return http_get(url, ctx.remaining());
//   });
//
// The first stage listed is the outermost, as in Polly and Failsafe: above,
// the deadline bounds everything, the retry repeats what is inside it, and the
// timeout bounds each attempt. A stage is anything with
// `run(op, const context&)` returning an awaitable; a pipeline is one too, so
// pipelines nest. Stages compose statically: no type erasure on the call path.
//
// Copyable stages (policies, timeouts) are stored by value. A stage that
// cannot be copied — shared state such as a circuit breaker — is stored by
// reference, as is one passed as std::ref(stage): it must outlive the pipeline.
// Each call holds a copy of the pipeline (values; hooks shared), so the
// awaitable may outlive it; run_referenced(op) refers to it instead.
//
// A deadline stage whose inner stages all keep to the deadline (retry,
// timeouts, breakers, other deadlines) and whose innermost stage is a timeout
// runs without a timer of its own: that timeout is clamped to the deadline on
// every attempt, so the bound holds at the cost of one timer, not two.
//
// Mistakes that can be seen when the pipeline is built are rejected then with
// std::invalid_argument: an attempt timeout longer than the budget of a
// deadline stage outside it can never fire; two stages on different
// instances of one clock type (two manual clocks). Stages on different clock
// types do not compile: a call has one clock. `.clock(k)` gives every stage
// that takes a clock the same one:
//   auto on_virtual_time = call_backend.clock(manual);  // retry, deadline, timeouts
// (a breaker keeps the clock it was built with; it must be the same one).
#pragma once

#include <resilience/context.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/stage.hpp>

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace resilience {

namespace detail {

template <class S>
struct stage_storage {
  using type = std::conditional_t<std::is_copy_constructible_v<S>, S, const S*>;
};
template <class S>
struct stage_storage<std::reference_wrapper<S>> {
  using type = const S*;
};
template <class S>
using stage_storage_t = typename stage_storage<std::remove_cvref_t<S>>::type;

template <class S>
const S& unwrap_stage(const S& s) noexcept {
  return s;
}
template <class S>
const S& unwrap_stage(const S* s) noexcept {
  return *s;
}

template <class Stored, class S>
Stored store_stage(S&& s) {
  if constexpr (std::is_pointer_v<Stored>) {
    // A stage that cannot be copied (a circuit breaker) is shared state: it
    // is referenced, so a temporary one would be gone before the first call.
    static_assert(std::is_lvalue_reference_v<S> || requires { s.get(); },
                  "a stage that cannot be copied (such as a circuit breaker) must outlive the pipeline: "
                  "pass a named object or std::ref(stage), not a temporary");
    if constexpr (requires { s.get(); }) {
      return &s.get();  // std::reference_wrapper
    } else {
      return &s;
    }
  } else {
    return Stored(std::forward<S>(s));
  }
}

// Calls the op of an outer stage's frame without copying it.
template <class Op>
struct op_ref {
  Op* op;
  auto operator()(const context& ctx) const { return invoke_op(*op, ctx); }
};

template <class S>
concept bounds_op = requires { requires S::bounds_op; };
template <class S>
concept respects_deadline = requires { requires S::respects_deadline; };
template <class S>
concept tightens_deadline = requires { requires S::can_run_tightened; };

template <class S>
concept has_budget = requires(const S& s) {
  { s.budget() } -> std::same_as<std::optional<duration>>;
};
template <class S>
concept has_limit = requires(const S& s) {
  { s.limit() } -> std::same_as<duration>;
};

// The clock a stage reads (void for a stage that reads none).
template <class S>
struct clock_of {
  using type = void;
};
template <class S>
  requires requires(const S& s) { s.clock(); }
struct clock_of<S> {
  using type = std::remove_cvref_t<decltype(std::declval<const S&>().clock())>;
};
template <class... C>
struct first_clock {
  using type = void;
};
template <class C, class... R>
struct first_clock<C, R...> {
  using type = std::conditional_t<std::is_void_v<C>, typename first_clock<R...>::type, C>;
};
template <class... C>
inline constexpr bool clocks_agree =
    ((std::is_void_v<C> || std::is_same_v<C, typename first_clock<C...>::type>) && ...);

// Whether two clocks of one type are one clock: copies of one manual clock
// are; a stateless clock (the steady clock) always is.
template <class K>
bool same_clock(const K& a, const K& b) {
  if constexpr (requires { { a == b } -> std::convertible_to<bool>; }) {
    return a == b;
  } else {
    return true;
  }
}

template <class S, class K>
auto with_clock(const S& s, const K& k) {
  if constexpr (requires { s.clock(k); }) {
    return s.clock(k);
  } else if constexpr (std::is_copy_constructible_v<S>) {
    return s;
  } else {
    return std::cref(s);  // shared state (a breaker): still referred to
  }
}

template <class Stored>
using stored_clock_t =
    typename clock_of<std::remove_cvref_t<decltype(unwrap_stage(std::declval<const Stored&>()))>>::type;

}  // namespace detail

template <class... Stored>
class pipeline : public run_as_call<pipeline<Stored...>> {
  static_assert(sizeof...(Stored) >= 1, "a pipeline needs at least one stage");
  // Checked where a call starts, not where the pipeline is built: so that
  // pipeline(retry, manual_clock_breaker, timeout).clock(c) can put the
  // stages that take a clock on the breaker's before anything runs.
  static constexpr bool one_clock_type = detail::clocks_agree<detail::stored_clock_t<Stored>...>;

 public:
  // One argument per stage; a pipeline argument is a copy or a move, not a
  // stage.
  template <class... S>
    requires(sizeof...(S) == sizeof...(Stored) && !(std::is_same_v<std::remove_cvref_t<S>, pipeline> || ...))
  explicit pipeline(S&&... stages) : stages_(detail::store_stage<Stored>(std::forward<S>(stages))...) {
    validate();
  }

  // The call holds a copy of this pipeline (a temporary one is moved in), so
  // the awaitable may outlive it. The copy is of the stages' values: hooks
  // are shared between copies and shared state such as a breaker is
  // referred to, so it allocates only if a callable you gave a stage (a
  // classifier, a fallback action) does when copied. run_referenced() skips it.
  template <awaitable_op Op>
  auto run(Op op, const context& parent = {}) const& {
    if (events_) [[unlikely]]
      return run_copied(std::move(op), reporting(parent));
    return run_copied(std::move(op), parent);
  }
  template <awaitable_op Op>
  auto run(Op op, const context& parent = {}) && {
    return detail::run_owning(std::move(*this), std::move(op), parent);
  }
  // Refers to this pipeline instead of copying it: it must outlive the call
  // (a pipeline held as a member, or at namespace scope, called from a
  // coroutine that awaits the call at once).
  template <awaitable_op Op>
  auto run_referenced(Op op, const context& parent = {}) const& {
    if (events_) [[unlikely]]
      return run_from<0>(std::move(op), reporting(parent));
    return run_from<0>(std::move(op), parent);
  }
  template <awaitable_op Op>
  auto run_referenced(Op op, const context& parent = {}) && = delete;

  // This pipeline with its stages' events (retries, a breaker's rejections
  // and the transitions its calls make, timeouts, ...) reported to `sink`
  // (event.hpp) instead of to the caller's sink, if the caller has one. The
  // sink must outlive every call: a temporary is refused.
  //   auto call_backend = resilience::pipeline(retry, breaker).events(telemetry.events("backend"));
  pipeline events(event_sink& sink) const {
    pipeline p = *this;
    p.events_ = &sink;
    return p;
  }
  pipeline events(event_sink&&) const = delete;
  event_sink* events() const noexcept { return events_; }

 private:
  context reporting(const context& parent) const noexcept {
    context c = parent;
    c.events = events_;
    return c;
  }

  template <awaitable_op Op>
  auto run_copied(Op op, const context& parent) const {
    if constexpr (sizeof...(Stored) == 1) {
      return stage<0>().run(std::move(op), parent);  // a stage alone owns what it needs
    } else {
      // No frame of its own for the copy: the outermost stage runs as it
      // would alone (owning what it needs), and the op it runs carries the
      // copy for the stages inside, in that stage's frame.
      auto inner = [copy = *this, op = std::move(op)](const context& c) mutable {
        return copy.template run_from<1>(detail::op_ref<Op>{&op}, c);
      };
      if constexpr (detail::tightens_deadline<stage_t<0>> && inner_stages_keep_deadline<0>()) {
        return stage<0>().run_tightened(std::move(inner), parent);
      } else {
        return stage<0>().run(std::move(inner), parent);
      }
    }
  }

 public:
  template <std::size_t I>
  const auto& stage() const noexcept {
    return detail::unwrap_stage(std::get<I>(stages_));
  }

  static constexpr std::size_t size() noexcept { return sizeof...(Stored); }

  // The clock its stages read, when one does: a pipeline nested in another
  // is checked against the outer one's stages like any stage.
  using clock_type = typename detail::first_clock<detail::stored_clock_t<Stored>...>::type;
  const auto& clock() const noexcept
    requires(!std::is_void_v<clock_type>)
  {
    return first_clock_from<0>();
  }

  // This pipeline with every stage that takes a clock on `k`. Stages that
  // keep their own (a breaker) must already read the same clock: checked as
  // the new pipeline is built.
  template <resilience::clock K>
  auto clock(K k) const {
    auto p = std::apply(
        [&](const auto&... s) { return resilience::pipeline(detail::with_clock(detail::unwrap_stage(s), k)...); },
        stages_);
    p.events_ = events_;
    return p;
  }

 private:
  template <class...>
  friend class pipeline;
  template <std::size_t I>
  const auto& first_clock_from() const noexcept {
    if constexpr (std::is_void_v<typename detail::clock_of<stage_t<I>>::type>) {
      return first_clock_from<I + 1>();
    } else {
      return stage<I>().clock();
    }
  }

  template <std::size_t I>
  using stage_t = std::remove_cvref_t<decltype(detail::unwrap_stage(std::get<I>(std::declval<const std::tuple<Stored...>&>())))>;

  // True when the stages inside stage I all keep to the context's deadline
  // and the innermost bounds the op in time: then a deadline stage at I needs
  // no timer of its own, since every attempt's bound is clamped to it.
  template <std::size_t I>
  static constexpr bool inner_stages_keep_deadline() {
    constexpr std::size_t last = sizeof...(Stored) - 1;
    if constexpr (I >= last) {
      return false;
    } else {
      return []<std::size_t... J>(std::index_sequence<J...>) {
        return (detail::respects_deadline<stage_t<I + 1 + J>> && ...) && detail::bounds_op<stage_t<last>>;
      }(std::make_index_sequence<last - I>{});
    }
  }

  template <std::size_t I, class Op>
  auto run_from(Op op, const context& ctx) const {
    static_assert(one_clock_type,
                  "every stage of a pipeline must read the same clock type (a manual clock in one stage and the "
                  "steady clock in another would end calls with deadline_exceeded); give the stages that take a "
                  "clock the one that others keep with pipeline(...).clock(c)");
    if constexpr (I + 1 == sizeof...(Stored)) {
      return detail::run_held_stage(stage<I>(), std::move(op), ctx);
    } else {
      // Stage I repeats or bounds this inner call; it keeps `inner` in its
      // own frame, so the reference handed further in stays valid.
      auto inner = [this, inner = std::move(op)](const context& c) mutable {
        return this->template run_from<I + 1>(detail::op_ref<Op>{&inner}, c);
      };
      if constexpr (detail::tightens_deadline<stage_t<I>> && inner_stages_keep_deadline<I>()) {
        return stage<I>().run_tightened(std::move(inner), ctx);
      } else {
        return detail::run_held_stage(stage<I>(), std::move(inner), ctx);
      }
    }
  }

  // Every attempt timeout inside a deadline stage must fit in its budget,
  // and every stage reads one clock.
  void validate() const {
    std::optional<duration> budget;
    std::string name;
    const void* first_clock = nullptr;
    auto check = [&](const auto& s) {
      using S = std::remove_cvref_t<decltype(s)>;
      using K = typename detail::clock_of<S>::type;
      if constexpr (!std::is_void_v<K> && std::is_same_v<K, clock_type>) {  // another type: refused when run
        if (!first_clock) {
          first_clock = &s.clock();
        } else if (!detail::same_clock(*static_cast<const K*>(first_clock), s.clock())) {
          throw std::invalid_argument(
              "pipeline: two stages read different clocks of one type; a call has one clock: give every stage "
              "the same clock object (or a copy of it), or use pipeline(...).clock(c)");
        }
      }
      if constexpr (detail::has_limit<S>) {
        if (budget && s.limit() > *budget) {
          using ms = std::chrono::duration<double, std::milli>;
          throw std::invalid_argument("pipeline: a timeout of " + std::to_string(ms(s.limit()).count()) +
                                      " ms inside a deadline of " + std::to_string(ms(*budget).count()) +
                                      " ms can never fire; shorten the timeout or lengthen the deadline");
        }
      }
      if constexpr (detail::has_budget<S>) {
        if (auto b = s.budget(); b && (!budget || *b < *budget)) budget = b;
      }
    };
    std::apply([&](const auto&... s) { (check(detail::unwrap_stage(s)), ...); }, stages_);
  }

  std::tuple<Stored...> stages_;
  event_sink* events_ = nullptr;
};

template <class... S>
pipeline(S&&...) -> pipeline<detail::stage_storage_t<S>...>;

}  // namespace resilience
