// resilience/retry.hpp — co_retry: retry an awaitable operation with backoff.
//
//   using namespace std::chrono_literals;
//   const auto policy = resilience::retry_policy{}
//                           .max_attempts(5)
//                           .backoff(resilience::backoff::exponential(100ms, 2.0, 5s))  // fully jittered
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
//   - the delay generator's stop() (see delay_generator below);
//   - the time limit, or the deadline of an enclosing deadline stage
//     (context::deadline): if the next delay would end past it (or, for the
//     deadline, at it), co_retry gives up at once with the last outcome
//     instead of sleeping; once the deadline has passed, it ends with
//     error::deadline_exceeded. A delay that would end at the end of time
//     (duration::max()) gives up the same way;
//   - a circuit breaker's rejection (error::circuit_open), unless the policy
//     was told to wait_out_open_circuit(breaker);
//   - cancellation of the awaiting coroutine (its cancellation slot): co_retry
//     ends at once with operation_aborted (in T's error channel, or thrown as
//     boost::system::system_error when T has none), and calls op no more. A
//     cancellation is never retried, whatever the classifier says.
//
// The wait before each retry is the backoff's next delay unless a delay
// generator, asked with the failed outcome and the context, says otherwise
// (Retry-After, a server's pushback, a breaker's time until its probe).
// Waits use a timer of the policy's clock, bound to the coroutine's
// cancellation slot. A zero delay yields (post) instead of arming a timer.
//
// The policy is a value type, validated as it is built (std::invalid_argument
// names the field). Each call holds its own copy (an rvalue policy is moved
// in), so an awaitable may outlive the policy it was made from: a helper may
// return co_retry(op, its_local_policy). The copy is cheap: hooks and a
// seeded random source are shared between copies, not copied. To skip even
// that, pass std::cref(policy): the call then refers to it, and it must
// outlive the call.
#pragma once

#include <resilience/backoff.hpp>
#include <resilience/classifier.hpp>
#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/detail/event_support.hpp>
#include <resilience/detail/sleep.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>
#include <resilience/random.hpp>
#include <resilience/retry_budget.hpp>
#include <resilience/retry_delay.hpp>
#include <resilience/detail/retry_support.hpp>
#include <resilience/detail/with_option.hpp>
#include <resilience/stage.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <limits>
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

// The default on_retry hook: does nothing.
struct no_retry_hook {
  template <class T>
  void operator()(const retry_event<T>&) const noexcept {}
};

// max_attempts(unlimited_attempts): retry until an outcome is final, the time
// limit or a deadline is reached, or the call is cancelled.
inline constexpr std::uint32_t unlimited_attempts = std::numeric_limits<std::uint32_t>::max();

// The validated numbers of a retry policy.
struct retry_options {
  std::uint32_t max_attempts = 3;
  backoff delays = backoff::exponential(std::chrono::milliseconds(100), 2.0, std::chrono::seconds(10));
  duration time_limit = duration::max();  // max() means none
  bool fit_to_time_left = true;

  friend bool operator==(const retry_options&, const retry_options&) = default;
};

namespace detail {

// Parent: the caller's context, or no_parent (retry_support.hpp).
template <class T, class Executor, class Op, class Holder, class Parent = context>
boost::asio::awaitable<T, Executor> retry_loop(Op op, Holder holder, Parent parent);

}  // namespace detail

// A retry budget's refusal, as its event reports it.
struct budget_refusal {
  std::uint32_t attempt;       // the attempt that failed and would have been retried
  std::uint32_t max_attempts;
  std::string_view failure;    // that attempt's failure, described as in the log line
};

// A policy's hooks (logger, on_budget_refused) and its random source.
struct retry_listeners {
  std::function<void(std::string_view)> logger;
  std::function<void(const budget_refusal&)> on_budget_refused;
  random_source random;
};

