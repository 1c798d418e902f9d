// resilience/adaptive_timeout.hpp — a timeout that follows the latency of its call.
//
//   using namespace std::chrono_literals;
//   // p99 of the last 200 calls plus one standard deviation, kept in
//   // [20ms, 2s]; 500ms until 20 calls have been seen.
//   const resilience::latency_tracker db_latency(resilience::latency_tracker_options{}
//                                                    .window(200)
//                                                    .percentile(99)
//                                                    .deviations(1)
//                                                    .bounds(20ms, 2s)
//                                                    .initial(500ms)
//                                                    .min_samples(20));
//   const auto query_timeout = resilience::adaptive_timeout(db_latency);
//   auto row = co_await query_timeout([&] { return db.async_query(sql); });
//
// latency_tracker keeps the latencies of the last `window` calls and turns
// them into a limit:
//
//   limit = clamp(P + k * S, min, max)
//
// where P is the nearest-rank percentile of the window (the smallest sample
// that at least `percentile`% of the samples do not exceed: the sample of
// rank ceil(percentile / 100 * n) in ascending order, n the samples held), S
// is the population standard deviation of the window (divided by n, not
// n - 1) and k is `deviations`. Until `min_samples` latencies have been
// recorded, the limit is `initial`, clamped to [min, max] as well.
//
// basic_adaptive_timeout is the timeout stage (see timeout.hpp) with the
// tracker's current limit in place of a fixed one, read once per call. What
// the call ends with decides what it records:
//   - a success or an ordinary failure: its latency, measured with the stage's
//     clock (a late success of an op that ignored cancellation included);
//   - this stage's timeout: the limit itself. The true latency is unknown but
//     at least that, so a run of timeouts fills the window with the limit and
//     pushes the percentile up to it and, with k > 0, beyond, towards max;
//   - a cancellation, or deadline_exceeded once the context's deadline has
//     passed: nothing, since the call says nothing about the op's latency.
//
// A tracker is a handle: copies share one window, so every stage made from a
// copy feeds and reads the same estimate. Give each kind of call its own
// tracker. record() and current() are thread-safe; current() is one atomic
// load. record() takes a mutex for O(window) work (an insertion into a sorted
// copy of the window and one pass for the deviation) and never allocates:
// its buffers are sized when the tracker is made.
//
// Each call holds a copy of the stage, which shares the tracker.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>
#include <resilience/detail/with_option.hpp>
#include <resilience/stage.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace resilience {

// How a latency_tracker turns recent latencies into a limit. A value type:
// each setter validates its field (std::invalid_argument names it) and
// returns a new set of options. The two checks that span fields (min_samples
// <= window, and min <= max, which bounds() takes together) leave the order of
// the setters free: latency_tracker makes the first.
class latency_tracker_options {
 public:
  latency_tracker_options() = default;

  // The largest window. record() does O(window) work under the tracker's
  // mutex on every call (about 1.5 ns a sample: 0.1 ms here, 1.5 ms at 2^20,
  // which would serialise the callers), and the tracker holds two buffers of
  // 8 bytes a sample (1 MiB here). 65536 samples already resolve p99.99.
  static constexpr std::size_t max_window = std::size_t{1} << 16;

  // How many of the most recent latencies the estimate uses. In
  // [1, max_window].
  latency_tracker_options window(std::size_t samples) const;
  // Which percentile of the window, in (0, 100]: 50 is the median, 100 the
  // slowest call held.
  latency_tracker_options percentile(double p) const;
  // How many standard deviations of the window are added to the percentile:
  // headroom that grows when latency is erratic. Finite and >= 0.
  latency_tracker_options deviations(double k) const;
  // The range every limit is clamped to. Both positive, min <= max.
  latency_tracker_options bounds(duration min, duration max) const;
  // The limit used until min_samples latencies are known. Positive; clamped
  // to the bounds like any other limit.
  latency_tracker_options initial(duration limit) const;
  // How many latencies must be recorded before they replace the initial
  // limit: a percentile of three samples says little. In [1, window]; above
  // max_window no window can hold it, so that is rejected here already.
  latency_tracker_options min_samples(std::size_t n) const;

  std::size_t window() const noexcept { return window_; }
  double percentile() const noexcept { return percentile_; }
  double deviations() const noexcept { return deviations_; }
  duration min() const noexcept { return min_; }
  duration max() const noexcept { return max_; }
  duration initial() const noexcept { return initial_; }
  std::size_t min_samples() const noexcept { return min_samples_; }

  friend bool operator==(const latency_tracker_options&, const latency_tracker_options&) = default;

 private:
  std::size_t window_ = 100;
  double percentile_ = 99.0;
  double deviations_ = 1.0;
  duration min_ = std::chrono::milliseconds(10);
  duration max_ = std::chrono::seconds(30);
  duration initial_ = std::chrono::seconds(1);
  std::size_t min_samples_ = 10;
};

// The numbers behind a tracker's current limit, for tests and metrics.
// percentile and stddev are zero while the window is empty.
struct latency_stats {
  std::size_t samples = 0;  // latencies in the window, at most `window`
  duration percentile{};    // nearest-rank percentile of the window
  duration stddev{};        // population standard deviation of the window
  duration limit{};         // what current() returns

  friend bool operator==(const latency_stats&, const latency_stats&) = default;
};

