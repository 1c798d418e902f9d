// resilience/circuit_breaker.hpp — stop calling a dependency that is down.
//
//   using namespace std::chrono_literals;
//   resilience::circuit_breaker breaker{resilience::breaker_options{}
//                                           .count_window(50)        // the last 50 calls
//                                           .failure_ratio(0.5)      // half of them failed...
//                                           .minimum_calls(10)       // ...out of at least 10
//                                           .open_duration(5s)};
//   int rows = co_await breaker([&] { return db.async_count(); });
//   // as a stage:        resilience::pipeline(retry_policy, breaker, attempt_timeout)
//   // own classifier:    breaker.stage([](const resilience::outcome<response>& o) {
//   //                        return o.failed() || o.value().status >= 500; })
//
// One breaker guards one dependency and is shared by every coroutine and
// thread that calls it. Stages (breaker.stage(), and the breaker itself used
// as a stage) refer to it by pointer: the breaker must outlive every call
// made through it. It can be neither copied nor moved.
//
// States:
//   closed        calls go through; outcomes are recorded; a trip condition opens it.
//   open          calls are rejected at once, until the break ends.
//   half_open     at most half_open_permits() probe calls at a time go through;
//                 the rest are rejected at once. successes_to_close() successes
//                 close it; one failure reopens it. It reopens too when it has
//                 been half-open for half_open_limit() without closing, so a
//                 probe that never ends cannot keep it half-open.
//   isolated      held open by isolate() until reset().
//   disabled      every call goes through and nothing is recorded.
//   metrics_only  like closed (everything is recorded), but it never opens.
// reset() closes it from any state and clears the window.
//
// OPEN becomes HALF_OPEN lazily: the first call after the break ends makes
// the transition and is the first probe. Nothing happens on a timer unless
// the application asks: call poll() (for example from a periodic timer) to
// make due transitions, and their callbacks, happen without waiting for a call.
//
// Trip conditions (closed state; any one opens it):
//   consecutive_failures(n)  n failures in a row;
//   failure_ratio(r)         failures / calls >= r over the window;
//   slow_calls(t, r)         calls that took >= t / calls >= r over the window.
// The window is count_window(n) (the last n calls) or time_window(span,
// buckets) (the calls of the last `span`, in `buckets` slices that expire
// whole). Ratios are judged once the window holds minimum_calls() calls, when
// a failed or slow call is recorded: a success never opens the breaker.
//
// Rejection: the call ends with resilience::error::circuit_open, in T's error
// channel, or thrown as resilience::circuit_open_error (a system_error with
// that code and retry_after()) when T has none. time_until_probe() gives the
// same time left until a probe may go through.
//
// What counts as a failure is a classifier (see classifier.hpp); the default
// counts every failure but a cancellation. A cancelled call counts as neither
// success nor failure. Every admitted call gives its permit back on every
// path — success, failure, exception, cancellation, or a permit destroyed
// unrecorded — so half-open probes are never lost.
//
// Concurrency: the closed-state path (admit + record) takes no lock and
// allocates nothing: a few atomic loads and one atomic read-modify-write
// while outcomes repeat, up to four when they change. The clock is read on
// it only for a time window or slow-call tripping.
// Every transition is one compare-and-swap, so each happens exactly once; its
// callback runs once, on the thread that made it, outside any lock. Callbacks
// of transitions made on different threads may overlap: events carry a
// sequence number to order them. Callbacks and the open-duration generator
// must not throw; the generator may be called by several racing threads for
// one opening (the first one's duration is used), so it must be thread-safe.
//
// With retry outside it: a rejected call ends at once, and retry sees
// error::circuit_open; time_until_probe() (or circuit_open_error's
// retry_after()) says how long waiting would have to be.
#pragma once

#include <resilience/classifier.hpp>
#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace resilience {

enum class circuit_state : std::uint8_t { closed, open, half_open, isolated, disabled, metrics_only };

const char* to_string(circuit_state s) noexcept;

// What on_state_change callbacks receive, once per transition.
struct state_change {
  circuit_state from;
  circuit_state to;
  std::uint32_t sequence;  // transitions made so far, this one included: orders events across threads
  time_point at;
  duration open_for;  // to == open: the length of this break; zero otherwise
};

