#include <resilience/circuit_breaker.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

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

// -- options --

namespace {

[[noreturn]] void invalid(const char* what) { throw std::invalid_argument(std::string("breaker_options: ") + what); }

void check_ratio(double r, const char* what) {
  if (!(r > 0.0 && r <= 1.0)) invalid(what);
}

}  // namespace

breaker_options breaker_options::consecutive_failures(std::uint32_t n) const {
  if (n == 0) invalid("consecutive_failures must be at least 1");
  auto o = *this;
  o.consecutive_failures_ = n;
  return o;
}

breaker_options breaker_options::failure_ratio(double ratio) const {
  check_ratio(ratio, "failure_ratio must be in (0, 1]");
  auto o = *this;
  o.failure_ratio_ = ratio;
  return o;
}

breaker_options breaker_options::no_failure_ratio() const {
  auto o = *this;
  o.failure_ratio_.reset();
  return o;
}

breaker_options breaker_options::slow_calls(duration threshold, double ratio) const {
  if (threshold <= duration::zero()) invalid("slow_calls threshold must be positive");
  check_ratio(ratio, "slow_calls ratio must be in (0, 1]");
  auto o = *this;
  o.slow_threshold_ = threshold;
  o.slow_ratio_ = ratio;
  return o;
}

breaker_options breaker_options::count_window(std::uint32_t calls) const {
  if (calls == 0 || calls > max_count_window) invalid("count_window must be 1 to 1048576 calls");
  auto o = *this;
  o.window_ = window_kind::count;
  o.count_window_ = calls;
  return o;
}

breaker_options breaker_options::time_window(duration span, std::uint32_t buckets) const {
  if (span <= duration::zero()) invalid("time_window span must be positive");
  if (buckets == 0 || buckets > max_buckets) invalid("time_window buckets must be 1 to 1024");
  if (span / buckets <= duration::zero()) invalid("time_window span must be at least one tick per bucket");
  auto o = *this;
  o.window_ = window_kind::time;
  o.time_window_ = span;
  o.buckets_ = buckets;
  return o;
}

breaker_options breaker_options::minimum_calls(std::uint32_t n) const {
  if (n == 0) invalid("minimum_calls must be at least 1");
  auto o = *this;
  o.minimum_calls_ = n;
  return o;
}

breaker_options breaker_options::open_duration(duration d) const {
  if (d < duration::zero()) invalid("open_duration must not be negative");
  auto o = *this;
  o.open_duration_ = d;
  o.open_generator_ = nullptr;
  return o;
}

breaker_options breaker_options::open_duration(duration_generator g) const {
  if (!g) invalid("open_duration generator must not be empty");
  auto o = *this;
  o.open_generator_ = std::move(g);
  return o;
}

breaker_options breaker_options::half_open_permits(std::uint32_t n) const {
  if (n == 0 || n > max_permits) invalid("half_open_permits must be 1 to 65535");
  auto o = *this;
  o.half_open_permits_ = n;
  return o;
}

breaker_options breaker_options::successes_to_close(std::uint32_t m) const {
  if (m == 0 || m > max_permits) invalid("successes_to_close must be 1 to 65535");
  auto o = *this;
  o.successes_to_close_ = m;
  return o;
}

breaker_options breaker_options::half_open_limit(duration d) const {
  if (d <= duration::zero()) invalid("half_open_limit must be positive");
  auto o = *this;
  o.half_open_limit_ = d;
  return o;
}

breaker_options breaker_options::on_state_change(std::function<void(const state_change&)> f) const {
  auto o = *this;
  o.on_state_change_ = std::move(f);
  return o;
}

breaker_options breaker_options::on_rejection(std::function<void(const rejection&)> f) const {
  auto o = *this;
  o.on_rejection_ = std::move(f);
  return o;
}

