#include <resilience/rate_limiter.hpp>
#include <resilience/detail/with_option.hpp>

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace resilience {
namespace {

using ticks = std::int64_t;
// Wide enough that no sum of two clock readings and a product of counts overflows.
__extension__ typedef __int128 wide;

ticks ceil_div(ticks a, ticks b) noexcept { return a / b + (a % b != 0 ? 1 : 0); }

// Floor division: a clock may read before its epoch.
ticks floor_div(ticks a, ticks b) noexcept { return a >= 0 ? a / b : -((-a - 1) / b) - 1; }

time_point at_ticks(wide t) noexcept {
  if (t >= std::numeric_limits<ticks>::max()) return time_point::max();
  if (t <= std::numeric_limits<ticks>::min()) return time_point::min();
  return time_point(duration(static_cast<ticks>(t)));
}

}  // namespace

rate_limiter_options rate_limiter_options::token_bucket(std::uint32_t tokens, duration per,
                                                        std::uint32_t burst) const {
  if (tokens < 1 || tokens > max_limit)
    detail::invalid_option("rate_limiter_options::token_bucket: tokens must be in [1, 2^31 - 1]");
  if (per <= duration::zero()) detail::invalid_option("rate_limiter_options::token_bucket: per must be positive");
  if (per.count() < static_cast<ticks>(tokens))
    detail::invalid_option("rate_limiter_options::token_bucket: tokens per `per` must be at most one per clock tick");
  if (burst < 1 || burst > max_limit)
    detail::invalid_option("rate_limiter_options::token_bucket: burst must be in [1, 2^31 - 1]");
  // The bucket's depth in time, (burst - 1) token intervals, must fit the clock.
  const ticks interval = ceil_div(per.count(), tokens);
  if (static_cast<ticks>(burst - 1) > std::numeric_limits<ticks>::max() / 4 / interval)
    detail::invalid_option("rate_limiter_options::token_bucket: burst times per / tokens must fit the clock's range");
  auto o = *this;
  o.kind_ = algorithm::token_bucket;
  o.tokens_ = tokens;
  o.per_ = per;
  o.burst_ = burst;
  return o;
}

rate_limiter_options rate_limiter_options::sliding_window(std::uint32_t limit, duration window,
                                                          std::uint32_t segments) const {
  if (limit < 1 || limit > max_limit) detail::invalid_option("rate_limiter_options::sliding_window: limit must be in [1, 2^31 - 1]");
  if (window <= duration::zero()) detail::invalid_option("rate_limiter_options::sliding_window: window must be positive");
  if (segments < 1 || segments > max_segments)
    detail::invalid_option("rate_limiter_options::sliding_window: segments must be in [1, 1000]");
  if (window.count() < static_cast<ticks>(segments))
    detail::invalid_option("rate_limiter_options::sliding_window: segments must be at least one clock tick long (window / segments)");
  if (window > std::chrono::hours(24 * 365))
    detail::invalid_option("rate_limiter_options::sliding_window: window must be at most a year");
  auto o = *this;
  o.kind_ = algorithm::sliding_window;
  o.limit_ = limit;
  o.window_ = window;
  o.segments_ = segments;
  return o;
}

rate_limiter_options rate_limiter_options::max_wait(duration d) const {
  if (d < duration::zero()) detail::invalid_option("rate_limiter_options::max_wait: must not be negative");
  return resilience::detail::with_option(*this, &rate_limiter_options::max_wait_, d);
}

rate_limiter_options rate_limiter_options::max_queue(std::uint32_t n) const {
  if (n > max_limit) detail::invalid_option("rate_limiter_options::max_queue: must be at most 2^31 - 1");
  return resilience::detail::with_option(*this, &rate_limiter_options::max_queue_, n);
}

namespace detail {

// Calls admitted per segment, in a ring of `segments`, tagged by the number
// of the newest segment; older entries are cleared as time moves past them.
struct rate_limiter_core::window_books {
  std::mutex mutex;
  ticks segment_length;
  std::uint64_t limit;
  std::vector<std::uint32_t> counts;
  std::vector<std::uint32_t> scratch;  // permit_time's projection, allocated once
  ticks newest = std::numeric_limits<ticks>::min();
  std::uint64_t used = 0;

  std::size_t slot(ticks segment) const noexcept {
    const auto n = static_cast<ticks>(counts.size());
    return static_cast<std::size_t>(((segment % n) + n) % n);
  }

  ticks segment_at(time_point now) const noexcept { return floor_div(now.time_since_epoch().count(), segment_length); }

  // Moves the window to `segment`: the segments it leaves stop counting.
  void advance(ticks segment) noexcept {
    if (newest != std::numeric_limits<ticks>::min() && segment <= newest) return;
    const auto n = static_cast<ticks>(counts.size());
    if (newest == std::numeric_limits<ticks>::min() || segment - newest >= n) {
      std::fill(counts.begin(), counts.end(), 0u);
      used = 0;
    } else {
      for (ticks s = newest + 1; s <= segment; ++s) {
        used -= counts[slot(s)];
        counts[slot(s)] = 0;
      }
    }
    newest = segment;
  }
};

rate_limiter_core::rate_limiter_core(rate_limiter_options o) : options_(std::move(o)) {
  if (options_.kind() == rate_limiter_options::algorithm::token_bucket) {
    // Rounded up: a token never comes early, so the rate is never exceeded.
    interval_ = ceil_div(options_.per().count(), options_.tokens());
    tau_ = static_cast<ticks>(options_.burst() - 1) * interval_;
  } else {
    window_ = std::make_unique<window_books>();
    // Rounded up too: the window never ends early.
    window_->segment_length = ceil_div(options_.window().count(), options_.segments());
    window_->limit = options_.limit();
    window_->counts.assign(options_.segments(), 0u);
    window_->scratch.assign(options_.segments(), 0u);
  }
}

rate_limiter_core::~rate_limiter_core() = default;

bool rate_limiter_core::window_take(time_point now) noexcept {
  window_books& w = *window_;
  std::lock_guard lock(w.mutex);
  const ticks segment = w.segment_at(now);
  w.advance(segment);
  if (w.used >= w.limit) return false;
  ++w.counts[w.slot(segment)];
  ++w.used;
  return true;
}

time_point rate_limiter_core::permit_time(time_point now, std::uint64_t k) const noexcept {
  return options_.kind() == rate_limiter_options::algorithm::token_bucket ? bucket_permit_time(now, k)
                                                                          : window_permit_time(now, k);
}

time_point rate_limiter_core::bucket_permit_time(time_point now, std::uint64_t k) const noexcept {
  const ticks t = count(now);
  const ticks tat = tat_.load(std::memory_order_acquire);
  const ticks base = tat > t ? tat : t;
  // Token j (1-based) is free once now >= tat + (j - 1) * interval - tau.
  const wide at = static_cast<wide>(base) - tau_ + static_cast<wide>(k - 1) * interval_;
  return at <= t ? now : at_ticks(at);
}

time_point rate_limiter_core::window_permit_time(time_point now, std::uint64_t k) const noexcept {
  window_books& w = *window_;
  std::lock_guard lock(w.mutex);
  const ticks current = w.segment_at(now);
  w.advance(current);
  const std::uint64_t free_now = w.limit - std::min(w.used, w.limit);
  if (k <= free_now) return now;
  // Projects forward: the waiters ahead take what is free now, then each
  // segment boundary frees the calls of the segment leaving the window, and
  // the next waiters take them there.
  std::copy(w.counts.begin(), w.counts.end(), w.scratch.begin());
  w.scratch[w.slot(current)] += static_cast<std::uint32_t>(free_now);
  std::uint64_t remaining = k - free_now;
  const auto n = static_cast<ticks>(w.counts.size());
  // Past 64 windows the figure is a lower bound: a waiter looks again then.
  const ticks horizon = 64 * n;
  for (ticks j = 1; j <= horizon; ++j) {
    const std::size_t s = w.slot(current + j);
    const std::uint64_t taken = std::min<std::uint64_t>(w.scratch[s], remaining);
    remaining -= taken;
    w.scratch[s] = static_cast<std::uint32_t>(taken);
    if (remaining == 0) return at_ticks(static_cast<wide>(current + j) * w.segment_length);
  }
  return at_ticks(static_cast<wide>(current + horizon) * w.segment_length);
}

duration rate_limiter_core::time_until_permit(time_point now) const noexcept {
  const time_point at = permit_time(now, std::uint64_t{waiting_.load(std::memory_order_acquire)} + 1);
  return at == time_point::max() ? duration::max() : at - now;
}

rate_limit_turn rate_limiter_core::decide(time_point at, time_point now, time_point give_up,
                                          time_point deadline) const noexcept {
  // The tighter bound names the reason. A permit at the deadline is too late:
  // nothing would be left to run the op in.
  const bool by_deadline = deadline != time_point::max() && deadline <= give_up;
  if (by_deadline ? at >= deadline : at > give_up) {
    const duration retry_after = at == time_point::max() ? duration::max() : at - now;
    return {rate_limit_turn::kind::rejected, at,
            by_deadline ? rate_limit_reject_reason::deadline : rate_limit_reject_reason::max_wait, retry_after};
  }
  return {rate_limit_turn::kind::wait, at, rate_limit_reject_reason::no_permit, duration::zero()};
}

rate_limit_turn rate_limiter_core::enqueue(rate_limit_waiter& n, time_point now, time_point give_up,
                                           time_point deadline) noexcept {
  std::lock_guard lock(mutex_);
  // A permit may have come free since the caller's fast path failed.
  if (head_ == nullptr && take(now)) return {rate_limit_turn::kind::granted, now, {}, {}};
  const std::uint32_t ahead = waiting_.load(std::memory_order_relaxed);
  const time_point at = permit_time(now, std::uint64_t{ahead} + 1);
  if (ahead >= options_.max_queue()) {
    return {rate_limit_turn::kind::rejected, at, rate_limit_reject_reason::queue_full,
            at == time_point::max() ? duration::max() : at - now};
  }
  const rate_limit_turn turn = decide(at, now, give_up, deadline);
  if (turn.what == rate_limit_turn::kind::rejected) return turn;
  n.next = nullptr;
  n.prev = tail_;
  (tail_ ? tail_->next : head_) = &n;
  tail_ = &n;
  n.queued = true;
  // Published before the lock goes: from now on no newcomer takes a permit
  // on the fast path.
  waiting_.fetch_add(1, std::memory_order_acq_rel);
  return turn;
}

rate_limit_turn rate_limiter_core::wake(rate_limit_waiter& n, time_point now, time_point give_up,
                                        time_point deadline) noexcept {
  std::lock_guard lock(mutex_);
  if (!n.queued) return {rate_limit_turn::kind::rejected, now, rate_limit_reject_reason::max_wait, duration::zero()};
  if (head_ == &n && take(now)) {
    unlink_locked(n);
    return {rate_limit_turn::kind::granted, now, {}, {}};
  }
  // Woken before its turn (a waiter ahead has not taken its permit yet):
  // wait again for the time its place in the queue gives it.
  std::uint64_t ahead = 0;
  for (const rate_limit_waiter* w = head_; w != &n; w = w->next) ++ahead;
  time_point at = permit_time(now, ahead + 1);
  if (at <= now) {
    // Its permit is free, but a waiter ahead has not taken its own yet (that
    // waiter's executor is busy or stopped). Waking again at once would spin
    // until it does: look again later, from 100 us up to a permit's spacing,
    // doubling each time.
    const duration first_step = std::chrono::microseconds(100);
    const duration cap = std::max(permit_spacing(), first_step);
    const duration step = std::min(cap, first_step * (std::int64_t{1} << std::min<int>(n.early_wakes, 20)));
    if (n.early_wakes < 255) ++n.early_wakes;
    at = saturating_add(now, step);
    if (give_up > now) at = std::min(at, give_up);
  }
  rate_limit_turn turn = decide(at, now, give_up, deadline);
  if (turn.what == rate_limit_turn::kind::rejected) unlink_locked(n);
  return turn;
}

duration rate_limiter_core::permit_spacing() const noexcept {
  return duration(options_.kind() == rate_limiter_options::algorithm::token_bucket ? interval_
                                                                                    : window_->segment_length);
}

bool rate_limiter_core::withdraw(rate_limit_waiter& n) noexcept {
  std::lock_guard lock(mutex_);
  if (!n.queued) return false;
  unlink_locked(n);
  return true;
}

void rate_limiter_core::unlink_locked(rate_limit_waiter& n) noexcept {
  (n.prev ? n.prev->next : head_) = n.next;
  (n.next ? n.next->prev : tail_) = n.prev;
  n.prev = n.next = nullptr;
  n.queued = false;
  waiting_.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace detail
}  // namespace resilience