// What on_rejection callbacks receive, once per rejected call.
struct rejection {
  circuit_state state;  // open, half_open (every probe permit taken) or isolated
  duration retry_after;
};

// Thrown to reject a call whose result type has no error channel.
class circuit_open_error : public boost::system::system_error {
 public:
  explicit circuit_open_error(duration retry_after)
      : boost::system::system_error(make_error_code(error::circuit_open)), retry_after_(retry_after) {}

  // Time left until the breaker may let a probe through: zero when it may
  // already (half-open, waiting for a permit to come back), duration::max()
  // when isolated.
  duration retry_after() const noexcept { return retry_after_; }

 private:
  duration retry_after_;
};

// The validated configuration of a breaker. A value type: each setter checks
// its input (std::invalid_argument names the field) and returns a new copy.
class breaker_options {
 public:
  // The break's length for the n-th consecutive opening (n >= 1; it starts
  // again at 1 once the breaker closes). Must not throw; negative means zero.
  //   auto b = backoff::exponential(5s, 2.0, 5min);
  //   options.open_duration([b, r = random_source{}](std::uint32_t n) {
  //     return b.nominal(n) / 2 + b.nominal(n) * r.next_unit() / 2; });  // grows, capped, jittered
  using duration_generator = std::function<duration(std::uint32_t)>;
  enum class window_kind : std::uint8_t { count, time };

  static constexpr std::uint32_t max_count_window = 1u << 20;
  static constexpr std::uint32_t max_buckets = 1024;
  static constexpr std::uint32_t max_permits = 0xffff;

  breaker_options() = default;

  // -- trip conditions --
  breaker_options consecutive_failures(std::uint32_t n) const;  // off by default
  breaker_options failure_ratio(double ratio) const;            // in (0, 1]; 0.5 by default
  breaker_options no_failure_ratio() const;
  breaker_options slow_calls(duration threshold, double ratio) const;  // off by default
  breaker_options count_window(std::uint32_t calls) const;             // the default: 100 calls
  breaker_options time_window(duration span, std::uint32_t buckets = 10) const;
  breaker_options minimum_calls(std::uint32_t n) const;  // 20 by default; at most a count window's size

  // -- open and half-open --
  breaker_options open_duration(duration d) const;  // 10 s by default
  breaker_options open_duration(duration_generator g) const;
  breaker_options half_open_permits(std::uint32_t n) const;   // probes at a time; 1 by default
  breaker_options successes_to_close(std::uint32_t m) const;  // 1 by default
  breaker_options half_open_limit(duration d) const;          // 60 s by default; duration::max() for none

  // -- events: run on the calling thread, outside any lock; must not throw --
  breaker_options on_state_change(std::function<void(const state_change&)> f) const;
  breaker_options on_rejection(std::function<void(const rejection&)> f) const;

  // -- reading --
  std::uint32_t consecutive_failures() const noexcept { return consecutive_failures_; }  // 0: off
  std::optional<double> failure_ratio() const noexcept { return failure_ratio_; }
  std::optional<double> slow_call_ratio() const noexcept { return slow_ratio_; }
  duration slow_call_threshold() const noexcept { return slow_threshold_; }
  window_kind window() const noexcept { return window_; }
  std::uint32_t count_window() const noexcept { return count_window_; }
  duration time_window() const noexcept { return time_window_; }
  std::uint32_t buckets() const noexcept { return buckets_; }
  std::uint32_t minimum_calls() const noexcept { return minimum_calls_; }
  duration open_duration(std::uint32_t opening) const;
  std::uint32_t half_open_permits() const noexcept { return half_open_permits_; }
  std::uint32_t successes_to_close() const noexcept { return successes_to_close_; }
  duration half_open_limit() const noexcept { return half_open_limit_; }
  const std::function<void(const state_change&)>& on_state_change() const noexcept { return on_state_change_; }
  const std::function<void(const rejection&)>& on_rejection() const noexcept { return on_rejection_; }

