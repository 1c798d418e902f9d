// resilience/detail/breaker_core.hpp — the circuit breaker's state machine.
//
// Independent of the clock's type: compiled once in lib/circuit_breaker.cpp,
// except the closed-state path (admit, record), inline here because every
// call takes it.
//
// Representation:
//   word_     the state (3 bits) and the epoch (61 bits): the number of
//             transitions made so far. Read on every call, written only by
//             transitions. A permit carries the epoch it was given in, so a
//             record made for an earlier period (a call admitted before the
//             breaker opened, a probe that outlived its half-open period) is
//             recognised and dropped. 2^61 transitions would take centuries
//             at one a nanosecond, so an epoch is never reused.
//   phases_   the deadline of an open or half-open period, a whole time_point
//             and a flag for "never", in the slot of its epoch's parity.
//   probes_   probes in flight and probe successes of the half-open period
//             (with half_open_judged_by_ratio, probes recorded; their
//             failures and slow calls are in probe_failures_, tagged the
//             same way).
//
// Transitions happen under mutex_, which nothing else takes: neither the
// closed path nor open-state rejections nor probes wait for it. A transition
// writes what its new period needs (its deadline in its slot, a fresh probe
// count) before it stores word_, with release; a reader that loaded word_
// with acquire finds them. The next transition writes the other slot, so the
// current period's slot is never being rewritten: a reader that finds a slot
// holding another epoch knows that word_ has moved on, and reads it again.
//
// probes_ is tagged with the low 32 bits of its period's epoch and changes by
// compare-and-swap. A probe could be counted in the wrong period only if its
// admission stalled across a multiple of 2^32 transitions; that period's
// half-open limit would still end it.
#pragma once

#include <resilience/breaker_options.hpp>
#include <resilience/breaker_state.hpp>
#include <resilience/clock.hpp>
#include <resilience/detail/breaker_window.hpp>
#include <resilience/event.hpp>

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <utility>

namespace resilience::detail {

// What one step of a call in the breaker (an admission or a record) made
// happen, once its hooks have run: the transitions and the rejection, in
// order, for that call to report to its sink, and the first exception a
// hook (or the open-duration generator) threw, for it to end with. Made by
// the slow paths only, on their caller's stack: the breaker keeps no state
// for it. A breaker call that a hook makes itself has news of its own.
struct breaker_news {
  struct item {
    event_kind kind;
    duration delay;  // a rejection's retry-after, an opening's length
  };
  item items[3];
  std::uint8_t count = 0;
  std::exception_ptr hook_error;

  void add(event_kind k, duration d) noexcept {
    if (count < 3) items[count++] = {k, d};
  }
  void keep(std::exception_ptr e) noexcept {
    if (!hook_error) hook_error = std::move(e);
  }
};

// t + d and later - earlier without overflow, for any time a clock may read:
// a sum past the end of time_point's range is time_point::max(); a
// difference is clamped to [0, duration::max()].
inline time_point clamped_add(time_point t, duration d) noexcept {
  duration::rep r;
  if (__builtin_add_overflow(t.time_since_epoch().count(), d.count(), &r))
    return d > duration::zero() ? time_point::max() : time_point::min();
  return time_point(duration(r));
}
inline duration clamped_since(time_point earlier, time_point later) noexcept {
  duration::rep r;
  if (later <= earlier) return duration::zero();
  if (__builtin_sub_overflow(later.time_since_epoch().count(), earlier.time_since_epoch().count(), &r))
    return duration::max();
  return duration(r);
}

enum class admission : std::uint8_t { rejected, closed, probe, pass, undecided };

// What acquire() grants: enough to record the call later.
struct breaker_ticket {
  std::uint64_t epoch = 0;
  duration time{};  // start (time since the clock's epoch) when calls are timed; retry_after when rejected
  admission kind = admission::rejected;
};

class breaker_core {
 public:
  // It never waits, so it never outlasts a deadline.
  static constexpr bool respects_deadline = true;

