// resilience/adaptive_throttle.hpp — a client that sheds its own load when
// the backend stops accepting it (client-side adaptive throttling).
//
//   using namespace std::chrono_literals;
//   resilience::adaptive_throttle throttle{resilience::adaptive_throttle_options{}
//                                              .k(2)            // allow twice what the backend accepts
//                                              .window(2min)};  // over the last two minutes
//   int rows = co_await throttle([&] { return db.async_count(); });
//   // as a stage:      resilience::pipeline(retry_policy, throttle, attempt_timeout)
//   // own "accepted":  throttle.stage([](const resilience::outcome<response>& o) {
//   //                      return !o.failed() && o.value().status != 429 && o.value().status != 503; })
//
// Over a sliding window the throttle counts requests (every call that ended,
// and every call it rejected) and accepts (calls whose outcome the "accepted"
// classifier calls accepted). Each new call is rejected locally, without
// calling the op, with probability
//
//   max(0, (requests - k * accepts) / (requests + 1))
//
// so a backend that accepts everything is never throttled, and one that
// accepts nothing sees about one call in `requests + 1` while its clients
// stay quiet. Rejected calls count as requests: the longer a backend refuses,
// the less it is sent. A rejection ends the call with error::throttled, in
// T's error channel, or thrown as system_error when T has none.
//
// Accepted means "the backend took the call and did its work": by default a
// success. Failures are not accepts: an overload answer (a 429 or 503 the op
// maps to an error), a transport error, error::timeout, and any other error.
// Give a classifier of the library's shape (see classifier.hpp; `true` means
// accepted) when some failures are the backend's considered answers (a 404).
// A cancelled call counts as neither request nor accept: it says nothing
// about the backend.
//
// The window is kept in 12 buckets on the throttle's clock, read coarsely
// (steady_clock::coarse_now(), a few ms behind, at a fraction of the cost of
// now(); the manual clock exactly): counts leave it a whole bucket at a time,
// between window() * 11/12 and window() after they were made. A call is counted when it ends, so its request and its accept
// land in one bucket.
//
// Retry outside the throttle: the default classifier (any_failure) does not
// retry error::throttled, and a throttled attempt is not reported to a retry
// budget (it reached no server).
//
// Threads: one throttle is shared by every coroutine and thread that calls
// the dependency. Admission reads the current bucket and a sum of the older
// ones kept once per bucket (a handful of loads; a record made with a time
// read just before a bucket turned may be missed by admissions until the
// next one); recording is one or two compare-and-swaps; neither locks nor
// allocates. It must outlive every call made through it and can be neither
// copied nor moved (a pipeline refers to it, as to a breaker).
#pragma once

#include <resilience/classifier.hpp>
#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/detail/sleep.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>
#include <resilience/random.hpp>
#include <resilience/stage.hpp>

#include <boost/asio/awaitable.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

namespace resilience {

// What on_throttled receives for each call the throttle rejected.
struct throttle_event {
  double probability;      // the rejection probability the call was judged by
  std::uint64_t requests;  // over the window, before this call was counted
  std::uint64_t accepts;
};

class adaptive_throttle_options {
 public:
  adaptive_throttle_options() = default;

  // How many requests per accept the client may send before it throttles
  // itself: 2 by default. At least 1 (below 1 a backend that accepts every
  // call would still be throttled) and finite. Lower is more aggressive.
  adaptive_throttle_options k(double k) const;
  // How far back requests and accepts count: 2 minutes by default. From
  // 1 ms to 24 h.
  adaptive_throttle_options window(duration d) const;
  // Where rejection draws come from; the per-thread source by default. A
  // seeded source makes the sequence of rejections reproducible.
  adaptive_throttle_options random(random_source r) const;
  // Runs on the rejected call's thread, before the call ends. What it throws
  // ends that call in place of error::throttled. With a shared throttle it
  // may run on several threads at once.
  adaptive_throttle_options on_throttled(std::function<void(const throttle_event&)> f) const;

