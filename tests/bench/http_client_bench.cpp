// One keep-alive GET over loopback through the HTTP client (pool, deadline,
// retry, breaker, attempt timeout), against the same exchange written by hand
// with Beast on one kept-open stream. The server runs on the same io_context.
#include "bench_support.hpp"

#include <resilience/http/client.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <boost/asio/this_coro.hpp>

#include <optional>

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using asio::ip::tcp;

asio::awaitable<void> serve(beast::tcp_stream stream) {
  beast::flat_buffer buffer;
  bhttp::response<bhttp::string_body> res{bhttp::status::ok, 11};
  res.body() = "ok";
  res.prepare_payload();
  for (;;) {
    bhttp::request<bhttp::empty_body> req;
    auto [ec, n] = co_await bhttp::async_read(stream, buffer, req, asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    auto [wec, wn] = co_await bhttp::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    if (wec) co_return;
  }
}

asio::awaitable<void> accept_loop(tcp::acceptor* acceptor) {
  for (;;) {
    auto [ec, socket] = co_await acceptor->async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    asio::co_spawn(acceptor->get_executor(), serve(beast::tcp_stream(std::move(socket))), asio::detached);
  }
}

void http_raw_beast_keepalive_get(benchmark::State& state) {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  const auto port = acceptor.local_endpoint().port();
  asio::co_spawn(io, accept_loop(&acceptor), asio::detached);
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, "/", 11};
  req.set(bhttp::field::host, "127.0.0.1");
  auto body = [&]() -> asio::awaitable<int> {
    if (!stream) {
      stream.emplace(co_await asio::this_coro::executor);
      co_await stream->async_connect(tcp::endpoint(asio::ip::address_v4::loopback(), port), asio::use_awaitable);
    }
    co_await bhttp::async_write(*stream, req, asio::use_awaitable);
    bhttp::response<bhttp::string_body> res;
    co_await bhttp::async_read(*stream, buffer, res, asio::use_awaitable);
    co_return res.result_int();
  };
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < 64; ++i) co_await body();
        const std::size_t before = resilience::bench::allocations.load();
        for (auto _ : state) benchmark::DoNotOptimize(co_await body());
        state.counters["allocs/call"] = static_cast<double>(resilience::bench::allocations.load() - before) /
                                        static_cast<double>(state.iterations());
        stream.reset();
        acceptor.close();
      },
      asio::detached);
  io.run();
}
BENCHMARK(http_raw_beast_keepalive_get);

void http_client_keepalive_get(benchmark::State& state) {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  const auto to = resilience::http::endpoint::http("127.0.0.1", acceptor.local_endpoint().port());
  asio::co_spawn(io, accept_loop(&acceptor), asio::detached);
  std::optional<resilience::http::client> client(std::in_place);
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, "/", 11};
  auto body = [&]() -> asio::awaitable<int> {
    auto res = co_await client->request(to, req);
    co_return res ? static_cast<int>(res->result_int()) : -1;
  };
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < 64; ++i) co_await body();
        const std::size_t before = resilience::bench::allocations.load();
        for (auto _ : state) benchmark::DoNotOptimize(co_await body());
        state.counters["allocs/call"] = static_cast<double>(resilience::bench::allocations.load() - before) /
                                        static_cast<double>(state.iterations());
        client.reset();  // closes the idle connection: the server's session ends
        acceptor.close();
      },
      asio::detached);
  io.run();
}
BENCHMARK(http_client_keepalive_get);

const resilience::bench::ratio r1{"http_client_keepalive_get", "http_raw_beast_keepalive_get"};

}  // namespace