 private:
  std::uint32_t consecutive_failures_ = 0;
  std::optional<double> failure_ratio_ = 0.5;
  std::optional<double> slow_ratio_;
  duration slow_threshold_ = duration::max();
  window_kind window_ = window_kind::count;
  std::uint32_t count_window_ = 100;
  duration time_window_ = std::chrono::seconds(60);
  std::uint32_t buckets_ = 10;
  std::uint32_t minimum_calls_ = 20;
  duration open_duration_ = std::chrono::seconds(10);
  duration_generator open_generator_;
  std::uint32_t half_open_permits_ = 1;
  std::uint32_t successes_to_close_ = 1;
  duration half_open_limit_ = std::chrono::seconds(60);
  std::function<void(const state_change&)> on_state_change_;
  std::function<void(const rejection&)> on_rejection_;
};

// A snapshot for operators and tests. Read from several atomics, so under
// concurrent calls its fields may be a few calls apart.
struct breaker_metrics {
  circuit_state state;
  std::uint64_t calls;     // in the window
  std::uint64_t failures;  // in the window
  std::uint64_t slow_calls;
  double failure_ratio;    // failures / calls; 0 with no calls
  double slow_call_ratio;  // slow_calls / calls; 0 with no calls
  std::uint32_t consecutive_failures;  // counted only when consecutive_failures() trips it
  std::uint64_t rejections;  // since construction
  std::uint32_t probes_in_flight;
  std::uint32_t transitions;  // since construction (the sequence of the last state_change)
  duration time_until_probe;
};

namespace detail {
class breaker_core;
}

// The right to make one call: obtained from try_acquire(), then recorded once.
//
//   if (auto permit = breaker.try_acquire()) {
//     permit.record(call_failed);   // or record_success(), record_failure(), release()
//   } else {
//     wait(permit.retry_after());
//   }
//
// A permit destroyed without a record counts as neither success nor failure
// (as a cancellation does), and in half-open gives its probe slot back.
class breaker_permit {
 public:
  breaker_permit() noexcept = default;
  breaker_permit(const breaker_permit&) = delete;
  breaker_permit& operator=(const breaker_permit&) = delete;
  breaker_permit(breaker_permit&& o) noexcept
      : core_(std::exchange(o.core_, nullptr)), time_(o.time_), epoch_(o.epoch_), kind_(o.kind_) {}
  breaker_permit& operator=(breaker_permit&& o) noexcept {
    if (this != &o) {
      release();
      core_ = std::exchange(o.core_, nullptr);
      time_ = o.time_;
      epoch_ = o.epoch_;
      kind_ = o.kind_;
    }
    return *this;
  }
  ~breaker_permit() { release(); }

  // Whether the call may go ahead.
  explicit operator bool() const noexcept { return kind_ > kind::rejected; }
  bool is_probe() const noexcept { return kind_ == kind::probe; }
  // The breaker's transition count when this permit was given: which
  // closed or half-open period the call belongs to.
  std::uint32_t sequence() const noexcept { return epoch_; }
  // For a rejected permit: see circuit_open_error::retry_after().
  duration retry_after() const noexcept { return kind_ == kind::rejected ? time_ : duration::zero(); }

  void record(bool failure) noexcept;
  void record_success() noexcept { record(false); }
  void record_failure() noexcept { record(true); }
  // Neither success nor failure.
  void release() noexcept;

 private:
  friend class detail::breaker_core;
  enum class kind : std::uint8_t { rejected, closed, probe, pass };

  breaker_permit(detail::breaker_core* core, std::uint32_t epoch, kind k, duration t) noexcept
      : core_(core), time_(t), epoch_(epoch), kind_(k) {}

  detail::breaker_core* core_ = nullptr;  // null once recorded
  duration time_{};                      // start (since the breaker's origin) or retry_after
  std::uint32_t epoch_ = 0;
  kind kind_ = kind::rejected;
};

namespace detail {

__extension__ using breaker_uint128 = unsigned __int128;  // GCC and Clang; __extension__ quiets -Wpedantic

// The state machine, independent of the clock's type: compiled once in
// lib/circuit_breaker.cpp, except the closed-state path, inline here.
class breaker_core {
 public:
  using now_fn = time_point (*)(const void*) noexcept;

  breaker_core(breaker_options options, now_fn now, const void* clock);
  ~breaker_core();
  breaker_core(const breaker_core&) = delete;
  breaker_core& operator=(const breaker_core&) = delete;

