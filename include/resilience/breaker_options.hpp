// resilience/breaker_options.hpp — the configuration of a circuit breaker.
//
//   using namespace std::chrono_literals;
//   const auto options = resilience::breaker_options{}
//                            .count_window(50)     // the last 50 calls...
//                            .failure_ratio(0.5)   // ...half of them failed: open
//                            .open_duration(5s);   // for 5 s, then let a probe through
//   resilience::circuit_breaker breaker{options};
//
// A value type: each setter checks its input and returns a new copy; bad input
// throws std::invalid_argument naming the field. A field left unset yields to
// the fields that are set: count_window(10) alone lowers the minimum of calls
// to 10. Two settings that contradict each other (minimum_calls(50) with
// count_window(10)) throw std::invalid_argument when a breaker is built from
// them: judged from the values in effect then, whatever the setters' order.
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
// Resilience4j differs in four rules; each of ours is a choice, given with
// its reason below, and resilience4j_rules() (or one option each) restores
// theirs for settings ported from it.
#pragma once

#include <resilience/breaker_state.hpp>
#include <resilience/clock.hpp>

#include <cstdint>
#include <functional>
#include <optional>

namespace resilience {

class breaker_options {
 public:
  // The break's length for the n-th consecutive opening (n >= 1; it starts
  // again at 1 once the breaker closes). Negative means zero, duration::max()
  // a break that lasts until reset(). If it throws, the breaker opens for the
  // fixed open_duration and the exception ends the call that opened it.
  //   auto b = backoff::exponential(5s, 2.0, 5min);
  //   options.open_duration([b, r = random_source{}](std::uint32_t n) {
  //     return b.nominal(n) / 2 + b.nominal(n) * r.next_unit() / 2; });  // grows, capped, jittered
  using duration_generator = std::function<duration(std::uint32_t)>;
  enum class window_kind : std::uint8_t { count, time };

  static constexpr std::uint32_t max_count_window = 1u << 20;
  static constexpr std::uint32_t max_buckets = 1024;
  static constexpr std::uint32_t max_permits = 0xffff;
  static constexpr std::uint32_t default_count_window = 100;
  static constexpr std::uint32_t default_minimum_calls = 20;
  static constexpr std::uint32_t default_buckets = 10;

  breaker_options() = default;

  // -- trip conditions --
  breaker_options consecutive_failures(std::uint32_t n) const;  // off by default
  breaker_options failure_ratio(double ratio) const;            // in (0, 1]; 0.5 by default
  breaker_options no_failure_ratio() const;
  breaker_options slow_calls(duration threshold, double ratio) const;  // off by default
  // Selects a count window of `calls` (1 to max_count_window), the default;
  // unset, its size is 100, or minimum_calls() if that is set higher.
  breaker_options count_window(std::uint32_t calls) const;
  // Selects a time window. Without `buckets`: 10, or one per tick of a span
  // shorter than 10 ticks.
  breaker_options time_window(duration span) const;
  breaker_options time_window(duration span, std::uint32_t buckets) const;
  // Ratios are judged from this many calls in the window on. Unset: 20, or
  // the count window's size if that is set lower. Set, a count window of
  // unset size grows to it; one set smaller, or a value past max_count_window,
  // makes building a breaker with a count window throw.
  breaker_options minimum_calls(std::uint32_t n) const;

  // -- open and half-open --
  breaker_options open_duration(duration d) const;  // 10 s by default; duration::max(): until reset()
  breaker_options open_duration(duration_generator g) const;
  breaker_options half_open_permits(std::uint32_t n) const;   // probes at a time; 1 by default
  breaker_options successes_to_close(std::uint32_t m) const;  // 1 by default
  // 60 s by default; duration::max() for none (unset, none with resilience4j_rules()).
  breaker_options half_open_limit(duration d) const;

