// resilience/metrics.hpp — counts of strategy events and histograms of call
// durations, recorded without a lock.
//
//   resilience::metrics telemetry;  // one per process: sinks and stages refer to it
//   resilience::circuit_breaker breaker;
//   const auto call_backend = resilience::pipeline(
//       telemetry.stage("backend"),                    // outermost: each whole call
//       resilience::retry_policy{},
//       breaker,
//       telemetry.attempt_stage("backend"),            // inside the retry: each attempt
//       resilience::timeout(300ms))
//     .events(telemetry.events("backend"));            // every stage's events (event.hpp)
//   std::string page = resilience::prometheus_text(telemetry);  // prometheus.hpp
//
// What is recorded, named after OpenTelemetry's conventions for resilience
// pipelines (label names as written; a Prometheus writer turns dots into
// underscores):
//
//   resilience.strategy.events            counter
//       pipeline.name, strategy.name, event.name, outcome, and
//       http.response.status_code on the server's events with a status
//   resilience.strategy.attempt.duration  histogram, seconds
//       pipeline.name, attempt.number ("1" to "4", then "5+"), outcome
//   resilience.pipeline.duration          histogram, seconds
//       pipeline.name, outcome
//
// `outcome` is one of success, error, exception, cancelled (call_outcome):
// `error` is a known error code, in T's error channel or a thrown
// boost::system::system_error; `exception` any other exception; `cancelled`
// operation_aborted or any code equal to errc::operation_canceled. Events with
// no call outcome (a breaker's transitions, a server's) say `none`. A retried
// value without an error code (a 503 response the classifier calls
// transient) counts as `error`: the retry handled it as one.
//
// strategy.name and event.name are the event's (event.hpp: strategy_of(),
// to_string(); the list is event.hpp's event_kind, tabled in docs/metrics.md).
//
// Cost. A stage's success path reports nothing. An event is a virtual call
// to the sink and an index into a table of counters: relaxed fetch_adds, no
// lock, no allocation, except the first time a sink sees an (event, outcome,
// status) series, which takes the registry's lock once. A series appears in snapshots
// once it has recorded something.
//
// Durations are read on the pipeline's clock (the stage takes it from
// pipeline(...).clock(c) like every stage), before and after the op. The
// stages add no suspension of their own and hand the op's outcome back
// unchanged; a call whose frame is destroyed unresumed (its execution context
// destroyed) records nothing. Bucket bounds are upper bounds, inclusive
// (Prometheus `le`), fixed when the registry is made.
//
// The application's own instruments live in the same registry and on the same
// page: counter(), gauge() and histogram() (seconds) by name and labels,
// written from the moment they are made, at zero too. Made under the
// registry's lock; recorded without one. http/telemetry.hpp records
// OpenTelemetry's HTTP client and server metrics into it.
//
// Lifetime: the registry can be neither copied nor moved, and must outlive
// every hook, stage and instrument made from it; asking a temporary for one
// does not compile.
#pragma once

#include <resilience/classifier.hpp>
#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>
#include <resilience/stage.hpp>

#include <boost/asio/awaitable.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace resilience {

template <class T>
call_outcome classify_outcome(const outcome<T>& o) noexcept {
  if (o.cancelled()) return call_outcome::cancelled;
  if (o.error().failed()) return call_outcome::error;
  return o.has_exception() ? call_outcome::exception : call_outcome::success;
}

class metrics_options {
 public:
  static constexpr std::size_t max_buckets = 32;

  // 15 buckets from 1 ms, doubling: 1 ms to 16.384 s.
  metrics_options();

  // `count` upper bounds: first, first × factor, first × factor², …
  // first positive, factor above 1, count 1 to max_buckets, and consecutive
  // bounds at least 1 ns apart and at most a day (so sums stay far from
  // overflow). Throws std::invalid_argument naming the field.
  metrics_options exponential_buckets(duration first, double factor, std::size_t count) const;
  // Upper bounds given one by one: 1 to max_buckets of them, positive,
  // strictly increasing, at most a day.
  metrics_options buckets(std::initializer_list<duration> bounds) const;

  std::span<const duration> bucket_bounds() const& noexcept { return {bounds_.data(), size_}; }
  // The span would point into a temporary.
  std::span<const duration> bucket_bounds() const&& = delete;

 private:
  std::array<duration, max_buckets> bounds_{};
  std::size_t size_ = 0;
};

// A family's kind.
enum class metric_kind : std::uint8_t { counter, histogram, gauge };

namespace detail {

struct metric_counter {
  std::atomic<std::uint64_t> value{0};
  void add() noexcept { value.fetch_add(1, std::memory_order_relaxed); }
};

struct metric_histogram {
  // Per bucket, not cumulative; the one past the last bound is +Inf.
  std::array<std::atomic<std::uint64_t>, metrics_options::max_buckets + 1> counts{};
  std::atomic<std::int64_t> sum_ns{0};
};

// The histograms of one stage, by attempt number slot and outcome.
struct duration_series {
  static constexpr std::uint32_t attempt_slots = 5;  // "1" to "4", "5+"
  const duration* bounds = nullptr;
  std::size_t bound_count = 0;
  std::uint32_t slots = 1;  // 1 for a whole-call stage
  std::array<metric_histogram*, attempt_slots * call_outcome_count> histograms{};

