// The baseline of scripts/compile-cost, not a sample to copy: the program of
// samples/gateway.cpp written with Boost.Asio and Beast alone (no resilience
// headers), of about the same size and shape, so that compiling both with the same flags shows what the
// library adds to the compile time and memory of a user's translation unit.
// It is the simple code one writes without the library and has none of its
// behaviour (no deadline passed on, no Retry-After, no retry budget, no
// breaker, no OpenTelemetry metrics).
//
//   - a coroutine HTTP/1.1 server: an accept loop, a session per connection
//     on a beast::tcp_stream (expires_after bounds idle and slow peers), at
//     most 64 requests at once (the next get 503);
//   - GET /quote asks an upstream for /price with a Beast client: keep-alive
//     connections reused, each attempt bounded by expires_after, up to 3
//     attempts with a doubling steady_timer backoff between them;
//   - GET /metrics: two counters in Prometheus' text format;
//   - the demo: an in-process upstream answering 503 to one request in 10,
//     N callers for S seconds, a one-line summary.
//
//   plain_gateway [--seconds S] [--callers N]
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
using request = http::request<http::string_body>;
using response = http::response<http::string_body>;
constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);  // errors as values, not exceptions

// ---- an HTTP/1.1 server ----------------------------------------------------

// Answers each request with `handler(req)`, an awaitable<response>.
template <class Handler>
class server {
 public:
  explicit server(Handler handler, int max_in_flight = 64) : handler_(std::move(handler)), max_(max_in_flight) {}

  asio::awaitable<void> run(tcp::acceptor& acceptor) {
    acceptor_ = &acceptor;
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(nothrow);
      if (!acceptor.is_open()) co_return;  // stop()
      if (!ec) asio::co_spawn(acceptor.get_executor(), session(beast::tcp_stream(std::move(socket))), asio::detached);
    }
  }
  void stop() {  // accepts no more; sessions end when their peers close
    if (acceptor_) acceptor_->close();
  }

 private:
  asio::awaitable<void> session(beast::tcp_stream stream) {
    beast::flat_buffer buffer;
    for (;;) {
      request req;
      stream.expires_after(30s);  // an idle or slow peer
      auto [rec, rn] = co_await http::async_read(stream, buffer, req, nothrow);
      if (rec) break;  // end of stream, timeout, reset
      response res{http::status::service_unavailable, req.version()};
      if (in_flight_ < max_) {
        ++in_flight_;
        try {
          res = co_await handler_(req);
        } catch (const std::exception& e) {
          res = response{http::status::internal_server_error, req.version(), e.what()};
        }
        --in_flight_;
      }
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      stream.expires_after(10s);
      auto [wec, wn] = co_await http::async_write(stream, res, nothrow);
      if (wec || !res.keep_alive()) break;
    }
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  Handler handler_;
  int max_, in_flight_ = 0;
  tcp::acceptor* acceptor_ = nullptr;
};

// ---- an HTTP/1.1 client with retries ---------------------------------------

using result = std::pair<beast::error_code, response>;  // the response is empty when there is an error

class client {
 public:
  explicit client(tcp::endpoint to, int attempts = 3, std::chrono::milliseconds timeout = 2s)
      : to_(to), attempts_(attempts), timeout_(timeout) {}

  // GET `target`; another attempt after an error, a timeout or a 5xx, 50 ms
  // after the first, 100 ms after the second, ...
  asio::awaitable<result> get(std::string target) {
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.set(http::field::host, to_.address().to_string());
    result last;
    auto backoff = 50ms;
    for (int attempt = 1;; ++attempt) {
      ++sent_;
      last = co_await once(req);
      if ((!last.first && last.second.result_int() < 500) || attempt == attempts_) co_return last;
      asio::steady_timer pause(co_await asio::this_coro::executor, backoff);
      co_await pause.async_wait(nothrow);
      backoff *= 2;
    }
  }
  void close() { idle_.clear(); }  // closes the idle connections
  std::uint64_t attempts() const { return sent_; }

 private:
  // One attempt, on an idle connection or a new one, bounded by timeout_.
  asio::awaitable<result> once(const http::request<http::empty_body>& req) {
    const auto executor = co_await asio::this_coro::executor;
    const bool reused = !idle_.empty();
    beast::tcp_stream stream = reused ? std::move(idle_.back()) : beast::tcp_stream(executor);
    if (reused) idle_.pop_back();
    stream.expires_after(timeout_);  // one deadline for connect, write and read
    if (!reused) {
      auto [ec] = co_await stream.async_connect(to_, nothrow);
      if (ec) co_return result{ec, {}};
    }
    auto [wec, wn] = co_await http::async_write(stream, req, nothrow);
    if (wec) co_return result{wec, {}};
    beast::flat_buffer buffer;
    response res;
    auto [rec, rn] = co_await http::async_read(stream, buffer, res, nothrow);
    if (rec) co_return result{rec, {}};
    if (res.keep_alive()) {
      stream.expires_never();
      idle_.push_back(std::move(stream));
    }
    co_return result{{}, std::move(res)};
  }

  tcp::endpoint to_;
  int attempts_;
  std::chrono::milliseconds timeout_;
  std::vector<beast::tcp_stream> idle_;
  std::uint64_t sent_ = 0;
};