namespace detail {
// `from` with one member replaced, in a new shared object (policies sharing
// the old one keep it).
template <class M, class F>
std::shared_ptr<const retry_listeners> with_listener(const std::shared_ptr<const retry_listeners>& from,
                                                     M retry_listeners::*member, F f) {
  auto next = from ? std::make_shared<retry_listeners>(*from) : std::make_shared<retry_listeners>();
  (*next).*member = std::move(f);
  return next;
}
}  // namespace detail


template <class Classifier = retry_any_failure, class OnRetry = no_retry_hook, class Clock = steady_clock,
          class Delay = backoff_delay>
class basic_retry_policy : public value_stage_base<basic_retry_policy<Classifier, OnRetry, Clock, Delay>> {
  template <class, class, class, class>
  friend class basic_retry_policy;

 public:
  using classifier_type = Classifier;
  using clock_type = Clock;
  using delay_generator_type = Delay;
  using logger_type = std::function<void(std::string_view)>;

  basic_retry_policy() = default;

  // For pipeline(): no wait of this stage ends past the context's deadline.
  static constexpr bool respects_deadline = true;

 private:
  friend value_stage_base<basic_retry_policy>;
  template <class T, class Executor, class Op, class Held>
  static constexpr auto call = &detail::retry_loop<T, Executor, Op, Held>;
  static inline const random_source per_thread_random{};

 public:

  // -- building (each returns a new policy; the old one is unchanged) --

  // Total calls of op, the first one included. At least 1; or
  // unlimited_attempts.
  basic_retry_policy max_attempts(std::uint32_t n) const {
    if (n == 0)
      throw std::invalid_argument("retry_policy: max_attempts must be at least 1 (it counts the first attempt)");
    return resilience::detail::with_option(*this, &basic_retry_policy::options_, &retry_options::max_attempts, n);
  }

  // The delays between attempts: replaces the whole schedule, its jitter
  // included (full unless the backoff was made with another).
  basic_retry_policy backoff(const resilience::backoff& b) const {
    return resilience::detail::with_option(*this, &basic_retry_policy::options_, &retry_options::delays, b);
  }

  // Changes only the jitter of the current schedule.
  basic_retry_policy jitter(resilience::jitter j) const {
    return resilience::detail::with_option(*this, &basic_retry_policy::options_, &retry_options::delays,
        options_.delays.with_jitter(j));
  }

  // Stops retrying, never an attempt: no wait starts that would end more
  // than `limit` after the call began (co_retry gives up with the last
  // outcome instead), as tenacity's stop_after_delay. An attempt in progress
  // runs to its end and its outcome stands, so a call may last longer than
  // `limit`. For a bound on the whole call, attempts included (Polly's outer
  // timeout), put a deadline_stage outside the retry. Must be positive.
  basic_retry_policy time_limit(duration limit) const {
    if (limit <= duration::zero()) throw std::invalid_argument("retry_policy: time_limit must be positive");
    return resilience::detail::with_option(*this, &basic_retry_policy::options_, &retry_options::time_limit, limit);
  }

  // Under a deadline or a time limit, each backoff wait is scaled so that
  // the retries left all fit the time left: a wait whose nominal delay
  // exceeds (time left) / (retries left + 1) is scaled down by the same
  // factor as its nominal delay, so the jitter keeps spreading clients. A
  // call under a 500 ms deadline thus retries within it at a 2 s schedule,
  // where an unscaled first wait would end past it and the call would give
  // up at its first failure. A delay a server asked for (Retry-After,
  // pushback) is never shortened; unlimited_attempts is never scaled. On by
  // default; off waits the schedule as it is (Polly's and Resilience4j's
  // behaviour), giving up when the wait would end past the deadline.
  basic_retry_policy fit_to_time_left(bool on) const {
    return resilience::detail::with_option(*this, &basic_retry_policy::options_, &retry_options::fit_to_time_left, on);
  }

  basic_retry_policy random(random_source r) const {
    return resilience::detail::with_option(*this, &basic_retry_policy::listeners_,
        detail::with_listener(listeners_, &retry_listeners::random, std::move(r)));
  }

