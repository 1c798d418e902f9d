// expect: a classifier is callable as bool
// strategy: retry
// A classifier that cannot take the op's outcome is refused with a sentence
// saying which shapes are accepted.
#include <resilience/retry.hpp>

#include <boost/asio/awaitable.hpp>
#include <string>

boost::asio::awaitable<int> call() {
#ifdef RESILIENCE_MISUSE
  const auto policy = resilience::retry_policy{}.retry_if([](const std::string&) { return true; });
#else
  const auto policy = resilience::retry_policy{}.retry_if([](const resilience::outcome<int>& o) { return o.failed(); });
#endif
  co_return co_await resilience::co_retry([]() -> boost::asio::awaitable<int> { co_return 42; }, policy);
}
