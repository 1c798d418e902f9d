// expect: deleted
// co_retry copies a policy into the call, unless told to refer to it with
// std::cref: then the policy must outlive the call, and a temporary cannot.
#include <resilience/retry.hpp>

#include <boost/asio/awaitable.hpp>

#include <functional>

boost::asio::awaitable<int> op();

auto call() {
#ifdef RESILIENCE_MISUSE
  return resilience::co_retry([] { return op(); }, std::cref(resilience::retry_policy{}.max_attempts(2)));
#else
  static const auto policy = resilience::retry_policy{}.max_attempts(2);
  return resilience::co_retry([] { return op(); }, std::cref(policy));
#endif
}