  // A line per retry, formatted with fmt: the failure (an error's message, an
  // exception's what(), or describe_result() of a failed value: see
  // describe_outcome), the attempt, the delay.
  basic_retry_policy logger(logger_type log) const {
    return resilience::detail::with_option(*this, &basic_retry_policy::listeners_,
        detail::with_listener(listeners_, &retry_listeners::logger, std::move(log)));
  }

  // Decides the wait after each transient failure from its outcome and the
  // call's context: `f(const outcome<T>&, const context&)` returns a
  // retry_delay (the backoff, a given delay, or stop). For Retry-After, a
  // server's pushback, a breaker's time until its next probe. Called on the
  // calling coroutine's executor; with a shared policy it must be
  // thread-safe. What it throws becomes the call's outcome.
  template <class F>
  basic_retry_policy<Classifier, OnRetry, Clock, F> delay_generator(F f) const {
    return rebind<Classifier, OnRetry, Clock, F>(classifier_, on_retry_, clock_, std::move(f));
  }

  // By default a circuit breaker's rejection (error::circuit_open) ends the
  // call: retrying it only waits on a dependency known to be down. With
  // this, it is retried like a transient failure, after waiting out the time
  // `breaker` says is left before it lets a probe through. A delay generator
  // on top of the one set so far (which still decides every other failure).
  // `breaker` is anything with `duration time_until_probe() const` and must
  // outlive the policy.
  template <class Breaker>
  auto wait_out_open_circuit(const Breaker& breaker) const
    requires requires { { breaker.time_until_probe() } -> std::convertible_to<duration>; }
  {
    using D = detail::open_circuit_delay<Breaker, Delay>;
    auto p = rebind<Classifier, OnRetry, Clock, D>(classifier_, on_retry_, clock_, D{&breaker, delay_});
    p.retries_open_circuit_ = true;
    return p;
  }

  // Reports every attempt's outcome to `budget` and asks it before each
  // retry (retry_budget.hpp): a refusal ends the call with its last outcome
  // (or retry_budget_exhausted: budget_refusal_as_error). `budget` is shared
  // and must outlive the policy.
  template <retry_budget B>
  basic_retry_policy budget(B& budget) const {
    return resilience::detail::with_option(*this, &basic_retry_policy::budget_, detail::budget_ref::to(budget));
  }
  // A budget already referred to (http::client_options holds one).
  basic_retry_policy budget(const detail::budget_ref& budget) const {
    return resilience::detail::with_option(*this, &basic_retry_policy::budget_, budget);
  }
  // Called when the budget refuses a retry, on the calling coroutine's
  // executor (thread-safe with a shared policy). What it throws becomes the
  // call's outcome.
  basic_retry_policy on_budget_refused(std::function<void(const budget_refusal&)> f) const {
    return resilience::detail::with_option(*this, &basic_retry_policy::listeners_,
        detail::with_listener(listeners_, &retry_listeners::on_budget_refused, std::move(f)));
  }
  // A refused retry ends the call with error::retry_budget_exhausted rather
  // than its last outcome, so that stages outside the retry (a fallback, a
  // breaker's classifier) can tell "the budget stopped it" from the failure.
  basic_retry_policy budget_refusal_as_error(bool yes = true) const {
    return resilience::detail::with_option(*this, &basic_retry_policy::budget_refusal_is_error_, yes);
  }

  // The policy refers to the budget: a temporary one would be gone.
  template <class B>
  basic_retry_policy budget(B&& budget) const
    requires(!std::is_lvalue_reference_v<B>)
  = delete;

  // The policy refers to `breaker`: a temporary one would be gone.
  template <class Breaker>
  basic_retry_policy wait_out_open_circuit(const Breaker&&) const = delete;

  // Which outcomes are transient. Cancellation never is, whatever `c` says.
  template <class C>
  basic_retry_policy<C, OnRetry, Clock, Delay> retry_if(C c) const {
    return rebind<C, OnRetry, Clock, Delay>(std::move(c), on_retry_, clock_, delay_);
  }