  std::size_t slot_of(std::uint32_t attempt) const noexcept {
    return slots == 1 ? 0 : std::min(std::max(attempt, 1u), slots) - 1;
  }
  void record(std::size_t slot, call_outcome o, duration d) const noexcept {
    if (d < duration::zero()) d = duration::zero();
    metric_histogram& h = *histograms[slot * call_outcome_count + static_cast<std::size_t>(o)];
    const auto bucket = std::lower_bound(bounds, bounds + bound_count, d) - bounds;
    h.counts[static_cast<std::size_t>(bucket)].fetch_add(1, std::memory_order_relaxed);
    h.sum_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(), std::memory_order_relaxed);
  }
};

template <class T>
call_outcome value_outcome(const T& v) noexcept {
  if constexpr (!std::is_void_v<T> && outcome_traits<T>::has_error_channel) {
    const error_code ec = outcome_traits<T>::error(v);
    if (!ec.failed()) return call_outcome::success;
    return is_cancellation(ec) ? call_outcome::cancelled : call_outcome::error;
  } else {
    return call_outcome::success;
  }
}
// From inside a catch block: error for a system_error (cancelled for its
// cancellation codes), exception otherwise.
call_outcome current_exception_outcome() noexcept;

// The metered stage's default: a value counts as its error channel says.
struct no_failure_rule {};

// A call timed and counted in `series` (impl/metrics.hpp).
template <class T, class Executor, class Op, class Clock, class Failure>
boost::asio::awaitable<T, Executor> metered_call(Op op, const duration_series* series, Clock clock, Failure failure,
                                                 context ctx);

}  // namespace detail

class metrics;

// Records each call's duration and outcome; a stage of any pipeline. Cheap
// to copy (a pointer and the clock).
template <resilience::clock Clock = steady_clock, class Failure = detail::no_failure_rule>
class basic_metered_stage : public stage_base<basic_metered_stage<Clock, Failure>> {
 public:
  // Adds no wait of its own: a deadline stage outside needs no timer for it.
  static constexpr bool respects_deadline = true;
  using clock_type = Clock;

  template <resilience::clock K>
  basic_metered_stage<K, Failure> clock(K k) const {
    return basic_metered_stage<K, Failure>(series_, std::move(k), failure_);
  }
  const Clock& clock() const noexcept { return clock_; }

  // Values the classifier selects (a classifier of any stage's shape) are
  // recorded with outcome `error`, like error codes: a 503 response the
  // retry gave up on is a failed call, not a success.
  //   telemetry.stage("backend").failures_are(resilience::http::breaker_classifier{})
  template <class C>
  basic_metered_stage<Clock, C> failures_are(C classifier) const {
    return basic_metered_stage<Clock, C>(series_, clock_, std::move(classifier));
  }

  // run(op) and stage(op) (stage_base): the call keeps a copy of the clock,
  // so only the registry must outlive it.

 private:
  friend stage_base<basic_metered_stage>;
  template <class T, class Executor, class Op>
  auto call(Op op, const context& parent) const {
    return detail::metered_call<T, Executor>(std::move(op), series_, clock_, failure_, parent);
  }
  friend class metrics;
  template <resilience::clock, class>
  friend class basic_metered_stage;
  basic_metered_stage(const detail::duration_series* s, Clock k, Failure f = {})
      : series_(s), clock_(std::move(k)), failure_(std::move(f)) {}

  const detail::duration_series* series_;
  [[no_unique_address]] Clock clock_;
  [[no_unique_address]] Failure failure_;
};

using metered_stage = basic_metered_stage<>;

// One series' labels, as name and value; names as OpenTelemetry writes them
// (letters, digits, '_' and '.', not starting with a digit).
using metric_labels = std::vector<std::pair<std::string, std::string>>;

// OpenTelemetry's default bucket bounds for HTTP request durations: 5 ms,
// 10, 25, 50, 75, 100, 250, 500, 750 ms, 1 s, 2.5, 5, 7.5, 10 s.
std::span<const duration> http_duration_buckets() noexcept;

// The application's own instruments (metrics::counter, gauge, histogram): a
// pointer into the registry, cheap to copy; recording is one relaxed atomic
// operation (two for a histogram, after a search of its bounds).
class metric_counter_ref {
 public:
  void add(std::uint64_t n = 1) const noexcept { cell_->fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const noexcept { return cell_->load(std::memory_order_relaxed); }

 private:
  friend class metrics;
  explicit metric_counter_ref(std::atomic<std::uint64_t>* c) noexcept : cell_(c) {}
  std::atomic<std::uint64_t>* cell_;
};

class metric_gauge_ref {
 public:
  void set(std::int64_t v) const noexcept { cell_->store(v, std::memory_order_relaxed); }
  void add(std::int64_t d) const noexcept { cell_->fetch_add(d, std::memory_order_relaxed); }
  std::int64_t value() const noexcept { return cell_->load(std::memory_order_relaxed); }