  breaker_permit acquire() noexcept {
    const std::uint64_t w = word_.load(std::memory_order_acquire);
    const circuit_state s = state_of(w);
    if (s == circuit_state::closed || s == circuit_state::metrics_only) [[likely]]
      return breaker_permit(this, epoch_of(w), breaker_permit::kind::closed,
                            slow_on_ ? now() - origin_ : duration::zero());
    if (s == circuit_state::disabled) return breaker_permit(this, epoch_of(w), breaker_permit::kind::pass, {});
    return acquire_slow();
  }

  enum class result : std::uint8_t { success, failure, neither };

  void finish(breaker_permit::kind k, std::uint32_t epoch, duration start, result r) noexcept {
    if (k == breaker_permit::kind::closed) {
      if (r == result::neither) return;
      const bool slow = slow_on_ && now() - origin_ - start >= slow_threshold_;
      record_closed(epoch, r == result::failure, slow);
    } else if (k == breaker_permit::kind::probe) {
      if (r == result::success && slow_on_ && now() - origin_ - start >= slow_threshold_) r = result::failure;
      finish_probe(epoch, r);
    }
  }

  time_point now() const noexcept { return now_(clock_); }
  const breaker_options& options() const noexcept { return options_; }

  // Manual control; each is one transition (or none, if already there).
  void move_to(circuit_state target) noexcept;
  void poll() noexcept;
  circuit_state state() const noexcept { return state_of(word_.load(std::memory_order_acquire)); }
  duration time_until_probe() const noexcept;
  breaker_metrics metrics() const noexcept;

 private:
  // word_: state (3 bits) | epoch (29 bits) | probes in flight (16) | probe successes (16).
  // The epoch changes with every transition, so a record made for an earlier
  // one (a call admitted before the breaker opened, a probe that outlived
  // its half-open period) is recognised and dropped.
  static constexpr std::uint64_t epoch_mask = (1u << 29) - 1;
  static circuit_state state_of(std::uint64_t w) noexcept { return static_cast<circuit_state>(w & 7); }
  static std::uint32_t epoch_of(std::uint64_t w) noexcept { return static_cast<std::uint32_t>(w >> 3) & epoch_mask; }
  static std::uint32_t in_flight_of(std::uint64_t w) noexcept { return static_cast<std::uint32_t>(w >> 32) & 0xffff; }
  static std::uint32_t successes_of(std::uint64_t w) noexcept { return static_cast<std::uint32_t>(w >> 48); }
  static std::uint64_t make_word(circuit_state s, std::uint32_t epoch, std::uint32_t in_flight = 0,
                                 std::uint32_t successes = 0) noexcept {
    return static_cast<std::uint64_t>(s) | (std::uint64_t(epoch & epoch_mask) << 3) |
           (std::uint64_t(in_flight) << 32) | (std::uint64_t(successes) << 48);
  }

  struct window_counts {
    std::uint64_t calls = 0, failures = 0, slow = 0;
  };
  struct bucket;

  void record_closed(std::uint32_t epoch, bool failure, bool slow) noexcept {
    const std::uint64_t w = word_.load(std::memory_order_relaxed);
    if (epoch_of(w) != epoch) return;  // admitted before a transition: not this period's call
    std::uint32_t run = 0;
    if (!track_run_) {
    } else if (failure) {
      run = consecutive_.fetch_add(1, std::memory_order_relaxed) + 1;
    } else if (consecutive_.load(std::memory_order_relaxed) != 0) {
      // Load first: while nothing fails, successes only read this line.
      consecutive_.store(0, std::memory_order_relaxed);
    }
    if (count_slots_) {
      record_count(failure, slow);
    } else {
      record_time(failure, slow);
    }
    if ((failure || slow) && state_of(w) == circuit_state::closed) evaluate(epoch, run);
  }

