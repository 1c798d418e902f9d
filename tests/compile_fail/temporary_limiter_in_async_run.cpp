// expect: async_run: a stage with shared state .* must outlive the call
// strategy: rate_limiter
// async_run refers to a stage with shared state: a temporary rate limiter
// would be gone before the call ends.
#include <resilience/async_run.hpp>
#include <resilience/rate_limiter.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

boost::asio::awaitable<int> answer();

void start(boost::asio::io_context& io) {
#ifdef RESILIENCE_MISUSE
  resilience::async_run(io.get_executor(), resilience::rate_limiter{}, [] { return answer(); }, boost::asio::detached);
#else
  static resilience::rate_limiter limiter;
  resilience::async_run(io.get_executor(), limiter, [] { return answer(); }, boost::asio::detached);
#endif
}
