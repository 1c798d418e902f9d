// expect: a client must outlive its calls
// strategy: http_client
// A request's coroutine refers to its client (the pool, the breakers), so a
// temporary client would be gone before the first byte is written.
#include <resilience/http/client.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/empty_body.hpp>

boost::asio::awaitable<void> fetch() {
  namespace bhttp = boost::beast::http;
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, "/", 11};
  const auto to = resilience::http::endpoint::http("127.0.0.1", 8080);
#ifdef RESILIENCE_MISUSE
  auto res = co_await resilience::http::client{}.request(to, req);
#else
  static resilience::http::client client;
  auto res = co_await client.request(to, req);
#endif
  (void)res;
}
