// expect: use of deleted function .*resilience::http::basic_connection_pool<Clock>::acquire\(resilience::http::endpoint, resilience::time_point\) &&
// expect: call to deleted member function 'acquire'[\s\S]*?resilience/http/connection_pool\.hpp:[0-9:]+ note: candidate function.* has been explicitly deleted
// strategy: http_client
// A lease refers to its pool: acquiring from a temporary pool would leave
// the lease pointing at nothing.
#include <resilience/http/connection_pool.hpp>

#include <boost/asio/awaitable.hpp>

boost::asio::awaitable<void> borrow() {
  const auto to = resilience::http::endpoint::http("127.0.0.1", 8080);
#ifdef RESILIENCE_MISUSE
  auto lease = co_await resilience::http::connection_pool{}.acquire(to);
#else
  static resilience::http::connection_pool pool;
  auto lease = co_await pool.acquire(to);
#endif
  (void)lease;
}