class latency_tracker {
 public:
  latency_tracker() : latency_tracker(latency_tracker_options{}) {}

  explicit latency_tracker(const latency_tracker_options& options);

  // The limit for the next call. Lock-free.
  duration current() const noexcept { return duration(state_->limit.load(std::memory_order_relaxed)); }

  // Adds one latency to the window, forgetting the oldest once it is full,
  // and recomputes the limit. Negative latencies count as zero.
  void record(duration latency) const;

  latency_stats stats() const;

  const latency_tracker_options& options() const noexcept { return state_->options; }

 private:
  // Defined here for current(), one inline atomic load; the work is in
  // lib/adaptive_timeout.cpp.
  struct state {
    explicit state(const latency_tracker_options& o);

    duration clamped(duration d) const;
    // Called under the mutex after every change of the window.
    void recompute();

    const latency_tracker_options options;
    std::mutex mutex;
    std::vector<duration::rep> ring;    // the window in arrival order, by slot
    std::vector<duration::rep> sorted;  // the same samples, ascending
    std::size_t next = 0;               // the slot the next sample goes to
    latency_stats stats;
    std::atomic<duration::rep> limit{0};
  };

  std::shared_ptr<state> state_;
};

namespace detail {
template <class T, class Executor, class Op, class Held>
boost::asio::awaitable<T, Executor> run_adaptive(Op op, Held held, context ctx);
}  // namespace detail

template <class Clock = steady_clock>
class basic_adaptive_timeout : public value_stage_base<basic_adaptive_timeout<Clock>> {
 public:
  // For pipeline(): this stage bounds the op it runs in time, and never waits
  // past the context's deadline.
  static constexpr bool bounds_op = true;
  static constexpr bool respects_deadline = true;

  explicit basic_adaptive_timeout(latency_tracker tracker, Clock clock = {})
      : tracker_(std::move(tracker)), clock_(std::move(clock)) {}

  // How the op is cancelled when time runs out, as for basic_timeout.
  basic_adaptive_timeout cancellation(boost::asio::cancellation_type type) const {
    return resilience::detail::with_option(*this, &basic_adaptive_timeout::type_,
        detail::checked_cancellation(type, "adaptive_timeout"));
  }

  template <resilience::clock K>
  basic_adaptive_timeout<K> clock(K k) const {
    return basic_adaptive_timeout<K>(tracker_, std::move(k)).cancellation(type_);
  }

  // The limit the next call would get.
  duration limit() const noexcept { return tracker_.current(); }
  const latency_tracker& tracker() const noexcept { return tracker_; }
  boost::asio::cancellation_type cancellation_type() const noexcept { return type_; }
  const Clock& clock() const noexcept { return clock_; }

  // The stage interface (value_stage_base): run(op) holds a copy of this
  // stage (a share of its tracker), so the awaitable may outlive it.

 private:
  friend value_stage_base<basic_adaptive_timeout>;
  template <class T, class Executor, class Op, class Held>
  static constexpr auto call = &detail::run_adaptive<T, Executor, Op, Held>;
  latency_tracker tracker_;
  boost::asio::cancellation_type type_ = boost::asio::cancellation_type::terminal;
  [[no_unique_address]] Clock clock_;
};

inline basic_adaptive_timeout<> adaptive_timeout(latency_tracker tracker) {
  return basic_adaptive_timeout<>(std::move(tracker));
}

namespace detail {

// What a call that ended with `ec` adds to the tracker: see the top of this
// header.
template <class Clock>
void record_call(const latency_tracker& tracker, const Clock& clock, const error_code& ec, const context& ctx,
                 time_point started, duration limit) {
  if (is_cancellation(ec)) return;
  const time_point now = clock.now();
  if (ec == error::deadline_exceeded && now >= ctx.deadline) return;
  const duration latency = now - started;
  // The op may report a timeout of its own before this stage's limit: that
  // is an ordinary failure with a known latency.
  tracker.record(ec == error::timeout && latency >= limit ? limit : latency);
}

// One layer around run_bounded: reads the limit, times the call, records it.
// The error is read without building an outcome, so a success costs no more
// than the value's own error check.
template <class T, class Executor, class Op, class Held>
boost::asio::awaitable<T, Executor> run_adaptive(Op op, Held held, context ctx) {
  const auto* stage = &deref(held);
  const latency_tracker& tracker = stage->tracker();
  const auto& clock = stage->clock();
  const duration limit = tracker.current();
  const time_point started = clock.now();
  try {
    if constexpr (std::is_void_v<T>) {
      co_await run_bounded<T, Executor>(std::move(op), ctx, clock, limit, stage->cancellation_type());
      record_call(tracker, clock, error_code{}, ctx, started, limit);
    } else {
      T value = co_await run_bounded<T, Executor>(std::move(op), ctx, clock, limit, stage->cancellation_type());
      record_call(tracker, clock, outcome_traits<T>::error(value), ctx, started, limit);
      co_return std::move(value);
    }
  } catch (const boost::system::system_error& e) {
    record_call(tracker, clock, e.code(), ctx, started, limit);
    throw;
  } catch (...) {
    record_call(tracker, clock, error_code{}, ctx, started, limit);
    throw;
  }
}

}  // namespace detail


}  // namespace resilience
