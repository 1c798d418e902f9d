// expect: required for the satisfaction of .awaitable_op<Op>. \[with Op = 
// expect: because .* does not satisfy 'awaitable_op'
// strategy: retry
// An op must return asio::awaitable<T>: a plain value is refused at the call,
// naming the concept it misses, not deep inside the retry loop.
#include <resilience/retry.hpp>

#include <boost/asio/awaitable.hpp>

boost::asio::awaitable<int> call() {
#ifdef RESILIENCE_MISUSE
  co_return co_await resilience::co_retry([] { return 42; }, resilience::retry_policy{});
#else
  co_return co_await resilience::co_retry([]() -> boost::asio::awaitable<int> { co_return 42; },
                                          resilience::retry_policy{});
#endif
}