  void record_count(bool failure, bool slow) noexcept {
    const std::uint64_t i = head_.fetch_add(1, std::memory_order_relaxed);
    // i mod n by multiplication (Lemire's fastmod). The index is taken mod
    // 2^32 first: once every 4 billion calls the ring steps irregularly once.
    const std::uint64_t low = fastmod_m_ * static_cast<std::uint32_t>(i);
    const auto slot = static_cast<std::uint32_t>((static_cast<breaker_uint128>(low) * count_n_) >> 64);
    const std::uint8_t v = static_cast<std::uint8_t>((failure ? 1 : 0) | (slow ? 2 : 0));
    auto& s = count_slots_[physical(slot)];
    // An unchanged slot needs no write at all: steady success costs one RMW.
    if (s.load(std::memory_order_relaxed) == v) return;
    const std::uint8_t old = s.exchange(v, std::memory_order_relaxed);
    if (old != v) count_sums_.fetch_add(encode(v) - encode(old), std::memory_order_relaxed);
  }
  // Consecutive slots sit on different cache lines (16 of them, round
  // robin), so threads recording at the same time rarely write one line.
  static constexpr std::uint32_t slot_lines = 16;
  std::uint32_t physical(std::uint32_t slot) const noexcept {
    return (slot % slot_lines) * slot_stride_ + slot / slot_lines;
  }
  // failures in the low half, slow calls in the high half; the encoding is
  // linear, so deltas may be added in any order.
  static std::uint64_t encode(std::uint8_t v) noexcept { return (v & 1u) + (std::uint64_t((v >> 1) & 1u) << 32); }

  breaker_permit acquire_slow() noexcept;
  breaker_permit reject(circuit_state s, duration retry_after) noexcept;
  void finish_probe(std::uint32_t epoch, result r) noexcept;
  void record_time(bool failure, bool slow) noexcept;
  void evaluate(std::uint32_t epoch, std::uint32_t run) noexcept;
  window_counts counts() const noexcept;
  void clear_window() noexcept;
  bool transition(std::uint64_t expected, circuit_state to, time_point now, std::uint32_t in_flight = 0) noexcept;
  void publish(std::uint32_t epoch, time_point deadline) noexcept;
  std::optional<time_point> deadline(std::uint32_t epoch) const noexcept;

  // Read on every call, written only by transitions.
  alignas(64) std::atomic<std::uint64_t> word_;
  // The deadline of the current open or half-open period: low 16 bits of its
  // epoch, then microseconds since origin_. Written before the transition's
  // compare-and-swap, so it is there as soon as the new state is.
  std::atomic<std::uint64_t> phase_{0};
  now_fn now_;
  const void* clock_;
  time_point origin_;
  bool slow_on_;
  duration slow_threshold_;
  std::atomic<std::uint8_t>* count_slots_ = nullptr;  // null with a time window
  std::uint64_t fastmod_m_ = 0;
  std::uint32_t count_n_ = 0;
  std::uint32_t slot_stride_ = 0;
  bool track_run_;  // consecutive failures are counted only when they can trip it

  alignas(64) std::atomic<std::uint32_t> consecutive_{0};
  alignas(64) std::atomic<std::uint64_t> head_{0};
  alignas(64) std::atomic<std::uint64_t> count_sums_{0};
  std::atomic<std::uint64_t> base_{0};  // head_ when the window was last cleared
  alignas(64) std::atomic<std::uint64_t> rejections_{0};
  std::atomic<std::uint32_t> openings_{0};  // consecutive openings, for the open-duration generator

  std::unique_ptr<std::atomic<std::uint8_t>[]> count_storage_;
  std::unique_ptr<bucket[]> buckets_;
  std::int64_t bucket_width_ = 0;  // nanoseconds
  breaker_options options_;
};

}  // namespace detail

inline void breaker_permit::record(bool failure) noexcept {
  if (auto* c = std::exchange(core_, nullptr))
    c->finish(kind_, epoch_, time_, failure ? detail::breaker_core::result::failure
                                            : detail::breaker_core::result::success);
}

inline void breaker_permit::release() noexcept {
  if (auto* c = std::exchange(core_, nullptr)) c->finish(kind_, epoch_, time_, detail::breaker_core::result::neither);
}

// Default classifier: every failure counts, except a cancellation.
using breaker_any_failure = any_failure;