  enum class result : std::uint8_t { success, failure, neither };

  breaker_core(breaker_options options, clock_ref clock);
  ~breaker_core();
  breaker_core(const breaker_core&) = delete;
  breaker_core& operator=(const breaker_core&) = delete;

  // The closed (and disabled) path; `undecided` when the state needs the
  // slow path, which may run the application's callbacks (breaker_options'
  // on_state_change, on_rejection) and tells what happened in `news`.
  breaker_ticket acquire() const noexcept {
    const std::uint64_t w = word_.load(std::memory_order_acquire);
    const circuit_state s = state_of(w);
    if (s == circuit_state::closed || s == circuit_state::metrics_only) [[likely]]
      return {epoch_of(w), slow_on_ ? now().time_since_epoch() : duration::zero(), admission::closed};
    if (s == circuit_state::disabled) return {epoch_of(w), {}, admission::pass};
    return {0, {}, admission::undecided};
  }
  breaker_ticket acquire_slow(breaker_news& news) noexcept;

  // Records a call that counts as neither slow nor a failure in a closed
  // period where that can trip nothing: true when done, false when the call
  // needs finish().
  bool finish_success_fast(const breaker_ticket& t) noexcept {
    if (t.kind != admission::closed || !by_count_ || judge_every_call_ || (slow_on_ && took(t) >= slow_threshold_))
      return false;
    const std::uint64_t w = word_.load(std::memory_order_relaxed);
    if (epoch_of(w) != t.epoch) return true;  // admitted before a transition: not this period's call
    // Load first: while nothing fails, successes only read this line.
    if (track_run_ && consecutive_->load(std::memory_order_relaxed) != 0)
      consecutive_->store(0, std::memory_order_relaxed);
    count_->record_success();  // cannot trip it
    return true;
  }
  // Any record; what its transition's hooks did goes to `news`.
  void finish(const breaker_ticket& t, result r, breaker_news& news) noexcept {
    if (t.kind == admission::closed) {
      if (r == result::neither) return;
      record_closed(t.epoch, r == result::failure, slow_on_ && took(t) >= slow_threshold_, news);
    } else if (t.kind == admission::probe) {
      const bool slow = r != result::neither && slow_on_ && took(t) >= slow_threshold_;
      if (judged_probes_ != 0) return settle_judged_probe(t.epoch, r, slow, news);
      if (r == result::success && slow) r = result::failure;
      settle_probe(t.epoch, r, news);
    }
  }

  // Neither success nor failure: runs no callback, so it cannot throw.
  void give_back(const breaker_ticket& t) noexcept {
    if (t.kind != admission::probe) return;
    breaker_news none;  // a probe given back ends nothing
    settle_probe(t.epoch, result::neither, none);
  }

  time_point now() const noexcept { return clock_.now(); }
  const clock_ref& clock() const noexcept { return clock_; }
  const breaker_options& options() const noexcept { return options_; }

  // Manual control; each is one transition (or none, if already there),
  // made by no call: its hooks run, and what they throw is thrown here.
  void move_to(circuit_state target);
  void poll();
  circuit_state state() const noexcept { return state_of(word_.load(std::memory_order_acquire)); }
  duration time_until_probe() const noexcept;
  breaker_metrics metrics() const noexcept;

 private:
  static circuit_state state_of(std::uint64_t w) noexcept { return static_cast<circuit_state>(w & 7); }
  static std::uint64_t epoch_of(std::uint64_t w) noexcept { return w >> 3; }
  static std::uint64_t make_word(circuit_state s, std::uint64_t epoch) noexcept {
    return static_cast<std::uint64_t>(s) | (epoch << 3);
  }