// ---- the service -----------------------------------------------------------

class gateway {
 public:
  explicit gateway(tcp::endpoint upstream) : client_(upstream), server_(handler{this}) {}

  asio::awaitable<void> run(tcp::acceptor& acceptor) { return server_.run(acceptor); }
  void stop() {
    server_.stop();
    client_.close();
  }
  std::uint64_t upstream_attempts() const { return client_.attempts(); }

 private:
  struct handler {
    gateway* self;
    asio::awaitable<response> operator()(const request& req) const { return self->handle(req); }
  };

  asio::awaitable<response> handle(const request& req) {
    response res{http::status::not_found, req.version()};
    res.set(http::field::content_type, "text/plain");
    if (req.method() == http::verb::get && req.target() == "/quote") {
      auto [ec, price] = co_await client_.get("/price");
      if (!ec && price.result() == http::status::ok) {
        res.result(http::status::ok);
        res.body() = "quote: " + price.body();
        ++quotes_;
      } else {  // the upstream's own status, or 502 when there was none
        res.result(ec ? http::status::bad_gateway : price.result());
        res.body() = ec ? ec.message() : price.body();
        ++failed_;
      }
    } else if (req.method() == http::verb::get && req.target() == "/metrics") {
      res.result(http::status::ok);
      res.set(http::field::content_type, "text/plain; version=0.0.4");
      res.body() = "# HELP gateway_quotes_total Quotes answered, by outcome.\n# TYPE gateway_quotes_total counter\n"
                   "gateway_quotes_total{outcome=\"ok\"} " + std::to_string(quotes_) + "\n" +
                   "gateway_quotes_total{outcome=\"failed\"} " + std::to_string(failed_) + "\n";
    }
    co_return res;
  }

  std::uint64_t quotes_ = 0, failed_ = 0;
  client client_;
  server<handler> server_;
};

// ---- the demo --------------------------------------------------------------

int main(int argc, char** argv) {
  double seconds = 5;
  int callers = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--seconds") seconds = std::atof(argv[i + 1]);
    else if (flag == "--callers") callers = std::atoi(argv[i + 1]);
    else return std::fprintf(stderr, "usage: plain_gateway [--seconds S] [--callers N]\n"), 2;
  }
  if (!(seconds > 0) || callers < 1) return std::fprintf(stderr, "plain_gateway: --seconds and --callers must be positive\n"), 2;

  asio::io_context io;
  const auto loopback = asio::ip::make_address("127.0.0.1");
  // The upstream: answers /price, 503 to one request in 10.
  int upstream_requests = 0, unavailable = 0;
  server upstream{[&](const request& req) -> asio::awaitable<response> {
    response res{http::status::ok, req.version(), "42.00"};
    if (++upstream_requests % 10 == 0) {
      ++unavailable;
      res.result(http::status::service_unavailable);
      res.body() = "busy";
    }
    co_return res;
  }};
  tcp::acceptor upstream_acceptor{io, {loopback, 0}}, gateway_acceptor{io, {loopback, 0}};
  gateway service{upstream_acceptor.local_endpoint()};
  asio::co_spawn(io, upstream.run(upstream_acceptor), asio::detached);
  asio::co_spawn(io, service.run(gateway_acceptor), asio::detached);

  // Callers: GET /quote, one after another, no retries of their own.
  client callers_client{gateway_acceptor.local_endpoint(), 1, 5s};
  std::map<unsigned, int> answers;  // by status, 0: no answer
  int calls = 0, running = callers;
  const auto stop_at = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::string page;
  for (int c = 0; c < callers; ++c) {
    asio::co_spawn(io, [&]() -> asio::awaitable<void> {
      while (std::chrono::steady_clock::now() < stop_at) {
        auto [ec, res] = co_await callers_client.get("/quote");
        ++calls;
        ++answers[ec ? 0u : res.result_int()];
      }
      if (--running == 0) {
        auto [ec, metrics] = co_await callers_client.get("/metrics");
        if (!ec) page = metrics.body();
        callers_client.close();
        service.stop();
        upstream.stop();
      }
    }, asio::detached);
  }
  io.run();

  // The page's counter with this label, -1 when it is not there.
  const auto counter = [&](const std::string& labels) -> long long {
    const std::string name = "gateway_quotes_total{" + labels + "} ";
    const auto at = page.find(name);
    return at == std::string::npos ? -1 : std::atoll(page.c_str() + at + name.size());
  };
  std::string statuses;
  for (const auto& [status, n] : answers)
    statuses += (statuses.empty() ? "" : ", ") + (status ? std::to_string(status) : std::string("error")) + ": " +
                std::to_string(n);
  std::printf("plain_gateway: %d calls in %g s by %d callers (%s); upstream: %d requests, %d answered 503, "
              "%llu attempts by the gateway; /metrics: ok %lld, failed %lld\n",
              calls, seconds, callers, statuses.c_str(), upstream_requests, unavailable,
              static_cast<unsigned long long>(service.upstream_attempts()), counter("outcome=\"ok\""),
              counter("outcome=\"failed\""));
  return calls > 0 && counter("outcome=\"ok\"") == answers[200] ? 0 : 1;
}
