// expect: use of deleted function .*resilience::rate_limit_delay\(const Limiter&&, Next\)
// expect: call to deleted function 'rate_limit_delay'[\s\S]*?resilience/rate_limiter\.hpp:[0-9:]+ note: candidate function.* has been explicitly deleted
// strategy: rate_limiter
// A retry policy's rate_limit_delay refers to its limiter, shared by every
// call: not to a temporary, which would be gone before the first retry.
#include <resilience/rate_limiter.hpp>
#include <resilience/retry.hpp>

void build() {
#ifdef RESILIENCE_MISUSE
  const auto policy = resilience::retry_policy{}.delay_generator(
      resilience::rate_limit_delay(resilience::rate_limiter{}, resilience::backoff_delay{}));
#else
  static const resilience::rate_limiter limiter;
  const auto policy =
      resilience::retry_policy{}.delay_generator(resilience::rate_limit_delay(limiter, resilience::backoff_delay{}));
#endif
  (void)policy;
}
