// resilience/retry_budget.hpp — bounds on how much retrying a client may do,
// shared by every call that retries the same dependency.
//
//   // gRPC's retry throttling: 10 tokens, 0.1 back per success.
//   resilience::retry_token_budget tokens{10, 0.1};
//   // or: at most 10% retries over 10 s, with 10 retries a second allowed anyway.
//   resilience::retry_ratio_budget budget{resilience::retry_ratio_budget_options{}.ratio(0.1)};
//
//   const auto policy = resilience::retry_policy{}.max_attempts(4).budget(tokens);
//
// Retries multiply load: three layers that each make 4 attempts turn one
// request into 64 at the bottom during an outage. A budget makes retrying
// stop when most calls fail, while a healthy dependency's rare failures are
// still retried. The retry stage reports every attempt's outcome to its
// budget and asks it as each retry is about to be sent (after its wait); a
// refusal ends the call with its last outcome (the logger says so, and the
// budget counts it).
//
// Both are small thread-safe objects shared by reference: they must outlive
// the policies that use them. Recording a success takes no lock.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/detail/thread_number.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <utility>

namespace resilience {

// How an attempt ended, as a budget counts it. gRFC A6: a success gives
// tokens back, a failure the policy would retry takes one, and a failure it
// would not retry (a 404, a bad request) neither: it tells nothing of whether
// retrying helps. A value the op returned (an HTTP response of any status the
// classifier does not retry) is a success. An attempt refused before it was
// sent (reached_no_server(): an open breaker, a full bulkhead) is not_sent:
// no token moves, but a first one is still a call the application made, which
// a ratio budget counts.
enum class attempt_verdict : std::uint8_t { success, retryable_failure, final_failure, not_sent };

// A budget the retry and hedging stages can use: told how each attempt
// ended, asked as each retry is about to be sent. One that can also tell,
// taking nothing, whether a retry decided now could go (would_retry()
// const, as both here can) refuses it before its wait. A budget with
// record(bool failed, bool first_attempt) is accepted too; it is told a
// final failure as a success, and nothing of an attempt not sent.
template <class B>
concept retry_budget = requires(B& b) {
  requires requires { b.record(attempt_verdict::success, true); } || requires { b.record(true, true); };
  { b.try_retry() } -> std::convertible_to<bool>;
};

// gRPC's retry throttling (gRFC A6), a budget of tokens (not to be confused
// with adaptive_throttle.hpp, which refuses first attempts): the token count starts at max_tokens;
// every retryable failure takes 1, every success gives back token_ratio, up
// to max_tokens, a final failure neither; retries are allowed while the count
// is above max_tokens / 2.
class retry_token_budget {
 public:
  // max_tokens in [1, 1000]; token_ratio in (0, max_tokens], with at most
  // three decimals as in gRPC's service config. Throws std::invalid_argument
  // naming the field.
  retry_token_budget(std::uint32_t max_tokens, double token_ratio);
  retry_token_budget(const retry_token_budget&) = delete;
  retry_token_budget& operator=(const retry_token_budget&) = delete;

  // An attempt's outcome. One atomic addition, never a retried
  // compare-and-swap (which two threads would keep failing on each other's
  // writes); a step past a bound is taken back at once. Another thread may
  // glimpse the count up to one step per thread past a bound in between:
  // only whether it is above half matters, and the books come out exact.
  void record(attempt_verdict v, bool first_attempt = true) noexcept {
    if (v == attempt_verdict::success || v == attempt_verdict::retryable_failure)
      record(v == attempt_verdict::retryable_failure, first_attempt);
  }
  // The same, with failed meaning a failure the policy would retry.
  void record(bool failed, bool /*first_attempt*/ = true) noexcept {
    if (!failed) {
      // At the maximum (the healthy case) a success writes nothing.
      if (milli_tokens_.load(std::memory_order_relaxed) >= max_milli_) return;
      const std::int64_t after = milli_tokens_.fetch_add(ratio_milli_, std::memory_order_relaxed) + ratio_milli_;
      if (after > max_milli_) milli_tokens_.fetch_sub(std::min(after - max_milli_, ratio_milli_), std::memory_order_relaxed);
      return;
    }
    if (milli_tokens_.load(std::memory_order_relaxed) <= 0) return;
    const std::int64_t after = milli_tokens_.fetch_sub(1000, std::memory_order_relaxed) - 1000;
    if (after < 0) milli_tokens_.fetch_add(std::min<std::int64_t>(-after, 1000), std::memory_order_relaxed);
  }