  double k() const noexcept { return k_; }
  duration window() const noexcept { return window_; }
  const random_source& random() const noexcept { return random_; }
  const std::function<void(const throttle_event&)>& on_throttled() const noexcept { return on_throttled_; }

 private:
  double k_ = 2.0;
  duration window_ = std::chrono::minutes(2);
  random_source random_;
  std::function<void(const throttle_event&)> on_throttled_;
};

// Requests and accepts over the window, now.
struct throttle_counts {
  std::uint64_t requests = 0;
  std::uint64_t accepts = 0;
};

// The default "accepted" classifier: a success, and nothing else.
struct accepted_if_succeeded {
  // For the stage: a value without an error is an accept, so it is counted
  // without building an outcome.
  static constexpr bool success_verdict = true;

  template <class T>
  bool operator()(const outcome<T>& o) const noexcept {
    return !o.failed();
  }
};

namespace detail {

// The counts of the window, lock-free. Each bucket holds two words, requests
// and accepts; each word carries, above its count, a tag naming the bucket
// (a turn of the ring) it counts for. A record compares and swaps the whole
// word: it adds to a word of its own bucket, or restarts a word left from an
// earlier turn at 1, so no count is lost to a concurrent reset and none is
// added to the wrong bucket. A word whose tag is not the one the window
// expects for its slot is stale and read as zero.
class throttle_window {
 public:
  static constexpr int buckets = 12;

  explicit throttle_window(duration window) noexcept;
  throttle_window(const throttle_window&) = delete;
  throttle_window& operator=(const throttle_window&) = delete;

  void record(time_point now, bool accepted) noexcept {
    const std::int64_t n = bucket_number(now);
    slot& s = ring_[slot_index(n)];
    add(s.requests, n);
    if (accepted) add(s.accepts, n);
  }
  void record_request(time_point now) noexcept {
    const std::int64_t n = bucket_number(now);
    add(ring_[slot_index(n)].requests, n);
  }

  // Every bucket of the window, read now.
  throttle_counts counts(time_point now) const noexcept;
  // The same for an admission: the buckets before the current one change
  // only by the rare record made with a time read just before the bucket
  // turned, so their sum is kept once per bucket and only the current
  // bucket is read. Such a late record is missed here until the next bucket.
  throttle_counts admission_counts(time_point now) const noexcept;

 private:
  // 20 bits of tag (a bit set on every used word, and the bucket number's
  // low 19 bits) leave 44 of count: 10^13 calls a bucket.
  static constexpr int count_bits = 44;
  static constexpr std::uint64_t count_mask = (std::uint64_t{1} << count_bits) - 1;
  static constexpr std::uint64_t number_bits = 0x7ffff;
  static constexpr std::uint64_t used = std::uint64_t{0x80000} << count_bits;

  struct alignas(16) slot {
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> accepts{0};
  };

  // The bucket `now` falls in. A division costs more than the rest of a
  // record, so the last bucket found is kept: one load, one multiplication.
  std::int64_t bucket_number(time_point now) const noexcept {
    const std::int64_t ticks = now.time_since_epoch().count();
    const std::int64_t last = last_number_.load(std::memory_order_relaxed);
    // Unsigned: wraps where a signed difference could overflow, and is below
    // the bucket's width exactly when `now` is in the bucket.
    const std::uint64_t since = static_cast<std::uint64_t>(ticks) -
                                static_cast<std::uint64_t>(last) * static_cast<std::uint64_t>(bucket_ticks_);
    if (since < static_cast<std::uint64_t>(bucket_ticks_)) return last;
    // Floor division: a clock may read before its epoch.
    const std::int64_t n = ticks >= 0 ? ticks / bucket_ticks_ : -((-ticks - 1) / bucket_ticks_) - 1;
    last_number_.store(n, std::memory_order_relaxed);
    return n;
  }
  static std::size_t slot_index(std::int64_t n) noexcept {
    return static_cast<std::size_t>(((n % buckets) + buckets) % buckets);
  }
  // A fresh (all-zero) word lacks the `used` bit: stale for every bucket.
  static std::uint64_t tag_of(std::int64_t n) noexcept {
    return ((static_cast<std::uint64_t>(n) & number_bits) << count_bits) | used;
  }
  static std::uint64_t tag_mask() noexcept { return ~count_mask; }

