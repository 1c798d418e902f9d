#include <resilience/retry_budget.hpp>
#include <resilience/detail/with_option.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace resilience {

retry_token_budget::retry_token_budget(std::uint32_t max_tokens, double token_ratio)
    : max_milli_(static_cast<std::int64_t>(max_tokens) * 1000), ratio_milli_(0), milli_tokens_(max_milli_) {
  if (max_tokens < 1 || max_tokens > 1000) detail::invalid_option("retry_token_budget: max_tokens must be in [1, 1000]");
  if (!(token_ratio > 0) || !std::isfinite(token_ratio) || token_ratio > static_cast<double>(max_tokens))
    detail::invalid_option("retry_token_budget: token_ratio must be positive and at most max_tokens");
  const double milli = token_ratio * 1000;
  if (std::abs(milli - std::round(milli)) > 1e-6)
    detail::invalid_option("retry_token_budget: token_ratio has at most three decimals (as in gRPC's service config)");
  ratio_milli_ = static_cast<std::int64_t>(std::round(milli));
}

retry_ratio_budget_options retry_ratio_budget_options::ratio(double r) const {
  if (!(r > 0) || !(r <= 10)) detail::invalid_option("retry_ratio_budget_options: ratio must be in (0, 10]");
  return resilience::detail::with_option(*this, &retry_ratio_budget_options::ratio_, r);
}

retry_ratio_budget_options retry_ratio_budget_options::window(duration d) const {
  if (d < std::chrono::milliseconds(1)) detail::invalid_option("retry_ratio_budget_options: window must be at least 1 ms");
  // Past a day a window is a configuration mistake, and it keeps the
  // bucket arithmetic far from overflow.
  if (d > std::chrono::hours(24)) detail::invalid_option("retry_ratio_budget_options: window must be at most 24 h");
  return resilience::detail::with_option(*this, &retry_ratio_budget_options::window_, d);
}

retry_ratio_budget_options retry_ratio_budget_options::min_retries_per_second(std::uint32_t n) const {
  return resilience::detail::with_option(*this, &retry_ratio_budget_options::min_per_second_, n);
}

namespace detail {

ratio_window::ratio_window(const retry_ratio_budget_options& o) noexcept
    : ratio_(o.ratio()),
      bucket_ticks_(std::max<std::int64_t>(o.window().count() / buckets, 1)),
      reciprocal_(~std::uint64_t{0} / static_cast<std::uint64_t>(bucket_ticks_)),
      floor_buckets_(static_cast<int>(std::clamp<std::int64_t>(
          (std::chrono::duration_cast<duration>(std::chrono::seconds(1)).count() + bucket_ticks_ / 2) / bucket_ticks_, 1,
          buckets))),
      floor_retries_(static_cast<double>(o.min_retries_per_second()) * floor_buckets_ *
                     std::chrono::duration<double>(duration(bucket_ticks_)).count()) {}

std::uint64_t ratio_window::sum(const std::array<bucket, buckets>& ring, std::int64_t newest, int span) noexcept {
  std::uint64_t total = 0;
  for (const bucket& b : ring) {
    const std::int64_t n = b.number.load(std::memory_order_acquire);
    if (n > newest - span && n <= newest) total += b.count.load(std::memory_order_relaxed);
  }
  return total;
}

bool ratio_window::allows(std::int64_t newest) const noexcept {
  std::uint64_t calls = 0;
  for (const shard& s : call_shards_)
    if (s.used.load(std::memory_order_relaxed)) calls += sum(s.ring, newest);
  const std::uint64_t retries = sum(retries_, newest);
  // Within the ratio, or within the floor's rate over about the last second.
  return static_cast<double>(retries) + 1 <= ratio_ * static_cast<double>(calls) ||
         static_cast<double>(floor_buckets_ == buckets ? retries : sum(retries_, newest, floor_buckets_)) + 1 <=
             floor_retries_;
}

bool ratio_window::would_retry(time_point now) const noexcept { return allows(bucket_number(now)); }

bool ratio_window::try_retry(time_point now) noexcept {
  const std::int64_t newest = bucket_number(now);
  bucket& current = retries_[slot(newest)];
  renew(current, newest);
  if (!allows(newest)) {
    refusals_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  current.count.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace detail
}  // namespace resilience