  // Whether one more retry may start; a refusal is counted.
  bool try_retry() noexcept {
    if (would_retry()) return true;
    refusals_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // The same, counting nothing.
  bool would_retry() const noexcept { return milli_tokens_.load(std::memory_order_relaxed) > max_milli_ / 2; }

  double tokens() const noexcept { return static_cast<double>(milli_tokens_.load(std::memory_order_relaxed)) / 1000; }
  std::uint64_t refusals() const noexcept { return refusals_.load(std::memory_order_relaxed); }

 private:
  std::int64_t max_milli_;
  std::int64_t ratio_milli_;
  std::atomic<std::int64_t> milli_tokens_;
  std::atomic<std::uint64_t> refusals_{0};
};

class retry_ratio_budget_options {
 public:
  // Retries allowed per call made, over the window: 0.1 by default. In (0, 10].
  retry_ratio_budget_options ratio(double r) const;
  // How far back calls and retries count: 10 s by default. At least 1 ms.
  retry_ratio_budget_options window(duration d) const;
  // Retries a second allowed whatever the ratio, so that a quiet client can
  // still retry: 10 by default, counted over about the last second (all of
  // a shorter window). 0 for none.
  retry_ratio_budget_options min_retries_per_second(std::uint32_t n) const;

  double ratio() const noexcept { return ratio_; }
  duration window() const noexcept { return window_; }
  std::uint32_t min_retries_per_second() const noexcept { return min_per_second_; }

 private:
  double ratio_ = 0.1;
  duration window_ = std::chrono::seconds(10);
  std::uint32_t min_per_second_ = 10;
};

namespace detail {

// Calls and retries in buckets of one tenth of the window, each tagged with
// the bucket's number since the clock's epoch; a bucket from an earlier turn
// of the ring is reset by whoever finds it first. Calls, counted on every
// call, go to the calling thread's shard (a cache line of its own, so two
// threads never write the same line); retries, counted only after a failure,
// go to one shared ring, and a retry reads only the shards some thread has
// written. Counts from a bucket being reset concurrently may be lost: the
// budget is approximate by a few calls, never unbounded.
class ratio_window {
 public:
  static constexpr int buckets = 10;

  ratio_window(const retry_ratio_budget_options& o) noexcept;

