// The breaker's state machine (detail/breaker_core.hpp) beyond the closed
// path: transitions, open and half-open periods, probes, manual control.
#include <resilience/context.hpp>
#include <resilience/detail/breaker_core.hpp>
#include <resilience/detail/event_support.hpp>
#include <resilience/error.hpp>

#include <algorithm>
#include <exception>
#include <utility>
#include <limits>
#include <stdexcept>
#include <string>

namespace resilience {

const char* to_string(circuit_state s) noexcept {
  switch (s) {
    case circuit_state::closed: return "closed";
    case circuit_state::open: return "open";
    case circuit_state::half_open: return "half_open";
    case circuit_state::isolated: return "isolated";
    case circuit_state::disabled: return "disabled";
    case circuit_state::metrics_only: return "metrics_only";
  }
  return "unknown";
}

namespace detail {

namespace {

// probes_: the low 32 bits of the period's epoch | probes in flight (16) |
// probe successes (16). Both counts are at most max_permits.
constexpr std::uint64_t one_in_flight = std::uint64_t(1) << 16;
constexpr std::uint32_t count_max = 0xffff;
std::uint64_t make_probes(std::uint64_t epoch, std::uint32_t in_flight, std::uint32_t successes) noexcept {
  return (epoch << 32) | (std::uint64_t(in_flight) << 16) | successes;
}
bool same_period(std::uint64_t probes, std::uint64_t epoch) noexcept {
  return (probes >> 32) == (epoch & 0xffffffffu);
}
std::uint32_t in_flight_of(std::uint64_t probes) noexcept { return static_cast<std::uint32_t>(probes >> 16) & count_max; }
std::uint32_t successes_of(std::uint64_t probes) noexcept { return static_cast<std::uint32_t>(probes) & count_max; }

event_kind kind_of(circuit_state s) noexcept {
  switch (s) {
    case circuit_state::closed: return event_kind::circuit_closed;
    case circuit_state::open: return event_kind::circuit_opened;
    case circuit_state::half_open: return event_kind::circuit_half_opened;
    case circuit_state::isolated: return event_kind::circuit_isolated;
    case circuit_state::disabled: return event_kind::circuit_disabled;
    case circuit_state::metrics_only: return event_kind::circuit_metrics_only;
  }
  return event_kind::circuit_closed;
}

// Runs a callback so that what it throws is kept for the call's end, not
// thrown through the breaker's state machine.
template <class F, class Event>
void run_hook(const F& f, const Event& e, breaker_news& news) noexcept {
  try {
    f(e);
  } catch (...) {
    news.keep(std::current_exception());
  }
}

void rethrow_hook_error(const breaker_news& news) {
  if (news.hook_error) [[unlikely]]
    std::rethrow_exception(news.hook_error);
}

}  // namespace

// The news of a call's step, to its sink (if it has one), then what a hook threw.
void report(const breaker_news& news, const context* ctx) {
  if (ctx) {
    for (std::uint8_t i = 0; i < news.count; ++i) {
      const auto& item = news.items[i];
      if (item.kind == event_kind::circuit_rejected) {
        ctx->report(refusal_event(event_kind::circuit_rejected, resilience::error::circuit_open, item.delay));
      } else {
        event e{item.kind};
        e.delay = item.delay;
        ctx->report(e);
      }
    }
  }
  rethrow_hook_error(news);
}

breaker_ticket admit_slow(breaker_core& core, const context* ctx) {
  breaker_news news;
  const breaker_ticket t = core.acquire_slow(news);
  // The call ends with a callback's exception instead of running: a probe
  // it was given goes back at once.
  if (news.hook_error && t.kind == admission::probe) core.give_back(t);
  report(news, ctx);
  return t;
}

void record_slow(breaker_core& core, const breaker_ticket& t, bool failure, const context* ctx) {
  breaker_news news;
  core.finish(t, failure ? breaker_core::result::failure : breaker_core::result::success, news);
  report(news, ctx);
}

breaker_core::breaker_core(breaker_options options, clock_ref clock)
    : word_(make_word(circuit_state::closed, 0)),
      clock_(clock),
      origin_(clock.now()),
      // "Longer than t" is "at least t + one tick".
      slow_threshold_(options.strict_slow_threshold() && options.slow_call_threshold() != duration::max()
                          ? options.slow_call_threshold() + duration(1)
                          : options.slow_call_threshold()),
      minimum_calls_(options.minimum_calls()),
      slow_on_(options.slow_call_ratio().has_value()),
      track_run_(options.consecutive_failures() != 0),
      by_count_(options.window() == breaker_options::window_kind::count),
      judge_every_call_(options.judges_every_call()),
      strict_break_(options.probes_strictly_after_break()),
      judged_probes_(options.judged_half_open_probes()),
      // Resilience4j judges its half-open calls in a window of their number,
      // from the lesser of it and the minimum of calls on.
      judged_at_(std::min(options.judged_half_open_probes(), options.minimum_calls())),
      options_(std::move(options)) {
  if (judged_probes_ != 0 && !options_.failure_ratio() && !slow_on_)
    throw std::invalid_argument(
        "breaker_options: half_open_judged_by_ratio needs a failure_ratio or a slow_calls ratio to judge the probes "
        "against");
  if (by_count_) {
    // Pairs of options are judged here, from the values in effect: unset
    // ones have yielded already, so only explicit settings can conflict.
    if (minimum_calls_ > options_.count_window())
      throw std::invalid_argument("breaker_options: minimum_calls (" + std::to_string(minimum_calls_) +
                                  ") must not exceed count_window (" + std::to_string(options_.count_window()) + ")");
    count_.emplace(options_.count_window());
    consecutive_ = &count_->run();
  } else {
    time_.emplace(options_.time_window(), options_.buckets());
    consecutive_ = &time_->run();
  }
}

breaker_core::~breaker_core() = default;

// -- the window --

window_counts breaker_core::counts() const noexcept {
  return by_count_ ? count_->counts() : time_->counts(since_origin(now()));
}

void breaker_core::trip_if_due(std::uint64_t epoch, std::uint32_t run, const window_counts* known,
                               breaker_news& news) noexcept {
  bool trip = options_.consecutive_failures() != 0 && run >= options_.consecutive_failures();
  if (!trip && (options_.failure_ratio() || slow_on_)) {
    const window_counts c = known ? *known : counts();
    if (c.calls != 0 && c.calls >= minimum_calls_) {
      const double calls = static_cast<double>(c.calls);
      if (const auto r = options_.failure_ratio(); r && static_cast<double>(c.failures) / calls >= *r) trip = true;
      if (const auto r = options_.slow_call_ratio(); r && static_cast<double>(c.slow) / calls >= *r) trip = true;
    }
  }
  if (!trip) return;
  // Only the period the call was admitted in may be ended by it; if another
  // call got there first, nothing happens.
  transition(make_word(circuit_state::closed, epoch), circuit_state::open, now(), news);
}

// -- deadlines of the open and half-open periods --

// Under mutex_. The slot goes invalid first, so a reader can never pair one
// period's tag with another's deadline (see phase_of).
// `strict`: the period ends one tick past its length, so that a phase is due
// only once `length` has strictly elapsed.
void breaker_core::publish(std::uint64_t epoch, time_point now, duration length, bool strict) noexcept {
  const bool never = length == duration::max();
  phase_slot& s = phases_[epoch & 1];
  s.tag.store(0, std::memory_order_release);
  time_point deadline = clamped_add(now, length);
  if (strict) deadline = clamped_add(deadline, duration(1));
  s.deadline.store(deadline.time_since_epoch().count(), std::memory_order_release);
  s.tag.store((epoch << 2) | (never ? 2 : 0) | 1, std::memory_order_release);
}

// Empty when the slot holds another period, or is being rewritten for one:
// word_ has moved on since `epoch` was read from it. The tag is read on both
// sides of the deadline, so a deadline returned is that period's own.
std::optional<breaker_core::phase> breaker_core::phase_of(std::uint64_t epoch) const noexcept {
  const phase_slot& s = phases_[epoch & 1];
  const std::uint64_t tag = s.tag.load(std::memory_order_acquire);
  const duration::rep deadline = s.deadline.load(std::memory_order_acquire);
  if (s.tag.load(std::memory_order_acquire) != tag || (tag & 1) == 0 || (tag >> 2) != epoch) return std::nullopt;
  return phase{time_point(duration(deadline)), (tag & 2) != 0};
}

// -- transitions --

bool breaker_core::transition(std::uint64_t expected, circuit_state to, time_point now, breaker_news& news,
                              bool first_probe) noexcept {
  // Acquire: openings_ as the transition that stored `expected` left it.
  if (word_.load(std::memory_order_acquire) != expected) return false;  // lost already: spare the lock
  const circuit_state from = state_of(expected);
  const std::uint64_t epoch = epoch_of(expected) + 1;
  const std::uint32_t openings = openings_.load(std::memory_order_relaxed);
  const std::uint32_t opening = openings == std::numeric_limits<std::uint32_t>::max() ? openings : openings + 1;
  // The generator is the application's code: it runs outside the lock.
  duration open_for{};
  if (to == circuit_state::open) {
    try {
      open_for = options_.open_duration(opening);
    } catch (...) {
      // The breaker still opens; for the fixed duration, and the caller
      // learns why.
      news.keep(std::current_exception());
      open_for = options_.fixed_open_duration();
    }
  }
  {
    std::lock_guard lock(mutex_);
    if (word_.load(std::memory_order_relaxed) != expected) return false;
    // What the new period needs goes first: word_ publishes it.
    if (to == circuit_state::open) {
      publish(epoch, now, open_for, strict_break_);
      openings_.store(opening, std::memory_order_relaxed);
    } else if (to == circuit_state::half_open) {
      publish(epoch, now, options_.half_open_limit());
      // Whoever moves it to half-open in acquire() holds its first probe.
      probes_.store(make_probes(epoch, first_probe ? 1 : 0, 0), std::memory_order_release);
      if (judged_probes_ != 0) probe_failures_.store((epoch & 0xffffffffu) << 32, std::memory_order_release);
    } else if (to == circuit_state::closed || to == circuit_state::metrics_only) {
      openings_.store(0, std::memory_order_relaxed);
    }
    word_.store(make_word(to, epoch), std::memory_order_release);
    // Cleared after the store: a call of the old period that records from now
    // on is dropped by its epoch.
    if ((to == circuit_state::closed || to == circuit_state::metrics_only) &&
        (to == circuit_state::closed || from != circuit_state::closed)) {
      consecutive_->store(0, std::memory_order_relaxed);
      if (by_count_) {
        count_->clear();
      } else {
        time_->clear();
      }
    }
  }
  if (from != to) {
    if (options_.on_state_change()) run_hook(options_.on_state_change(), state_change{from, to, epoch, now, open_for}, news);
    news.add(kind_of(to), open_for);
  }
  return true;
}

void breaker_core::move_to(circuit_state target) {
  breaker_news news;
  for (;;) {
    const std::uint64_t w = word_.load(std::memory_order_acquire);
    if (state_of(w) == target && target != circuit_state::closed) break;
    if (transition(w, target, now(), news)) break;
  }
  rethrow_hook_error(news);
}

breaker_ticket breaker_core::reject(circuit_state s, duration retry_after, breaker_news& news) noexcept {
  rejections_.fetch_add(1, std::memory_order_relaxed);
  if (options_.on_rejection()) run_hook(options_.on_rejection(), rejection{s, retry_after}, news);
  news.add(event_kind::circuit_rejected, retry_after);
  return {0, retry_after, admission::rejected};
}

// Every `continue` below follows a change of word_ seen by this thread.
breaker_ticket breaker_core::acquire_slow(breaker_news& news) noexcept {
  for (;;) {
    const std::uint64_t w = word_.load(std::memory_order_acquire);
    const circuit_state s = state_of(w);
    const std::uint64_t epoch = epoch_of(w);
    switch (s) {
      case circuit_state::closed:
      case circuit_state::metrics_only:
      case circuit_state::disabled:
      {
        const breaker_ticket t = acquire();  // it changed since the first look
        if (t.kind != admission::undecided) return t;
        continue;
      }
      case circuit_state::isolated:
        return reject(s, duration::max(), news);
      case circuit_state::open: {
        const auto p = phase_of(epoch);
        if (!p) continue;
        const time_point now = this->now();
        if (!p->due(now)) return reject(s, p->left(now), news);
        if (transition(w, circuit_state::half_open, now, news, true))
          return {epoch + 1, slow_on_ ? now.time_since_epoch() : duration::zero(), admission::probe};
        continue;
      }
      case circuit_state::half_open: {
        const auto p = phase_of(epoch);
        if (!p) continue;
        const time_point now = this->now();
        if (p->due(now)) {
          // Half-open for too long: probes hang. Reopen; their records will
          // be dropped as belonging to an earlier period.
          transition(w, circuit_state::open, now, news);
          continue;
        }
        std::uint64_t probes = probes_.load(std::memory_order_acquire);
        while (same_period(probes, epoch)) {
          if (in_flight_of(probes) >= options_.half_open_permits()) return reject(s, duration::zero(), news);
          // Judged probes: no more than that many in all, until the verdict.
          if (judged_probes_ != 0 && in_flight_of(probes) + successes_of(probes) >= judged_probes_)
            return reject(s, duration::zero(), news);
          if (probes_.compare_exchange_weak(probes, probes + one_in_flight, std::memory_order_acq_rel,
                                            std::memory_order_acquire))
            return {epoch, slow_on_ ? now.time_since_epoch() : duration::zero(), admission::probe};
        }
        continue;  // a later period's count
      }
    }
  }
}

void breaker_core::settle_probe(std::uint64_t epoch, result r, breaker_news& news) noexcept {
  if (judged_probes_ != 0) return settle_judged_probe(epoch, r, false, news);
  const std::uint64_t period = make_word(circuit_state::half_open, epoch);
  std::uint64_t probes = probes_.load(std::memory_order_acquire);
  for (;;) {
    // A probe of an earlier period: its slot went with that period.
    if (word_.load(std::memory_order_acquire) != period || !same_period(probes, epoch)) return;
    if (r == result::failure) {
      transition(period, circuit_state::open, now(), news);
      return;  // reopened, by this call or by another
    }
    const std::uint32_t in_flight = in_flight_of(probes);
    const std::uint32_t successes = successes_of(probes) + (r == result::success ? 1 : 0);
    const std::uint64_t next = make_probes(epoch, in_flight > 0 ? in_flight - 1 : 0, std::min(successes, count_max));
    if (!probes_.compare_exchange_weak(probes, next, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // Successes only grow by one, so exactly one reaches the count; it closes
    // the breaker unless the period ended meanwhile.
    if (r == result::success && successes == options_.successes_to_close())
      transition(period, circuit_state::closed, now(), news);
    return;
  }
}

// Resilience4j's half-open: every probe is recorded; the one that brings the
// count to judged_at_ judges them all. A failed or slow probe is counted
// before it is recorded (its compare-and-swap on probes_ publishes it), so
// the judge, whose compare-and-swap comes last, sees every one of the period.
// When judged_at_ is below the probes allowed, a probe recording at the same
// moment may be counted as failed or slow but not yet as recorded: it counts
// as one of the judged (the counts are capped at them).
void breaker_core::settle_judged_probe(std::uint64_t epoch, result r, bool slow, breaker_news& news) noexcept {
  constexpr std::uint64_t tag_mask = ~std::uint64_t(0xffffffffu);
  constexpr std::uint64_t one_slow = std::uint64_t(1) << 16;
  const std::uint64_t period = make_word(circuit_state::half_open, epoch);
  const std::uint64_t tag = (epoch & 0xffffffffu) << 32;
  if (const std::uint64_t add = (r == result::failure ? 1 : 0) + (slow ? one_slow : 0); add != 0) {
    std::uint64_t f = probe_failures_.load(std::memory_order_acquire);
    for (;;) {
      if (word_.load(std::memory_order_acquire) != period || (f & tag_mask) != tag) return;
      if (probe_failures_.compare_exchange_weak(f, f + add, std::memory_order_acq_rel, std::memory_order_acquire)) break;
    }
  }
  std::uint64_t probes = probes_.load(std::memory_order_acquire);
  for (;;) {
    if (word_.load(std::memory_order_acquire) != period || !same_period(probes, epoch)) return;
    const std::uint32_t in_flight = in_flight_of(probes);
    const std::uint32_t recorded = successes_of(probes) + (r == result::neither ? 0 : 1);
    const std::uint64_t next = make_probes(epoch, in_flight > 0 ? in_flight - 1 : 0, std::min(recorded, count_max));
    if (!probes_.compare_exchange_weak(probes, next, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    if (r != result::neither && recorded == judged_at_) {
      std::uint64_t f = probe_failures_.load(std::memory_order_acquire);
      if ((f & tag_mask) != tag) f = tag;
      const double calls = recorded;
      const auto failed = static_cast<double>(std::min<std::uint64_t>(f & 0xffffu, recorded));
      const auto slowed = static_cast<double>(std::min<std::uint64_t>((f >> 16) & 0xffffu, recorded));
      const auto fr = options_.failure_ratio(), sr = options_.slow_call_ratio();
      const bool reopen = (fr && failed / calls >= *fr) || (sr && slowed / calls >= *sr);
      transition(period, reopen ? circuit_state::open : circuit_state::closed, now(), news);
    }
    return;
  }
}

void breaker_core::poll() {
  breaker_news news;
  for (;;) {
    const std::uint64_t w = word_.load(std::memory_order_acquire);
    const circuit_state s = state_of(w);
    if (s != circuit_state::open && s != circuit_state::half_open) return;
    const auto p = phase_of(epoch_of(w));
    if (!p) continue;
    const time_point now = this->now();
    if (p->due(now)) transition(w, s == circuit_state::open ? circuit_state::half_open : circuit_state::open, now, news);
    break;
  }
  rethrow_hook_error(news);
}

duration breaker_core::time_until_probe() const noexcept {
  for (;;) {
    const std::uint64_t w = word_.load(std::memory_order_acquire);
    switch (state_of(w)) {
      case circuit_state::isolated: return duration::max();
      case circuit_state::open: {
        const auto p = phase_of(epoch_of(w));
        if (!p) continue;
        return p->left(now());
      }
      default: return duration::zero();
    }
  }
}

breaker_metrics breaker_core::metrics() const noexcept {
  const std::uint64_t w = word_.load(std::memory_order_acquire);
  const window_counts c = counts();
  const auto ratio = [&](std::uint64_t n) { return c.calls ? static_cast<double>(n) / static_cast<double>(c.calls) : 0.0; };
  std::uint32_t probes_in_flight = 0;
  if (state_of(w) == circuit_state::half_open) {
    const std::uint64_t p = probes_.load(std::memory_order_acquire);
    if (same_period(p, epoch_of(w))) probes_in_flight = in_flight_of(p);
  }
  return breaker_metrics{state_of(w),
                         c.calls,
                         c.failures,
                         c.slow,
                         ratio(c.failures),
                         ratio(c.slow),
                         consecutive_->load(std::memory_order_relaxed),
                         rejections_.load(std::memory_order_relaxed),
                         probes_in_flight,
                         epoch_of(w),
                         time_until_probe()};
}

}  // namespace detail
}  // namespace resilience