duration breaker_options::open_duration(std::uint32_t opening) const {
  if (!open_generator_) return open_duration_;
  return std::max(open_generator_(std::max<std::uint32_t>(opening, 1)), duration::zero());
}

// -- the state machine --

namespace detail {

namespace {

using micros = std::chrono::microseconds;
constexpr std::uint64_t micros_mask = (std::uint64_t(1) << 48) - 1;
constexpr std::uint64_t never = micros_mask;  // a deadline that does not pass

}  // namespace

// One slice of a time window. `tag` is the slice's number since origin_; a
// bucket whose tag is older than the window holds nothing current.
struct breaker_core::bucket {
  static constexpr std::uint64_t empty = std::numeric_limits<std::uint64_t>::max();
  std::atomic<std::uint64_t> tag{empty};
  std::atomic<std::int64_t> calls{0};
  std::atomic<std::uint64_t> sums{0};  // encoded like count_sums_
};

breaker_core::breaker_core(breaker_options options, now_fn now, const void* clock)
    : word_(make_word(circuit_state::closed, 0)),
      now_(now),
      clock_(clock),
      origin_(now(clock)),
      slow_on_(options.slow_call_ratio().has_value()),
      slow_threshold_(options.slow_call_threshold()),
      track_run_(options.consecutive_failures() != 0),
      options_(std::move(options)) {
  if (options_.window() == breaker_options::window_kind::count) {
    if (options_.minimum_calls() > options_.count_window())
      throw std::invalid_argument("breaker_options: minimum_calls must not exceed count_window");
    count_n_ = options_.count_window();
    const std::uint32_t per_line = (count_n_ + slot_lines - 1) / slot_lines;
    slot_stride_ = (per_line + 63) / 64 * 64;
    count_storage_ = std::make_unique<std::atomic<std::uint8_t>[]>(std::size_t(slot_stride_) * slot_lines);
    count_slots_ = count_storage_.get();
    fastmod_m_ = std::numeric_limits<std::uint64_t>::max() / count_n_ + 1;
  } else {
    buckets_ = std::make_unique<bucket[]>(options_.buckets());
    bucket_width_ = std::chrono::duration_cast<std::chrono::nanoseconds>(options_.time_window()).count() /
                    options_.buckets();
  }
}

breaker_core::~breaker_core() = default;

// -- the window --

namespace {

struct decoded {
  std::uint64_t failures, slow;
};

// Sums are built from signed deltas; a reader racing a writer may see a
// half at -1 for a moment, so each half is read as signed and clamped.
decoded decode(std::uint64_t sums) noexcept {
  const auto failures = static_cast<std::int32_t>(static_cast<std::uint32_t>(sums));
  const auto slow = static_cast<std::int32_t>(static_cast<std::uint32_t>((sums - std::uint64_t(std::int64_t(failures))) >> 32));
  return {static_cast<std::uint64_t>(std::max(failures, 0)), static_cast<std::uint64_t>(std::max(slow, 0))};
}

std::uint64_t encode_counts(bool failure, bool slow) noexcept {
  return (failure ? 1u : 0u) + (std::uint64_t(slow ? 1 : 0) << 32);
}

}  // namespace

void breaker_core::record_time(bool failure, bool slow) noexcept {
  const std::int64_t since = (now() - origin_).count();
  const auto index = static_cast<std::uint64_t>(std::max<std::int64_t>(since, 0) / bucket_width_);
  bucket& b = buckets_[index % options_.buckets()];
  std::uint64_t tag = b.tag.load(std::memory_order_acquire);
  if (tag != index && (tag == bucket::empty || tag < index) &&
      b.tag.compare_exchange_strong(tag, index, std::memory_order_acq_rel)) {
    // This call starts the slice: take out what the slice held a window
    // ago. A call racing the rollover may land in either slice.
    b.calls.fetch_sub(b.calls.load(std::memory_order_relaxed), std::memory_order_relaxed);
    b.sums.fetch_sub(b.sums.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  b.calls.fetch_add(1, std::memory_order_relaxed);
  if (failure || slow) b.sums.fetch_add(encode_counts(failure, slow), std::memory_order_relaxed);
}

breaker_core::window_counts breaker_core::counts() const noexcept {
  window_counts c;
  if (count_slots_) {
    const std::uint64_t head = head_.load(std::memory_order_relaxed);
    const std::uint64_t base = base_.load(std::memory_order_relaxed);
    c.calls = std::min<std::uint64_t>(head > base ? head - base : 0, count_n_);
    const decoded d = decode(count_sums_.load(std::memory_order_relaxed));
    c.failures = d.failures;
    c.slow = d.slow;
  } else {
    const std::int64_t since = (now() - origin_).count();
    const auto current = static_cast<std::uint64_t>(std::max<std::int64_t>(since, 0) / bucket_width_);
    const std::uint32_t n = options_.buckets();
    for (std::uint32_t i = 0; i < n; ++i) {
      const bucket& b = buckets_[i];
      const std::uint64_t tag = b.tag.load(std::memory_order_acquire);
      if (tag == bucket::empty || tag > current || current - tag >= n) continue;  // expired
      c.calls += static_cast<std::uint64_t>(std::max<std::int64_t>(b.calls.load(std::memory_order_relaxed), 0));
      const decoded d = decode(b.sums.load(std::memory_order_relaxed));
      c.failures += d.failures;
      c.slow += d.slow;
    }
  }
  c.failures = std::min(c.failures, c.calls);
  c.slow = std::min(c.slow, c.calls);
  return c;
}

void breaker_core::clear_window() noexcept {
  consecutive_.store(0, std::memory_order_relaxed);
  if (count_slots_) {
    // Exchanges keep the sums equal to the slots' contents even if a call
    // records concurrently.
    for (std::uint32_t i = 0; i < count_n_; ++i) {
      const std::uint8_t old = count_slots_[physical(i)].exchange(0, std::memory_order_relaxed);
      if (old != 0) count_sums_.fetch_sub(encode(old), std::memory_order_relaxed);
    }
    base_.store(head_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  } else {
    for (std::uint32_t i = 0; i < options_.buckets(); ++i) {
      buckets_[i].tag.store(bucket::empty, std::memory_order_release);
      buckets_[i].calls.store(0, std::memory_order_relaxed);
      buckets_[i].sums.store(0, std::memory_order_relaxed);
    }
  }
}

void breaker_core::evaluate(std::uint32_t epoch, std::uint32_t run) noexcept {
  bool trip = options_.consecutive_failures() != 0 && run >= options_.consecutive_failures();
  if (!trip && (options_.failure_ratio() || slow_on_)) {
    const window_counts c = counts();
    if (c.calls != 0 && c.calls >= options_.minimum_calls()) {
      const double calls = static_cast<double>(c.calls);
      if (const auto r = options_.failure_ratio(); r && static_cast<double>(c.failures) / calls >= *r) trip = true;
      if (const auto r = options_.slow_call_ratio(); r && static_cast<double>(c.slow) / calls >= *r) trip = true;
    }
  }
  if (!trip) return;
  // Only the period the call was admitted in may be ended by it; if another
  // call got there first, the compare-and-swap fails and nothing happens.
  transition(make_word(circuit_state::closed, epoch), circuit_state::open, now());
}

// -- deadlines of the open and half-open periods --

void breaker_core::publish(std::uint32_t epoch, time_point deadline) noexcept {
  std::uint64_t us = never;
  if (deadline != time_point::max()) {
    const auto ceil = std::chrono::ceil<micros>(std::max(deadline - origin_, duration::zero())).count();
    us = std::min<std::uint64_t>(static_cast<std::uint64_t>(ceil), never - 1);
  }
  const std::uint64_t tag = epoch & 0xffff;
  const std::uint64_t desired = (tag << 48) | us;
  std::uint64_t current = phase_.load(std::memory_order_relaxed);
  // The first candidate for a period publishes; a late one (its period
  // already over) must not overwrite a newer period's deadline.
  for (;;) {
    const auto age = static_cast<std::int16_t>(static_cast<std::uint16_t>(tag - (current >> 48)));
    if (age <= 0 && current != 0) return;
    if (phase_.compare_exchange_weak(current, desired, std::memory_order_release, std::memory_order_relaxed)) return;
  }
}

std::optional<time_point> breaker_core::deadline(std::uint32_t epoch) const noexcept {
  const std::uint64_t p = phase_.load(std::memory_order_acquire);
  if ((p >> 48) != (epoch & 0xffff)) return std::nullopt;
  const std::uint64_t us = p & micros_mask;
  if (us == never) return time_point::max();
  return origin_ + micros(us);
}

// -- transitions --

bool breaker_core::transition(std::uint64_t expected, circuit_state to, time_point now,
                              std::uint32_t in_flight) noexcept {
  const circuit_state from = state_of(expected);
  const std::uint32_t epoch = (epoch_of(expected) + 1) & epoch_mask;
  const duration open_for =
      to == circuit_state::open ? options_.open_duration(openings_.load(std::memory_order_relaxed) + 1) : duration{};
  if (!word_.compare_exchange_strong(expected, make_word(to, epoch, in_flight), std::memory_order_acq_rel,
                                     std::memory_order_acquire))
    return false;

  // Won: the side effects of this transition happen here, once. Only the
  // winner publishes the period's deadline: a loser's would be tagged with an
  // epoch the breaker never entered, and could block the real one. Readers
  // that see the new state a moment before its deadline treat the period as
  // just begun.
  if (to == circuit_state::open) {
    publish(epoch, saturating_add(now, open_for));
  } else if (to == circuit_state::half_open) {
    publish(epoch, saturating_add(now, options_.half_open_limit()));
  } else if (to == circuit_state::isolated) {
    publish(epoch, time_point::max());
  }
  if (to == circuit_state::open) {
    openings_.fetch_add(1, std::memory_order_relaxed);
  } else if (to == circuit_state::closed || to == circuit_state::metrics_only) {
    if (to == circuit_state::closed || from != circuit_state::closed) clear_window();
    openings_.store(0, std::memory_order_relaxed);
  }
  if (from != to && options_.on_state_change()) options_.on_state_change()(state_change{from, to, epoch, now, open_for});
  return true;
}

void breaker_core::move_to(circuit_state target) noexcept {
  std::uint64_t w = word_.load(std::memory_order_acquire);
  for (;;) {
    if (state_of(w) == target && target != circuit_state::closed) return;
    if (transition(w, target, now())) return;
    w = word_.load(std::memory_order_acquire);
  }
}

breaker_permit breaker_core::reject(circuit_state s, duration retry_after) noexcept {
  rejections_.fetch_add(1, std::memory_order_relaxed);
  if (options_.on_rejection()) options_.on_rejection()(rejection{s, retry_after});
  return breaker_permit(nullptr, 0, breaker_permit::kind::rejected, retry_after);
}

breaker_permit breaker_core::acquire_slow() noexcept {
  std::uint64_t w = word_.load(std::memory_order_acquire);
  for (;;) {
    const circuit_state s = state_of(w);
    const std::uint32_t epoch = epoch_of(w);
    switch (s) {
      case circuit_state::closed:
      case circuit_state::metrics_only:
      case circuit_state::disabled:
        return acquire();  // it changed since the first look
      case circuit_state::isolated:
        return reject(s, duration::max());
      case circuit_state::open: {
        const time_point now = this->now();
        // A deadline not yet readable belongs to a transition a moment old.
        const time_point until = deadline(epoch).value_or(time_point::max());
        if (now < until) return reject(s, until == time_point::max() ? options_.open_duration(1) : until - now);
        // The break is over: whoever moves it to half-open holds its first probe.
        if (transition(w, circuit_state::half_open, now, 1))
          return breaker_permit(this, (epoch + 1) & epoch_mask, breaker_permit::kind::probe,
                                slow_on_ ? now - origin_ : duration::zero());
        break;
      }
      case circuit_state::half_open: {
        const time_point now = this->now();
        if (const auto until = deadline(epoch); until && now >= *until) {
          // Half-open for too long: probes hang. Reopen; their records will
          // be dropped as belonging to an earlier period.
          transition(w, circuit_state::open, now);
          break;
        }
        if (in_flight_of(w) >= options_.half_open_permits()) return reject(s, duration::zero());
        if (word_.compare_exchange_weak(w, w + (std::uint64_t(1) << 32), std::memory_order_acq_rel,
                                        std::memory_order_acquire))
          return breaker_permit(this, epoch, breaker_permit::kind::probe, slow_on_ ? now - origin_ : duration::zero());
        continue;  // w was reloaded
      }
    }
    w = word_.load(std::memory_order_acquire);
  }
}

void breaker_core::finish_probe(std::uint32_t epoch, result r) noexcept {
  std::uint64_t w = word_.load(std::memory_order_acquire);
  for (;;) {
    // A probe of an earlier period: its slot went with that period.
    if (state_of(w) != circuit_state::half_open || epoch_of(w) != epoch) return;
    const std::uint32_t in_flight = in_flight_of(w);
    const std::uint32_t remaining = in_flight > 0 ? in_flight - 1 : 0;
    if (r == result::failure) {
      if (transition(w, circuit_state::open, now())) return;
    } else if (r == result::success && successes_of(w) + 1 >= options_.successes_to_close()) {
      if (transition(w, circuit_state::closed, now())) return;
    } else {
      const std::uint32_t successes = successes_of(w) + (r == result::success ? 1 : 0);
      if (word_.compare_exchange_weak(w, make_word(circuit_state::half_open, epoch, remaining, successes),
                                      std::memory_order_acq_rel, std::memory_order_acquire))
        return;
      continue;
    }
    w = word_.load(std::memory_order_acquire);
  }
}

void breaker_core::poll() noexcept {
  const std::uint64_t w = word_.load(std::memory_order_acquire);
  const time_point now = this->now();
  const auto until = deadline(epoch_of(w));
  if (!until || now < *until) return;
  if (state_of(w) == circuit_state::open) {
    transition(w, circuit_state::half_open, now);
  } else if (state_of(w) == circuit_state::half_open) {
    transition(w, circuit_state::open, now);
  }
}

duration breaker_core::time_until_probe() const noexcept {
  const std::uint64_t w = word_.load(std::memory_order_acquire);
  switch (state_of(w)) {
    case circuit_state::isolated: return duration::max();
    case circuit_state::open: {
      const auto until = deadline(epoch_of(w));
      if (!until) return options_.open_duration(1);
      const time_point now = this->now();
      return now < *until ? *until - now : duration::zero();
    }
    default: return duration::zero();
  }
}

breaker_metrics breaker_core::metrics() const noexcept {
  const std::uint64_t w = word_.load(std::memory_order_acquire);
  const window_counts c = counts();
  const auto ratio = [&](std::uint64_t n) { return c.calls ? static_cast<double>(n) / static_cast<double>(c.calls) : 0.0; };
  return breaker_metrics{state_of(w),
                         c.calls,
                         c.failures,
                         c.slow,
                         ratio(c.failures),
                         ratio(c.slow),
                         consecutive_.load(std::memory_order_relaxed),
                         rejections_.load(std::memory_order_relaxed),
                         state_of(w) == circuit_state::half_open ? in_flight_of(w) : 0,
                         epoch_of(w),
                         time_until_probe()};
}

}  // namespace detail
}  // namespace resilience