  // -- Resilience4j's rules --
  // A call is slow when it took longer than the threshold, as Resilience4j
  // counts it. Ours counts "at least as long": a call cut by a timeout equal
  // to the threshold is slow.
  breaker_options slow_only_above_threshold(bool on = true) const;
  // The ratios are judged after every recorded call, a success too: a window
  // that reaches minimum_calls() already past a threshold opens on that
  // success. Ours judges on failed and slow calls only, so that a success
  // reads no window (the hot path); such a window opens at its next failure.
  breaker_options judge_every_call(bool on = true) const;
  // The half-open period lets `probes` calls through in all (at most that
  // many at once) and judges them together once min(minimum_calls(), probes)
  // of them are recorded: a failure ratio at or above failure_ratio(), or a
  // slow-call ratio at or above the slow_calls() ratio, reopens it; below
  // both, it closes; Resilience4j's permittedNumberOfCallsInHalfOpenState.
  // Ours reopens at the first failed (or slow) probe and closes after
  // successes_to_close() successes: a dependency that fails a probe is not
  // ready, and one bad probe costs one break, not a ratio's worth of failed
  // calls. 1 to 65535; building a breaker with neither ratio then throws.
  // 0: ours.
  breaker_options half_open_judged_by_ratio(std::uint32_t probes) const;
  // The first probe goes once the break has strictly elapsed (one clock tick
  // past open_duration), as Resilience4j's clock.instant().isAfter(end) lets
  // it. Ours lets it go at the break's end: a break is as long as it says.
  breaker_options probe_strictly_after_break(bool on = true) const;
  // All four, with Resilience4j's 10 half-open calls by default (1 to 65535),
  // and, unless half_open_limit() is set, no half-open limit: Resilience4j's
  // maxWaitDurationInHalfOpenState of 0 waits for every permitted call.
  breaker_options resilience4j_rules(std::uint32_t half_open_probes = 10) const;

  // -- events: run on the calling thread, outside any lock. What one throws
  // ends the call that caused the event (the transition stands, a probe that
  // call was given goes back): a breaker call ends with it as its outcome,
  // try_acquire(), record() and reset() throw it. --
  breaker_options on_state_change(std::function<void(const state_change&)> f) const;
  breaker_options on_rejection(std::function<void(const rejection&)> f) const;

  // -- reading: the values in effect, defaults resolved --
  std::uint32_t consecutive_failures() const noexcept { return consecutive_failures_; }  // 0: off
  std::optional<double> failure_ratio() const noexcept { return failure_ratio_; }
  std::optional<double> slow_call_ratio() const noexcept { return slow_ratio_; }
  duration slow_call_threshold() const noexcept { return slow_threshold_; }
  window_kind window() const noexcept { return window_; }
  std::uint32_t count_window() const noexcept {
    if (count_window_set_) return count_window_;
    if (minimum_calls_set_ && minimum_calls_ > default_count_window)
      return minimum_calls_ < max_count_window ? minimum_calls_ : max_count_window;
    return default_count_window;
  }
  duration time_window() const noexcept { return time_window_; }
  std::uint32_t buckets() const noexcept { return buckets_; }
  std::uint32_t minimum_calls() const noexcept {
    if (minimum_calls_set_) return minimum_calls_;
    if (window_ == window_kind::count && count_window() < default_minimum_calls) return count_window();
    return default_minimum_calls;
  }
  duration open_duration(std::uint32_t opening) const;
  // The duration set without a generator (10 s unless set): what an opening
  // lasts when the generator throws.
  duration fixed_open_duration() const noexcept { return open_duration_; }
  std::uint32_t half_open_permits() const noexcept { return half_open_permits_; }
  std::uint32_t successes_to_close() const noexcept { return successes_to_close_; }
  duration half_open_limit() const noexcept { return half_open_limit_; }
  bool strict_slow_threshold() const noexcept { return slow_strict_; }
  bool probes_strictly_after_break() const noexcept { return strict_break_; }
  bool judges_every_call() const noexcept { return judge_every_call_; }
  std::uint32_t judged_half_open_probes() const noexcept { return judged_probes_; }  // 0: off
  const std::function<void(const state_change&)>& on_state_change() const noexcept { return on_state_change_; }
  const std::function<void(const rejection&)>& on_rejection() const noexcept { return on_rejection_; }

 private:
  std::uint32_t consecutive_failures_ = 0;
  std::optional<double> failure_ratio_ = 0.5;
  std::optional<double> slow_ratio_;
  duration slow_threshold_ = duration::max();
  window_kind window_ = window_kind::count;
  std::uint32_t count_window_ = default_count_window;
  duration time_window_ = std::chrono::seconds(60);
  std::uint32_t buckets_ = default_buckets;
  std::uint32_t minimum_calls_ = default_minimum_calls;
  bool count_window_set_ = false;
  bool minimum_calls_set_ = false;
  duration open_duration_ = std::chrono::seconds(10);
  duration_generator open_generator_;
  std::uint32_t half_open_permits_ = 1;
  std::uint32_t successes_to_close_ = 1;
  duration half_open_limit_ = std::chrono::seconds(60);
  bool half_open_limit_set_ = false;
  bool slow_strict_ = false;
  bool strict_break_ = false;
  bool judge_every_call_ = false;
  std::uint32_t judged_probes_ = 0;
  std::function<void(const state_change&)> on_state_change_;
  std::function<void(const rejection&)> on_rejection_;
};

}  // namespace resilience
