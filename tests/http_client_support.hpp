// The test server and helpers of the HTTP client's tests (http_client_tests,
// http_connection_pool_tests, http_client_tls_tests): small Beast servers on
// 127.0.0.1 following a script, a manual clock, and the client's calls.
#pragma once

#include "support.hpp"

#include <resilience/http/client.hpp>
#include <resilience/http/connection_pool.hpp>
#include <resilience/http/server.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/file_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace rhttp = resilience::http;
using asio::ip::tcp;
using boost::system::error_code;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::live;
using resilience::test::spawn;

// The client's common calls on the manual clock, compiled once for the test
// files in http_client_manual_calls.cpp (the library compiles the steady
// clock's only: see the end of client.hpp).
namespace resilience::http {
#define HTTP_CLIENT_TEST_EXTERN_CALL(Clock, Held) extern RESILIENCE_HTTP_CLIENT_CALL(Clock, Held)
RESILIENCE_HTTP_CLIENT_COMMON_CALLS_ON(HTTP_CLIENT_TEST_EXTERN_CALL, testing::manual_clock)
#undef HTTP_CLIENT_TEST_EXTERN_CALL
}  // namespace resilience::http

namespace http_client_test {

using client_t = rhttp::basic_client<manual_clock>;
using result_t = boost::system::result<bhttp::response<bhttp::string_body>>;

// What the test server does with the n-th request it reads.
struct step {
  // drop: closes the connection unanswered, as a crashing server would: a
  // FIN, and over TLS no close_notify.
  enum kind { respond, reset, hang, hold, drop } what = respond;
  unsigned status = 200;
  std::vector<std::pair<std::string, std::string>> headers = {};
  bool close = false;  // Connection: close, then the server closes
  // Says keep-alive, then ends its side anyway (FIN) and keeps the socket in
  // `held`, where a test can see the client's kernel acknowledge the FIN.
  bool half_close = false;
  // Answers with this Content-Length and no body, as a server answers HEAD.
  std::optional<std::size_t> headers_only_length = std::nullopt;
  // Raw bytes sent with the response, in the same write: before it (interim
  // 1xx responses) and after it (bytes nobody asked for).
  std::string before = {};
  std::string after = {};
  // Sent on the idle connection once the test opens the gate, then a FIN:
  // a server giving up on a kept-alive connection (a 408, say).
  std::string when_idle = {};
};

struct server {
  asio::io_context& io;
  tcp::acceptor acceptor;
  asio::ssl::context* tls = nullptr;
  int accepted = 0;
  int requests = 0;
  int handshake_failures = 0;
  std::vector<bhttp::request<bhttp::string_body>> seen;
  std::function<step(int)> script = [](int) { return step{}; };
  asio::steady_timer gate;  // a `hold` waits until the test opens it; never expires on its own
  bool silent = false;      // accepts, then neither reads nor writes
  std::vector<tcp::socket> held;

  // Listens on 127.0.0.1 (any free port by default) and serves from now on.
  explicit server(asio::io_context& c, std::uint16_t port = 0);
  std::uint16_t port() const { return acceptor.local_endpoint().port(); }
  rhttp::endpoint at() const { return rhttp::endpoint::http("127.0.0.1", port()); }
  void open_gate() { gate.cancel(); }
};

// Runs handlers until `done`, or gives up after `cap` turns.
template <class Pred>
bool run_until(asio::io_context& io, Pred done, int cap = 3000) {
  for (int i = 0; i < cap && !done(); ++i) {
    if (io.stopped()) io.restart();
    io.run_one_for(std::chrono::milliseconds(5));
  }
  return done();
}

// Runs every handler that is ready, the server's and the client's (one
// io_context), socket events already in included, until none is. What is
// not done then waits on the manual clock or on bytes nobody sends: a test
// checks that something does not happen after this, against the clock's
// armed timers and the pool's and server's counts, never after a span of
// real time.
inline void run_ready(asio::io_context& io) {
  for (int turns = 0;; ++turns) {
    BOOST_REQUIRE_MESSAGE(turns < 100000, "handlers kept coming: something spins");
    if (io.stopped()) io.restart();
    if (io.poll() == 0) return;
  }
}

// The peer of `socket` has acknowledged its FIN: the end of stream is in
// that peer's receive queue.
bool fin_acknowledged(tcp::socket& socket);

inline bhttp::request<bhttp::empty_body> get(std::string target = "/") { return {bhttp::verb::get, target, 11}; }
inline bhttp::request<bhttp::string_body> post(std::string body) {
  bhttp::request<bhttp::string_body> r{bhttp::verb::post, "/orders", 11};
  r.body() = std::move(body);
  return r;
}

// Every event reported to it (or only those of one kind), kept.
struct recorded_events final : resilience::event_sink {
  explicit recorded_events(std::optional<resilience::event_kind> kind = {}) : only(kind) {}
  std::optional<resilience::event_kind> only;
  std::vector<resilience::event> seen;  // `host` not to be read: a view into the call
  std::vector<std::string> hosts;       // its copies
  void on_event(const resilience::event& e) noexcept override {
    if (only && e.kind != *only) return;
    seen.push_back(e);
    hosts.emplace_back(e.host);
  }
};

// Retries without waiting, so that only a Retry-After moves the clock.
inline rhttp::client_options quick() {
  return rhttp::client_options::standard().backoff(resilience::backoff::constant(0ms).with_jitter(resilience::jitter::none));
}

template <class Req>
asio::awaitable<result_t> call(client_t& c, rhttp::endpoint to, Req req, rhttp::request_options o = {}) {
  live frame(live::ops);
  co_return co_await c.request(std::move(to), std::move(req), o);
}

template <class Req>
asio::awaitable<result_t> call_by_reference(client_t& c, rhttp::endpoint to, Req& req) {
  live frame(live::ops);
  co_return co_await c.request(std::move(to), std::ref(req));
}

inline unsigned status_of(const completion<result_t>& c) {
  BOOST_REQUIRE(c.value);
  BOOST_REQUIRE(c.value->has_value());
  return (*c.value)->result_int();
}
inline error_code error_of(const completion<result_t>& c) {
  BOOST_REQUIRE(c.value);
  BOOST_REQUIRE(c.value->has_error());
  return c.value->error();
}

// Two GETs in turn, each answered 200 with its own body ("reply 1", "reply 2").
void two_gets_get_their_own_replies(asio::io_context& io, client_t& c, server& srv);

}  // namespace http_client_test

using namespace http_client_test;
