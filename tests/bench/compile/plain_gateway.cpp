// The gateway of samples/gateway.cpp written with Asio and Beast alone, for
// scripts/compile-cost: the same work (a server answering GET /quote by
// calling an upstream with a deadline, an upstream, callers, a summary) with
// none of the library's strategies. Compiled, not run by the suite.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <fmt/core.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using response = http::response<http::string_body>;

// One call to the upstream on a connection of its own, bounded by `timeout`.
asio::awaitable<std::optional<response>> call_upstream(tcp::endpoint upstream, std::chrono::milliseconds timeout) {
  beast::tcp_stream stream(co_await asio::this_coro::executor);
  stream.expires_after(timeout);
  auto [cec] = co_await stream.async_connect(upstream, asio::as_tuple(asio::use_awaitable));
  if (cec) co_return std::nullopt;
  http::request<http::empty_body> req{http::verb::get, "/price", 11};
  req.set(http::field::host, "upstream");
  auto [wec, w] = co_await http::async_write(stream, req, asio::as_tuple(asio::use_awaitable));
  if (wec) co_return std::nullopt;
  beast::flat_buffer buffer;
  response res;
  auto [rec, r] = co_await http::async_read(stream, buffer, res, asio::as_tuple(asio::use_awaitable));
  if (rec) co_return std::nullopt;
  co_return res;
}

// Serves one connection with `handler`.
template <class Handler>
asio::awaitable<void> session(tcp::socket socket, Handler handler) {
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  for (;;) {
    http::request<http::string_body> req;
    stream.expires_after(30s);
    auto [ec, n] = co_await http::async_read(stream, buffer, req, asio::as_tuple(asio::use_awaitable));
    if (ec) break;
    response res = co_await handler(req);
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    auto [wec, w] = co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    if (wec || !res.keep_alive()) break;
  }
}

template <class Handler>
asio::awaitable<void> serve(tcp::acceptor& acceptor, Handler handler, const bool& stop) {
  while (!stop) {
    auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec) break;
    asio::co_spawn(acceptor.get_executor(), session(std::move(socket), handler), asio::detached);
  }
}

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2;
  asio::io_context io;
  const auto loopback = asio::ip::make_address("127.0.0.1");
  tcp::acceptor upstream_acceptor{io, {loopback, 0}}, gateway_acceptor{io, {loopback, 0}};
  const tcp::endpoint upstream = upstream_acceptor.local_endpoint(), gateway = gateway_acceptor.local_endpoint();
  bool stop = false;
  int upstream_requests = 0;
  auto upstream_handler = [&](const http::request<http::string_body>& req) -> asio::awaitable<response> {
    response res{++upstream_requests % 5 == 0 ? http::status::service_unavailable : http::status::ok, req.version()};
    res.body() = "42.00";
    co_return res;
  };
  auto gateway_handler = [&](const http::request<http::string_body>& req) -> asio::awaitable<response> {
    response res{http::status::not_found, req.version()};
    if (req.target() == "/quote") {
      const auto price = co_await call_upstream(upstream, 5000ms);
      res.result(price && price->result() == http::status::ok ? http::status::ok : http::status::bad_gateway);
      if (price) res.body() = "quote: " + price->body();
    }
    co_return res;
  };
  asio::co_spawn(io, serve(upstream_acceptor, upstream_handler, stop), asio::detached);
  asio::co_spawn(io, serve(gateway_acceptor, gateway_handler, stop), asio::detached);
  std::map<unsigned, int> answers;
  const auto stop_at = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int running = 8;
  for (int c = 0; c < 8; ++c) {
    asio::co_spawn(io, [&]() -> asio::awaitable<void> {
      beast::tcp_stream stream(co_await asio::this_coro::executor);
      co_await stream.async_connect(gateway, asio::use_awaitable);
      beast::flat_buffer buffer;
      while (std::chrono::steady_clock::now() < stop_at) {
        http::request<http::empty_body> req{http::verb::get, "/quote", 11};
        req.set(http::field::host, "gateway");
        co_await http::async_write(stream, req, asio::use_awaitable);
        response res;
        co_await http::async_read(stream, buffer, res, asio::use_awaitable);
        ++answers[res.result_int()];
      }
      if (--running == 0) {
        stop = true;
        upstream_acceptor.close();
        gateway_acceptor.close();
      }
    }, asio::detached);
  }
  io.run();
  for (const auto& [status, n] : answers) fmt::print("{} {}\n", status, n);
  fmt::print("upstream: {} requests\n", upstream_requests);
}
