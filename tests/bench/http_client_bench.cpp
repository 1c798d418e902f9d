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
    auto res = co_await client->request(to, req);  // a copy of the request, as a temporary would be
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

const resilience::bench::ratio http_client_bench_ratio1{"http_client_keepalive_get", "http_raw_beast_keepalive_get"};

// For callgrind.sh: `n` exchanges, counted apart from the setup (the TLS
// context the client loads, the connection opened by the warm-up). The
// server's side runs on the same io_context, so it is counted in both.
struct http_exchanges {
  asio::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)};
  resilience::http::endpoint to = resilience::http::endpoint::http("127.0.0.1", acceptor.local_endpoint().port());
  std::optional<resilience::http::client> client;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, "/", 11};
  int mode = 0;  // 0 raw Beast, 1 client with a copy, 2 client by reference

  asio::awaitable<int> exchange() {
    if (mode == 0) {
      if (!stream) {
        stream.emplace(co_await asio::this_coro::executor);
        co_await stream->async_connect(tcp::endpoint(asio::ip::address_v4::loopback(), to.port), asio::use_awaitable);
        stream->socket().set_option(tcp::no_delay(true));
      }
      co_await bhttp::async_write(*stream, req, asio::use_awaitable);
      bhttp::response<bhttp::string_body> res;
      co_await bhttp::async_read(*stream, buffer, res, asio::use_awaitable);
      co_return res.result_int();
    }
    // No co_await inside ?: — GCC 12 mishandles the temporaries there.
    if (mode == 1) {
      auto res = co_await client->request(to, req);
      co_return res ? static_cast<int>(res->result_int()) : -1;
    }
    auto res = co_await client->request(to, std::ref(req));
    co_return res ? static_cast<int>(res->result_int()) : -1;
  }
  asio::awaitable<void> batch(int n) {
    for (int i = 0; i < n; ++i) co_await exchange();
    io.stop();
  }
  void run(int n) {
    asio::co_spawn(io, batch(n), asio::detached);
    io.restart();
    io.run();
  }
};

void measure_http(int mode, void (*measured)(http_exchanges*, int), int n) {
  http_exchanges x;
  x.mode = mode;
  x.req.set(bhttp::field::host, x.to.authority());
  if (mode != 0) x.client.emplace();
  asio::co_spawn(x.io, accept_loop(&x.acceptor), asio::detached);
  x.run(64);  // warm-up: the connection opened, the allocator caches filled
  measured(&x, n);
  x.client.reset();
  x.stream.reset();
  x.acceptor.close();
  x.io.restart();
  x.io.run();
}

}  // namespace

extern "C" [[gnu::noinline]] void measured_http_raw(http_exchanges* x, int n) { x->run(n); }
extern "C" [[gnu::noinline]] void measured_http_client(http_exchanges* x, int n) { x->run(n); }
extern "C" [[gnu::noinline]] void measured_http_client_ref(http_exchanges* x, int n) { x->run(n); }
extern "C" void measure_http_raw(int n) { measure_http(0, measured_http_raw, n); }
extern "C" void measure_http_client(int n) { measure_http(1, measured_http_client, n); }
extern "C" void measure_http_client_ref(int n) { measure_http(2, measured_http_client_ref, n); }
