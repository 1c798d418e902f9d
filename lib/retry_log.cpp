#include <resilience/retry.hpp>

#include <fmt/format.h>

#include <exception>

namespace resilience::detail {

std::string describe_failure(const std::exception_ptr& ex, const error_code& ec) {
  if (ec) return fmt::format("{} [{}:{}]", ec.message(), ec.category().name(), ec.value());
  if (ex) {
    try {
      std::rethrow_exception(ex);
    } catch (const std::exception& e) {
      return fmt::format("exception: {}", e.what());
    } catch (...) {
      return "exception of unknown type";
    }
  }
  return "result classified as transient";
}

std::string format_retry_line(std::uint32_t attempt, std::uint32_t max_attempts, std::string_view failure,
                              duration backoff, duration delay) {
  using ms = std::chrono::duration<double, std::milli>;
  if (max_attempts == unlimited_attempts)
    return fmt::format("retry: attempt {} failed ({}); next attempt in {:.1f}ms (backoff {:.1f}ms before jitter)",
                       attempt, failure, ms(delay).count(), ms(backoff).count());
  return fmt::format("retry: attempt {}/{} failed ({}); next attempt in {:.1f}ms (backoff {:.1f}ms before jitter)",
                     attempt, max_attempts, failure, ms(delay).count(), ms(backoff).count());
}

std::string format_budget_line(std::uint32_t attempt, std::uint32_t max_attempts, std::string_view failure) {
  if (max_attempts == unlimited_attempts)
    return fmt::format("retry: attempt {} failed ({}); retry budget exhausted, giving up", attempt, failure);
  return fmt::format("retry: attempt {}/{} failed ({}); retry budget exhausted, giving up", attempt, max_attempts,
                     failure);
}

}  // namespace resilience::detail