  static void add(std::atomic<std::uint64_t>& word, std::int64_t n) noexcept;

  throttle_counts older_counts(std::int64_t n) const noexcept;
  throttle_counts add_current(throttle_counts c, std::int64_t n) const noexcept;

  // The sum of the buckets before bucket `number`, under a sequence lock:
  // odd while being written.
  struct older_sum {
    std::atomic<std::uint64_t> sequence{0};
    std::atomic<std::int64_t> number{std::numeric_limits<std::int64_t>::min()};
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> accepts{0};
  };

  std::int64_t bucket_ticks_;
  mutable std::atomic<std::int64_t> last_number_{0};
  std::array<slot, buckets> ring_;
  mutable older_sum older_;
};

// The state a throttle's stages share: options, window, and the judgement.
class adaptive_throttle_core {
 public:
  explicit adaptive_throttle_core(adaptive_throttle_options o);
  adaptive_throttle_core(const adaptive_throttle_core&) = delete;
  adaptive_throttle_core& operator=(const adaptive_throttle_core&) = delete;

  // The rejection probability for counts `c`.
  double probability(const throttle_counts& c) const noexcept {
    const double requests = static_cast<double>(c.requests);
    const double excess = requests - options_.k() * static_cast<double>(c.accepts);
    return excess > 0 ? excess / (requests + 1) : 0.0;
  }

  // Whether a call may go to the backend now. A rejection is counted as a
  // request and reported (on_throttled may throw).
  bool admit(time_point now, event_sink* events = nullptr) {
    const throttle_counts c = window_.admission_counts(now);
    const double p = probability(c);
    // A healthy backend costs no draw.
    if (p <= 0 || options_.random().next_unit() >= p) return true;
    window_.record_request(now);
    rejections_.fetch_add(1, std::memory_order_relaxed);
    if (options_.on_throttled()) options_.on_throttled()(throttle_event{p, c.requests, c.accepts});
    if (events) {
      event e{event_kind::throttled};
      e.outcome = call_outcome::error;
      e.error = error::throttled;
      events->on_event(e);
    }
    return false;
  }

  void record(time_point now, bool accepted) noexcept { window_.record(now, accepted); }

  throttle_counts counts(time_point now) const noexcept { return window_.counts(now); }
  std::uint64_t rejections() const noexcept { return rejections_.load(std::memory_order_relaxed); }
  const adaptive_throttle_options& options() const noexcept { return options_; }

 private:
  adaptive_throttle_options options_;
  throttle_window window_;
  std::atomic<std::uint64_t> rejections_{0};
};

template <class T, class Executor, class Op, class Classifier, class Clock>
boost::asio::awaitable<T, Executor> throttle_call(Op op, adaptive_throttle_core* core, const Clock* clock,
                                                  Classifier accepted, context ctx) {
  if (!core->admit(detail::coarse_now(*clock), ctx.events)) {
    // Throwing off for the turn (see yield_after_refusal).
    const bool throws = co_await boost::asio::this_coro::throw_if_cancelled();
    co_await boost::asio::this_coro::throw_if_cancelled(false);
    co_await yield_after_refusal<Executor>(throws);
    co_return make_failure<T>(error::throttled);
  }
  // Counted once the outcome is known: a frame destroyed unresumed (its
  // execution context shut down) or a cancellation counts for nothing.
  std::optional<outcome<T>> result;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await invoke_op(op, ctx);
      if constexpr (judges_successes_as<Classifier, true>) {
        core->record(detail::coarse_now(*clock), true);
        co_return;
      }
      result.emplace(outcome<T>::from_value({}));
    } else {
      T value = co_await invoke_op(op, ctx);
      if constexpr (judges_successes_as<Classifier, true>) {
        if (!outcome_traits<T>::error(value).failed()) {
          core->record(detail::coarse_now(*clock), true);
          co_return value;
        }
      }
      result.emplace(std::in_place, std::move(value));
    }
  } catch (...) {
    result.emplace(outcome<T>::from_current_exception());
  }
  if (!result->cancelled()) {
    bool is_accept = false;
    try {
      is_accept = detail::classify(accepted, *result, ctx);
    } catch (...) {
      core->record(detail::coarse_now(*clock), false);  // still a request; the classifier's exception ends the call
      throw;
    }
    core->record(detail::coarse_now(*clock), is_accept);
  }
  co_return std::move(*result).get();
}

}  // namespace detail

