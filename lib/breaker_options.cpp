// breaker_options: each setter validates its own field. Pairs of fields are
// judged when a breaker is built (lib/circuit_breaker.cpp), from the values
// in effect then, so that the order of the setters never matters.
#include <resilience/breaker_options.hpp>
#include <resilience/detail/with_option.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace resilience {

namespace {

[[noreturn]] void invalid_breaker_option(const std::string& what) { throw std::invalid_argument("breaker_options: " + what); }

void check_ratio(double r, const char* what) {
  if (!(r > 0.0 && r <= 1.0)) invalid_breaker_option(what);  // NaN fails too
}

}  // namespace

breaker_options breaker_options::consecutive_failures(std::uint32_t n) const {
  if (n == 0) invalid_breaker_option("consecutive_failures must be at least 1");
  return resilience::detail::with_option(*this, &breaker_options::consecutive_failures_, n);
}

breaker_options breaker_options::failure_ratio(double ratio) const {
  check_ratio(ratio, "failure_ratio must be in (0, 1]");
  return resilience::detail::with_option(*this, &breaker_options::failure_ratio_, ratio);
}

breaker_options breaker_options::no_failure_ratio() const {
  auto o = *this;
  o.failure_ratio_.reset();
  return o;
}

breaker_options breaker_options::slow_calls(duration threshold, double ratio) const {
  if (threshold <= duration::zero()) invalid_breaker_option("slow_calls threshold must be positive");
  check_ratio(ratio, "slow_calls ratio must be in (0, 1]");
  auto o = *this;
  o.slow_threshold_ = threshold;
  o.slow_ratio_ = ratio;
  return o;
}

breaker_options breaker_options::count_window(std::uint32_t calls) const {
  if (calls == 0 || calls > max_count_window) invalid_breaker_option("count_window must be 1 to 1048576 calls");
  auto o = *this;
  o.window_ = window_kind::count;
  o.count_window_ = calls;
  o.count_window_set_ = true;
  return o;
}

breaker_options breaker_options::time_window(duration span) const {
  if (span <= duration::zero()) invalid_breaker_option("time_window span must be positive");
  // The default bucket count yields to a span too short to be cut in 10.
  return time_window(span, static_cast<std::uint32_t>(std::min<duration::rep>(span.count(), default_buckets)));
}

breaker_options breaker_options::time_window(duration span, std::uint32_t buckets) const {
  if (span <= duration::zero()) invalid_breaker_option("time_window span must be positive");
  if (buckets == 0 || buckets > max_buckets) invalid_breaker_option("time_window buckets must be 1 to 1024");
  if (span / buckets <= duration::zero()) invalid_breaker_option("time_window span must be at least one tick per bucket");
  auto o = *this;
  o.window_ = window_kind::time;
  o.time_window_ = span;
  o.buckets_ = buckets;
  return o;
}

breaker_options breaker_options::minimum_calls(std::uint32_t n) const {
  if (n == 0) invalid_breaker_option("minimum_calls must be at least 1");
  auto o = *this;
  o.minimum_calls_ = n;
  o.minimum_calls_set_ = true;
  return o;
}

breaker_options breaker_options::open_duration(duration d) const {
  if (d < duration::zero()) invalid_breaker_option("open_duration must not be negative");
  auto o = *this;
  o.open_duration_ = d;
  o.open_generator_ = nullptr;
  return o;
}

breaker_options breaker_options::open_duration(duration_generator g) const {
  if (!g) invalid_breaker_option("open_duration generator must not be empty");
  return resilience::detail::with_option(*this, &breaker_options::open_generator_, std::move(g));
}

breaker_options breaker_options::half_open_permits(std::uint32_t n) const {
  if (n == 0 || n > max_permits) invalid_breaker_option("half_open_permits must be 1 to 65535");
  return resilience::detail::with_option(*this, &breaker_options::half_open_permits_, n);
}

breaker_options breaker_options::successes_to_close(std::uint32_t m) const {
  if (m == 0 || m > max_permits) invalid_breaker_option("successes_to_close must be 1 to 65535");
  return resilience::detail::with_option(*this, &breaker_options::successes_to_close_, m);
}

breaker_options breaker_options::slow_only_above_threshold(bool on) const {
  return resilience::detail::with_option(*this, &breaker_options::slow_strict_, on);
}

breaker_options breaker_options::judge_every_call(bool on) const {
  return resilience::detail::with_option(*this, &breaker_options::judge_every_call_, on);
}

breaker_options breaker_options::half_open_judged_by_ratio(std::uint32_t probes) const {
  if (probes > max_permits) invalid_breaker_option("half_open_judged_by_ratio must be 0 (off) to 65535 probes");
  auto o = *this;
  // The probes at a time follow the count; back to ours (0), they return to
  // one, unless set to something else since.
  if (probes != 0) o.half_open_permits_ = probes;
  else if (judged_probes_ != 0 && half_open_permits_ == judged_probes_) o.half_open_permits_ = 1;
  o.judged_probes_ = probes;
  return o;
}

breaker_options breaker_options::probe_strictly_after_break(bool on) const {
  return resilience::detail::with_option(*this, &breaker_options::strict_break_, on);
}

breaker_options breaker_options::resilience4j_rules(std::uint32_t half_open_probes) const {
  if (half_open_probes == 0 || half_open_probes > max_permits)
    invalid_breaker_option("resilience4j_rules half_open_probes must be 1 to 65535");
  auto o = slow_only_above_threshold().judge_every_call().half_open_judged_by_ratio(half_open_probes)
               .probe_strictly_after_break();
  if (!half_open_limit_set_) o.half_open_limit_ = duration::max();
  return o;
}

breaker_options breaker_options::half_open_limit(duration d) const {
  if (d <= duration::zero()) invalid_breaker_option("half_open_limit must be positive");
  auto o = *this;
  o.half_open_limit_ = d;
  o.half_open_limit_set_ = true;
  return o;
}

breaker_options breaker_options::on_state_change(std::function<void(const state_change&)> f) const {
  return resilience::detail::with_option(*this, &breaker_options::on_state_change_, std::move(f));
}

breaker_options breaker_options::on_rejection(std::function<void(const rejection&)> f) const {
  return resilience::detail::with_option(*this, &breaker_options::on_rejection_, std::move(f));
}

duration breaker_options::open_duration(std::uint32_t opening) const {
  if (!open_generator_) return open_duration_;
  return std::max(open_generator_(std::max<std::uint32_t>(opening, 1)), duration::zero());
}

}  // namespace resilience
