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
#include <resilience/detail/event_support.hpp>
#include <resilience/detail/gated_call.hpp>
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

}  // namespace resilience

#include <resilience/detail/adaptive_throttle_core.hpp>  // the shared state, which holds the options

namespace resilience {

namespace detail {
// A call through the throttle judged by `accepted`, and by the default
// classifier (impl/adaptive_throttle.hpp).
template <class T, class Executor, class Op, class Clock, class Classifier>
boost::asio::awaitable<T, Executor> stage_call(Op op, adaptive_throttle_core* core, const Clock* clock,
                                               Classifier accepted, const context& ctx);
template <class T, class Executor, class Op, class Clock>
boost::asio::awaitable<T, Executor> stage_call(Op op, adaptive_throttle_core* core, const Clock* clock,
                                               const context& ctx);
}  // namespace detail

// A stage that calls through a throttle, judging outcomes with its own
// "accepted" classifier. Cheap to copy; refers to the throttle, which must
// outlive it.
template <class Classifier, class Clock>
using throttle_stage = judged_stage<detail::adaptive_throttle_core, Classifier, Clock>;

// run(op) and throttle(op) judge with the default classifier (a success is
// an accept); stage(c) gives a stage with another.
template <resilience::clock Clock = steady_clock>
class basic_adaptive_throttle : public judged_state_stage<basic_adaptive_throttle<Clock>, detail::adaptive_throttle_core,
                                                           Clock, accepted_if_succeeded> {
 public:
  using basic_adaptive_throttle::judged_state_stage::judged_state_stage;  // (options = {}, clock = {})

  // For callers that are not coroutines: whether a call may go now (a
  // rejection is counted and reported), then what it ended with.
  bool try_admit() const {
    const auto refused = this->core_.refuse(detail::coarse_now(this->clock_));
    if (refused && this->core_.options().on_throttled()) this->core_.options().on_throttled()(*refused);
    return !refused;
  }
  void record(bool accepted) const noexcept { this->core_.record(detail::coarse_now(this->clock_), accepted); }

  // The probability a call made now would be rejected with.
  double rejection_probability() const noexcept { return this->core_.probability(this->core_.counts(detail::coarse_now(this->clock_))); }
  throttle_counts counts() const noexcept { return this->core_.counts(detail::coarse_now(this->clock_)); }
  // Calls rejected since the throttle was made.
  std::uint64_t rejections() const noexcept { return this->core_.rejections(); }

};

using adaptive_throttle = basic_adaptive_throttle<>;

}  // namespace resilience

#include <resilience/impl/adaptive_throttle.hpp>