  // The deadline of one open or half-open period.
  struct phase {
    time_point deadline;
    bool never;
    bool due(time_point now) const noexcept { return !never && now >= deadline; }
    duration left(time_point now) const noexcept { return never ? duration::max() : clamped_since(now, deadline); }
  };
  struct phase_slot {
    std::atomic<std::uint64_t> tag{0};  // epoch << 2 | never << 1 | 1; 0 while being written
    std::atomic<duration::rep> deadline{0};
  };

  duration took(const breaker_ticket& t) const noexcept { return clamped_since(time_point(t.time), now()); }
  duration since_origin(time_point t) const noexcept { return clamped_since(origin_, t); }

  void record_closed(std::uint64_t epoch, bool failure, bool slow, breaker_news& news) noexcept {
    const std::uint64_t w = word_.load(std::memory_order_relaxed);
    if (epoch_of(w) != epoch) return;  // admitted before a transition: not this period's call
    std::uint32_t run = 0;
    if (!track_run_) {
    } else if (failure) {
      run = consecutive_->fetch_add(1, std::memory_order_relaxed) + 1;
    } else if (consecutive_->load(std::memory_order_relaxed) != 0) {
      consecutive_->store(0, std::memory_order_relaxed);
    }
    if (by_count_) {
      if (!failure && !slow && !judge_every_call_) {
        count_->record_success();  // cannot trip it
        return;
      }
      const window_counts c = count_->record_now(failure, slow);
      if (state_of(w) == circuit_state::closed) trip_if_due(epoch, run, &c, news);
    } else {
      time_->record(since_origin(now()), failure, slow);
      if ((failure || slow || judge_every_call_) && state_of(w) == circuit_state::closed)
        trip_if_due(epoch, run, nullptr, news);
    }
  }

  breaker_ticket reject(circuit_state s, duration retry_after, breaker_news& news) noexcept;
  void settle_probe(std::uint64_t epoch, result r, breaker_news& news) noexcept;
  void settle_judged_probe(std::uint64_t epoch, result r, bool slow, breaker_news& news) noexcept;
  // `known`: the window's counts as the call being evaluated left them, if
  // the window gave them; null to read them.
  void trip_if_due(std::uint64_t epoch, std::uint32_t run, const window_counts* known, breaker_news& news) noexcept;
  window_counts counts() const noexcept;
  bool transition(std::uint64_t expected, circuit_state to, time_point now, breaker_news& news,
                  bool first_probe = false) noexcept;
  void publish(std::uint64_t epoch, time_point now, duration length, bool strict = false) noexcept;
  std::optional<phase> phase_of(std::uint64_t epoch) const noexcept;

  // Read on every call, written only by transitions; the rest of this line
  // is read-only after construction.
  alignas(64) std::atomic<std::uint64_t> word_;
  clock_ref clock_;
  time_point origin_;  // the time window's slices count from here
  duration slow_threshold_;
  std::uint32_t minimum_calls_;
  bool slow_on_;
  bool track_run_;  // consecutive failures are counted only when they can trip it
  bool by_count_;
  bool judge_every_call_;
  bool strict_break_;
  std::uint32_t judged_probes_;  // half_open_judged_by_ratio(); 0: off
  std::uint32_t judged_at_;      // probes recorded when they are judged: min(minimum_calls, judged_probes_)
  std::atomic<std::uint32_t>* consecutive_ = nullptr;  // in the window, on the line its failures write

  std::optional<count_window> count_;  // one of these two, as by_count_ says
  std::optional<time_window> time_;

  alignas(64) std::atomic<std::uint64_t> probes_{0};
  // With judged probes: the low 32 bits of the period's epoch | slow probes
  // (16) | failed probes (16); both counts at most max_permits.
  std::atomic<std::uint64_t> probe_failures_{0};
  phase_slot phases_[2];
  std::atomic<std::uint64_t> rejections_{0};
  std::atomic<std::uint32_t> openings_{0};  // consecutive openings, for the open-duration generator
  std::mutex mutex_;                        // serialises transitions
  breaker_options options_;
};

}  // namespace resilience::detail