 private:
  friend class metrics;
  explicit metric_gauge_ref(std::atomic<std::int64_t>* c) noexcept : cell_(c) {}
  std::atomic<std::int64_t>* cell_;
};

class metric_histogram_ref {
 public:
  void record(duration d) const noexcept {
    if (d < duration::zero()) d = duration::zero();
    const auto bucket = std::lower_bound(bounds_.begin(), bounds_.end(), d) - bounds_.begin();
    cell_->counts[static_cast<std::size_t>(bucket)].fetch_add(1, std::memory_order_relaxed);
    cell_->sum_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(),
                            std::memory_order_relaxed);
  }

 private:
  friend class metrics;
  metric_histogram_ref(detail::metric_histogram* c, std::span<const duration> b) noexcept : cell_(c), bounds_(b) {}
  detail::metric_histogram* cell_;
  std::span<const duration> bounds_;  // the family's, in the registry
};

// What a registry holds at one moment (snapshot()), for writers
// (prometheus.hpp) and tests.
struct metric_sample {
  std::vector<std::pair<std::string, std::string>> labels;  // in the family's label order
  std::uint64_t count = 0;  // a counter's value; a histogram's observations
  std::int64_t gauge = 0;   // a gauge's value
  duration sum{};           // histograms
  std::vector<std::uint64_t> cumulative;  // histograms: observations <= each bound, then +Inf
};

struct metric_family {
  std::string name;  // OpenTelemetry's, with dots
  std::string unit;  // "s" for durations, "" for counts
  std::string help;
  metric_kind kind;
  std::vector<metric_sample> samples;  // sorted by label values
  std::vector<duration> bounds;        // a histogram's own bucket bounds; empty: the snapshot's
};

struct metrics_snapshot {
  std::vector<duration> bounds;
  std::vector<metric_family> families;  // sorted by name; families without samples left out
};

class metrics {
 public:
  explicit metrics(metrics_options options = {});
  ~metrics();
  metrics(const metrics&) = delete;
  metrics& operator=(const metrics&) = delete;

  // The event sink of one pipeline (`pipeline` names it, in the
  // pipeline.name label): give it to pipeline(...).events(), a client's or a
  // server's options. Counts every event as resilience.strategy.events. The
  // same name gives the same sink, owned by the registry. A name must not be
  // empty: std::invalid_argument.
  event_sink& events(std::string_view pipeline) &;
  // resilience.pipeline.duration: put it outermost.
  metered_stage stage(std::string_view pipeline) &;
  // resilience.strategy.attempt.duration: put it inside the retry stage.
  metered_stage attempt_stage(std::string_view pipeline) &;

  // A temporary registry would be gone before the first event.
  event_sink& events(std::string_view) && = delete;
  metered_stage stage(std::string_view) && = delete;
  metered_stage attempt_stage(std::string_view) && = delete;

  // The application's own instruments. The same name and labels give the
  // same series; a name keeps the kind, label names (in order) and bounds it
  // was first made with, and one of the registry's own families' names is
  // refused: std::invalid_argument, as for a malformed name. `help` is kept
  // from the first call that gives one. A histogram's bounds: the registry's
  // when empty, else checked as metrics_options::buckets checks them.
  metric_counter_ref counter(std::string_view name, const metric_labels& labels = {}, std::string_view help = {}) &;
  metric_gauge_ref gauge(std::string_view name, const metric_labels& labels = {}, std::string_view help = {}) &;
  metric_histogram_ref histogram(std::string_view name, const metric_labels& labels = {}, std::string_view help = {},
                                 std::span<const duration> bounds = {}) &;
  metric_counter_ref counter(std::string_view, const metric_labels& = {}, std::string_view = {}) && = delete;
  metric_gauge_ref gauge(std::string_view, const metric_labels& = {}, std::string_view = {}) && = delete;
  metric_histogram_ref histogram(std::string_view, const metric_labels& = {}, std::string_view = {},
                                 std::span<const duration> = {}) && = delete;

  // Every series that has recorded something. Takes the lock that
  // registration takes, never one that recording takes; counts recorded
  // meanwhile may or may not be in it.
  metrics_snapshot snapshot() const;
  const metrics_options& options() const noexcept { return options_; }

 private:
  struct registry;
  class pipeline_events;
  const detail::duration_series* durations(bool per_attempt, std::string_view pipeline, const char* who);
  struct user_series;
  user_series& instrument(metric_kind kind, std::string_view name, const metric_labels& labels, std::string_view help,
                          std::span<const duration> bounds, const char* who);

  metrics_options options_;
  std::unique_ptr<registry> registry_;
};

}  // namespace resilience

#include <resilience/impl/metrics.hpp>