// A stage that calls through a throttle, judging outcomes with its own
// "accepted" classifier. Cheap to copy; refers to the throttle, which must
// outlive it.
template <class Classifier, class Clock>
class throttle_stage : public stage_base<throttle_stage<Classifier, Clock>> {
 public:
  // For pipeline(): it never waits, so it never outlasts a deadline.
  static constexpr bool respects_deadline = true;

  throttle_stage(detail::adaptive_throttle_core& core, const Clock& clock, Classifier c)
      : core_(&core), clock_(&clock), accepted_(std::move(c)) {}

  // For pipeline(): the clock the throttle reads, checked against the others.
  const Clock& clock() const noexcept { return *clock_; }

 private:
  friend stage_base<throttle_stage>;
  template <class T, class Executor, class Op>
  auto call(Op op, const context& parent) const {
    return detail::throttle_call<T, Executor>(std::move(op), core_, clock_, accepted_, parent);
  }
  detail::adaptive_throttle_core* core_;
  const Clock* clock_;
  [[no_unique_address]] Classifier accepted_;
};

template <resilience::clock Clock = steady_clock>
class basic_adaptive_throttle
    : public shared_state_stage<basic_adaptive_throttle<Clock>, detail::adaptive_throttle_core, Clock> {
  using base = shared_state_stage<basic_adaptive_throttle, detail::adaptive_throttle_core, Clock>;
  using base::clock_;
  using base::core_;

 public:
  // For pipeline(): it never waits, so it never outlasts a deadline.
  static constexpr bool respects_deadline = true;

  // Stages refer to it (not copied).
  explicit basic_adaptive_throttle(adaptive_throttle_options options = {}, Clock clock = {})
      : base(std::move(options), std::move(clock)) {}

  // run(op) and throttle(op) (stage_base) judge with the default classifier
  // (a success is an accept); stage(c) gives a stage with another. Const
  // like every stage's run: the state is shared and synchronised within.
  throttle_stage<accepted_if_succeeded, Clock> stage() const& { return {core_, clock_, {}}; }
  template <class C>
  throttle_stage<C, Clock> stage(C accepted) const& {
    return {core_, clock_, std::move(accepted)};
  }
  // A stage refers to its throttle: one from a temporary would dangle.
  void stage() const&& = delete;
  template <class C>
  void stage(C) const&& = delete;

  // For callers that are not coroutines: whether a call may go now (a
  // rejection is counted and reported), then what it ended with.
  bool try_admit() const { return core_.admit(detail::coarse_now(clock_)); }
  void record(bool accepted) const noexcept { core_.record(detail::coarse_now(clock_), accepted); }

  // The probability a call made now would be rejected with.
  double rejection_probability() const noexcept { return core_.probability(core_.counts(detail::coarse_now(clock_))); }
  throttle_counts counts() const noexcept { return core_.counts(detail::coarse_now(clock_)); }
  // Calls rejected since the throttle was made.
  std::uint64_t rejections() const noexcept { return core_.rejections(); }

 private:
  friend stage_base<basic_adaptive_throttle>;
  template <class T, class Executor, class Op>
  auto call(Op op, const context& parent) const {
    return stage().run(std::move(op), parent);
  }
};

using adaptive_throttle = basic_adaptive_throttle<>;

}  // namespace resilience
