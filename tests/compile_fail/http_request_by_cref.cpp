// expect: pass std::ref\(request\), or the request itself
// strategy: http_client
// The client sets Host, Content-Length and the deadline header on a request
// it refers to: a const one, by std::cref, cannot take them.
#include <resilience/http/client.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/empty_body.hpp>

#include <functional>

boost::asio::awaitable<void> fetch(resilience::http::client& client) {
  namespace bhttp = boost::beast::http;
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, "/", 11};
  const auto to = resilience::http::endpoint::http("127.0.0.1", 8080);
#ifdef RESILIENCE_MISUSE
  auto res = co_await client.request(to, std::cref(req));
#else
  auto res = co_await client.request(to, std::ref(req));
#endif
  (void)res;
}