  void add_call(time_point now) noexcept {
    const std::int64_t number = bucket_number(now);
    shard& s = call_shards_[thread_number() & (shard_count - 1)];
    if (!s.used.load(std::memory_order_relaxed)) s.used.store(true, std::memory_order_relaxed);
    bucket& b = s.ring[slot(number)];
    renew(b, number);
    b.count.fetch_add(1, std::memory_order_relaxed);
  }
  bool try_retry(time_point now) noexcept;
  // Whether try_retry(now) would allow one, taking and counting nothing.
  bool would_retry(time_point now) const noexcept;
  std::uint64_t refusals() const noexcept { return refusals_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::uint32_t shard_count = 8;  // a power of 2
  struct bucket {
    std::atomic<std::int64_t> number{-1};
    std::atomic<std::uint64_t> count{0};
  };
  struct alignas(64) shard {
    std::atomic<bool> used{false};  // written once: a retry skips shards never written
    std::array<bucket, buckets> ring;
  };

  std::int64_t bucket_number(time_point now) const noexcept {
    const std::int64_t ticks = now.time_since_epoch().count();
    // Floor division: a clock may read before its epoch.
    if (ticks < 0) return -((-ticks - 1) / bucket_ticks_) - 1;
    // A multiplication by the divisor's reciprocal, corrected by at most two
    // steps: a 64-bit division would cost more than the rest of the call.
    const auto t = static_cast<std::uint64_t>(ticks);
    const auto d = static_cast<std::uint64_t>(bucket_ticks_);
    __extension__ using wide = unsigned __int128;
    auto q = static_cast<std::uint64_t>((static_cast<wide>(t) * reciprocal_) >> 64);
    while ((q + 1) * d <= t) ++q;
    return static_cast<std::int64_t>(q);
  }
  static std::size_t slot(std::int64_t number) noexcept {
    return static_cast<std::size_t>(((number % buckets) + buckets) % buckets);
  }
  // Makes `b` the bucket `number` if it holds an older one.
  static void renew(bucket& b, std::int64_t number) noexcept {
    std::int64_t seen = b.number.load(std::memory_order_acquire);
    if (seen < number && b.number.compare_exchange_strong(seen, number, std::memory_order_acq_rel))
      b.count.store(0, std::memory_order_relaxed);
  }
  // Whether one more retry fits, the newest bucket being `newest`.
  bool allows(std::int64_t newest) const noexcept;
  // The sum of `ring`'s buckets numbered (newest - span, newest].
  static std::uint64_t sum(const std::array<bucket, buckets>& ring, std::int64_t newest, int span = buckets) noexcept;

  double ratio_;
  std::int64_t bucket_ticks_;
  std::uint64_t reciprocal_;  // floor((2^64 - 1) / bucket_ticks_)
  int floor_buckets_;      // the newest buckets that make about one second (all of a shorter window)
  double floor_retries_;   // min_retries_per_second over those buckets
  shard call_shards_[shard_count];
  alignas(64) std::array<bucket, buckets> retries_;
  std::atomic<std::uint64_t> refusals_{0};
};

}  // namespace detail

// Retries at most ratio() of the calls made over the window (Finagle's and
// Linkerd's retry budget); past it, min_retries_per_second() more in any
// second. Unlike Finagle, whose floor is a reserve of the rate × the window
// spendable at once, the floor is a rate: an outage's first moments cannot
// spend ten seconds of it together.
template <resilience::clock Clock = steady_clock>
class basic_retry_ratio_budget {
 public:
  explicit basic_retry_ratio_budget(retry_ratio_budget_options o = {}, Clock clock = {})
      : clock_(std::move(clock)), window_(o) {}
  basic_retry_ratio_budget(const basic_retry_ratio_budget&) = delete;
  basic_retry_ratio_budget& operator=(const basic_retry_ratio_budget&) = delete;

  // Every attempt's outcome; only first attempts count as calls, whatever
  // their outcome, one an open breaker refused included (Finagle counts
  // every request entering its retry filter).
  void record(attempt_verdict, bool first_attempt) noexcept {
    if (first_attempt) window_.add_call(detail::coarse_now(clock_));
  }
  void record(bool /*failed*/, bool first_attempt) noexcept {
    if (first_attempt) window_.add_call(detail::coarse_now(clock_));
  }
  bool try_retry() noexcept { return window_.try_retry(detail::coarse_now(clock_)); }
  bool would_retry() const noexcept { return window_.would_retry(detail::coarse_now(clock_)); }
  std::uint64_t refusals() const noexcept { return window_.refusals(); }

 private:
  Clock clock_;
  detail::ratio_window window_;
};

using retry_ratio_budget = basic_retry_ratio_budget<>;

// The name before 0.2 (CHANGELOG.md).
using retry_throttle [[deprecated("renamed resilience::retry_token_budget")]] = retry_token_budget;

}  // namespace resilience