namespace detail {

template <class T, class Executor, class Op, class Classifier>
boost::asio::awaitable<T, Executor> breaker_call(Op op, breaker_core* core, Classifier classify, context ctx) {
  breaker_permit permit = core->acquire();
  if (!permit) {
    if constexpr (!std::is_void_v<T> && outcome_traits<T>::has_error_channel) {
      co_return outcome_traits<T>::from_error(error::circuit_open);
    } else {
      throw circuit_open_error(permit.retry_after());
    }
  }
  // From here the permit goes back on every path: recorded below, or
  // released by its destructor if the classifier throws or the frame is
  // destroyed without resuming.
  std::optional<outcome<T>> result;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await invoke_op(op, ctx);
      if constexpr (ignores_successes<Classifier>) {
        permit.record_success();
        co_return;
      }
      result.emplace(outcome<T>::from_value({}));
    } else {
      T value = co_await invoke_op(op, ctx);
      if constexpr (ignores_successes<Classifier>) {
        if (!outcome_traits<T>::error(value).failed()) {
          permit.record_success();
          co_return value;
        }
      }
      result.emplace(outcome<T>::from_value(std::move(value)));
    }
  } catch (...) {
    result.emplace(outcome<T>::from_current_exception());
  }
  if (result->cancelled()) {
    permit.release();
  } else {
    permit.record(static_cast<bool>(classify(*result)));
  }
  co_return std::move(*result).get();
}

}  // namespace detail

// A stage that calls through a breaker, judging outcomes with its own
// classifier. Cheap to copy; refers to the breaker, which must outlive it.
template <class Classifier = breaker_any_failure>
class breaker_stage {
 public:
  // For pipeline(): this stage never waits past the context's deadline.
  static constexpr bool respects_deadline = true;

  breaker_stage(detail::breaker_core& core, Classifier c) : core_(&core), classifier_(std::move(c)) {}

  template <class Op>
  auto run(Op op, const context& parent = {}) const {
    return detail::breaker_call<detail::op_value_t<Op>, detail::op_executor_t<Op>>(std::move(op), core_,
                                                                                 classifier_, parent);
  }

  template <class Op>
  auto operator()(Op op, const context& parent = {}) const {
    return run(std::move(op), parent);
  }

 private:
  detail::breaker_core* core_;
  [[no_unique_address]] Classifier classifier_;
};

template <resilience::clock Clock = steady_clock>
class basic_circuit_breaker {
 public:
  // For pipeline(): this stage never waits past the context's deadline.
  static constexpr bool respects_deadline = true;

  using clock_type = Clock;

  explicit basic_circuit_breaker(breaker_options options = {}, Clock clock = {})
      : clock_(std::move(clock)), core_(std::move(options), &read_clock, &clock_) {}

  // The core holds a pointer to clock_, and stages hold one to the core.
  basic_circuit_breaker(const basic_circuit_breaker&) = delete;
  basic_circuit_breaker& operator=(const basic_circuit_breaker&) = delete;

  // -- calls --

  // The stage interface, with the default classifier. Const like every
  // stage's run: the breaker's state is shared and synchronised within.
  template <class Op>
  auto run(Op op, const context& parent = {}) const {
    return stage().run(std::move(op), parent);
  }
  template <class Op>
  auto operator()(Op op, const context& parent = {}) const {
    return run(std::move(op), parent);
  }

  breaker_stage<> stage() const { return {core_, {}}; }
  template <class C>
  breaker_stage<C> stage(C classifier) const {
    return {core_, std::move(classifier)};
  }

  // The raw admit / record API, for callers that are not coroutines.
  breaker_permit try_acquire() const noexcept { return core_.acquire(); }

  // -- manual control --

  void isolate() noexcept { core_.move_to(circuit_state::isolated); }
  // Closes it from any state, clearing the window and the failure run.
  void reset() noexcept { core_.move_to(circuit_state::closed); }
  void close() noexcept { reset(); }
  void disable() noexcept { core_.move_to(circuit_state::disabled); }
  void metrics_only() noexcept { core_.move_to(circuit_state::metrics_only); }
  // Makes time-based transitions that are due (open -> half_open after the
  // break, half_open -> open past half_open_limit) without waiting for a call.
  void poll() const noexcept { core_.poll(); }

  // -- introspection --

  circuit_state state() const noexcept { return core_.state(); }
  // Zero when a call may go through now (closed, half-open), the rest of
  // the break when open, duration::max() when isolated.
  duration time_until_probe() const noexcept { return core_.time_until_probe(); }
  breaker_metrics metrics() const noexcept { return core_.metrics(); }
  const breaker_options& options() const noexcept { return core_.options(); }
  const Clock& clock() const noexcept { return clock_; }

 private:
  static time_point read_clock(const void* c) noexcept { return static_cast<const Clock*>(c)->now(); }

  Clock clock_;
  mutable detail::breaker_core core_;
};

using circuit_breaker = basic_circuit_breaker<>;

}  // namespace resilience