  // Called before every wait with a retry_event<T>. Runs on the calling
  // coroutine's executor; with a shared policy it must be thread-safe.
  template <class H>
  basic_retry_policy<Classifier, H, Clock, Delay> on_retry(H hook) const {
    return rebind<Classifier, H, Clock, Delay>(classifier_, std::move(hook), clock_, delay_);
  }

  template <resilience::clock K>
  basic_retry_policy<Classifier, OnRetry, K, Delay> clock(K k) const {
    return rebind<Classifier, OnRetry, K, Delay>(classifier_, on_retry_, std::move(k), delay_);
  }

  // -- reading --

  const retry_options& options() const noexcept { return options_; }
  const Classifier& classifier() const noexcept { return classifier_; }
  const Clock& clock() const noexcept { return clock_; }
  const random_source& random() const noexcept { return listeners_ ? listeners_->random : per_thread_random; }
  const Delay& delay_generator() const noexcept { return delay_; }
  const detail::budget_ref& budget() const noexcept { return budget_; }

  // -- running --

  // The stage interface is value_stage_base's: run(op, parent) holds a copy
  // of the policy (a temporary one is moved in), so the awaitable may
  // outlive it, as co_retry's does; run_referenced(op), what a pipeline
  // holding the policy does, refers to it.

  // Whether a breaker's rejection is retried (see wait_out_open_circuit).
  bool waits_out_open_circuit() const noexcept { return retries_open_circuit_; }

  // Called by retry_loop when the budget refuses a retry, and once per retry.
  template <class T>
  void notify_budget_refused(std::uint32_t attempt, const outcome<T>& last) const;
  bool budget_refusal_is_error() const noexcept { return budget_refusal_is_error_; }

  template <class T>
  void notify_retry(const retry_event<T>& e) const;

 private:
  basic_retry_policy(retry_options o, std::shared_ptr<const retry_listeners> l,
                     bool retries_open_circuit, Classifier c, OnRetry h, Clock k, Delay d)
      : options_(std::move(o)), listeners_(std::move(l)),
        retries_open_circuit_(retries_open_circuit), classifier_(std::move(c)), on_retry_(std::move(h)),
        clock_(std::move(k)), delay_(std::move(d)) {}

  template <class C, class H, class K, class D>
  basic_retry_policy<C, H, K, D> rebind(C c, H h, K k, D d) const {
    basic_retry_policy<C, H, K, D> p(options_, listeners_, retries_open_circuit_, std::move(c), std::move(h),
                                     std::move(k), std::move(d));
    p.budget_ = budget_;
    p.budget_refusal_is_error_ = budget_refusal_is_error_;
    return p;
  }

  retry_options options_;
  // What is not trivially copied (hooks, a seeded random source), shared:
  // copying a policy, which each call does unless given std::cref, copies
  // no closure and touches no reference count while none is set.
  std::shared_ptr<const retry_listeners> listeners_;
  bool retries_open_circuit_ = false;
  detail::budget_ref budget_;
  bool budget_refusal_is_error_ = false;
  [[no_unique_address]] Classifier classifier_{};
  [[no_unique_address]] OnRetry on_retry_{};
  [[no_unique_address]] Clock clock_{};
  [[no_unique_address]] Delay delay_{};
};

using retry_policy = basic_retry_policy<>;

// Runs op under the default policy, which the call owns.
template <awaitable_op Op>
auto co_retry(Op op) {
  return detail::retry_loop<detail::op_value_t<Op>, detail::op_executor_t<Op>>(std::move(op), retry_policy{},
                                                                               detail::no_parent{});
}

// Runs op under policy, within the call `parent` describes (its deadline,
// properties, events), or on its own. See the top of this header. (Defined
// in impl/retry.hpp.)
template <awaitable_op Op, class Policy>
auto co_retry(Op op, Policy&& policy, const context& parent);
template <awaitable_op Op, class Policy>
auto co_retry(Op op, Policy&& policy);

}  // namespace resilience

#include <resilience/impl/retry.hpp>
