// The HTTP server: inbound deadlines (504, the handler's downstream wait
// cancelled), shedding (503 + Retry-After), slow clients dropped per phase,
// size limits (431, 413), keep-alive, drain (in-flight requests finish, new
// connections refused, cancellation after the grace), frames freed when the
// io_context is destroyed, options, hooks (and hooks that throw). Real
// sockets on 127.0.0.1, every timer of the server on a manual_clock: the
// tests move virtual time and wait only for conditions (with an iteration
// cap), never for a duration; what must not happen is checked once every
// ready handler has run (run_ready), against the server's own counts.
#include "support.hpp"

#include <resilience/error.hpp>
#include <resilience/http/metrics_page.hpp>
#include <resilience/http/server.hpp>
#include <resilience/metrics.hpp>
#include <resilience/prometheus.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace rhttp = resilience::http;
using asio::ip::tcp;
using boost::system::error_code;
using resilience::context;
using resilience::duration;
using resilience::time_point;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::live;
using resilience::test::spawn;

BOOST_TEST_DONT_PRINT_LOG_VALUE(resilience::http::client_phase)

namespace {

using response = bhttp::response<bhttp::string_body>;

struct server_fixture;

// Answers by target: /hello at once; /gate once the test opens the gate;
// /downstream after a one-hour wait on the virtual clock (a call that the
// deadline must cut short); /throw throws.
struct test_handler {
  server_fixture* f;
  asio::awaitable<response> operator()(rhttp::server_request req, const context& ctx) const;
};
using test_server = rhttp::server<test_handler, manual_clock>;

struct server_fixture {
  manual_clock clock;
  // What the server reported.
  std::vector<unsigned> finished;
  std::vector<rhttp::client_phase> slow;
  std::vector<std::uint32_t> shed;
  std::vector<time_point> deadlines_exceeded;
  // What the handler saw.
  int calls = 0;
  std::vector<time_point> handler_deadlines;
  std::vector<error_code> downstream;
  bool gate_open = false;

  // Declared so that the io_context goes before the server (its frames give
  // their slots back to it) and the sockets before the io_context.
  std::optional<test_server> server;
  std::optional<asio::io_context> io{std::in_place};
  std::optional<tcp::acceptor> acceptor;
  std::optional<asio::steady_timer> gate;  // never expires: cancelled to open
  completion<void> run_done;
  tcp::endpoint listening;  // kept: a drained acceptor is closed
  asio::cancellation_signal run_cancel;

  server_fixture() { live::ops = 0; }

  rhttp::server_options options() {
    return rhttp::server_options{}
        .on_request_finished([this](const rhttp::request_finished& r) { finished.push_back(r.status); })
        .on_slow_client([this](rhttp::client_phase p) { slow.push_back(p); })
        .on_shed([this](std::uint32_t n) { shed.push_back(n); })
        .on_deadline_exceeded([this](time_point d) { deadlines_exceeded.push_back(d); });
  }

  // The server and its listening acceptor, not yet run.
  void build(rhttp::server_options o) {
    server.emplace(test_handler{this}, std::move(o), clock);
    acceptor.emplace(*io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    listening = acceptor->local_endpoint();
    gate.emplace(*io, asio::steady_timer::time_point::max());
  }
  void run() { spawn(*io, server->run(*acceptor), run_done, &run_cancel); }

  void start(rhttp::server_options o) {
    build(std::move(o));
    run();
    drive([] { return false; }, 5);  // run() up to its first accept
  }

  tcp::endpoint endpoint() const { return listening; }

  void open_gate() {
    gate_open = true;
    gate->cancel();
  }

  // Runs handlers until `done()`, waiting for the sockets when nothing is
  // ready. Loopback traffic arrives in microseconds; the cap only keeps a
  // failing test from hanging.
  template <class Pred>
  bool drive(Pred done, int cap = 5000) {
    for (int i = 0; i < cap && !done(); ++i) {
      if (io->stopped()) io->restart();
      if (io->poll_one() == 0) io->run_one_for(std::chrono::milliseconds(1));
    }
    return done();
  }
  // Drives until the server has armed a timer for `at` (its next expiry):
  // virtual time must not move before the bound it is meant to pass exists.
  bool armed(time_point at) {
    return drive([&] { return clock.next_expiry() == at; });
  }
  // Runs handlers until none has been ready for a few milliseconds, socket
  // events included: the server has done all it can with what the clients
  // sent. Before virtual time moves past a bound, so that the bound counts
  // from the virtual time at which the server reached its phase (the sweep
  // arms no timer per phase that could be waited for instead).
  bool quiet() {
    for (int i = 0, still = 0; i < 5000; ++i) {
      if (io->stopped()) io->restart();
      if (io->run_for(std::chrono::milliseconds(1)) != 0) {
        still = 0;
      } else if (++still == 5) {
        return true;
      }
    }
    return false;
  }
  // Runs every handler that is ready, socket events already in included,
  // until none is: the server has done all that the time on its clock and
  // the bytes sent so far let it do. What has not happened by then (a
  // response, a drop, the end of run()) is checked against the server's own
  // counts and the clock's armed timers, which the server updates in those
  // handlers, not against a span of real time.
  void run_ready() {
    do {
      if (io->stopped()) io->restart();
    } while (io->poll() != 0);
  }

  // Moves virtual time; what falls due runs once the io_context runs.
  void advance(duration d) { clock.advance(d); }
};

asio::awaitable<response> test_handler::operator()(rhttp::server_request req, const context& ctx) const {
  live frame(live::ops);
  ++f->calls;
  f->handler_deadlines.push_back(ctx.deadline);
  response res{bhttp::status::ok, req.version()};
  if (req.target() == "/gate") {
    auto [ec] = co_await f->gate->async_wait(asio::as_tuple(asio::use_awaitable));
    if (!f->gate_open) throw boost::system::system_error(ec);
  } else if (req.target() == "/downstream") {
    auto timer = f->clock.make_timer(co_await asio::this_coro::executor);
    timer.expires_after(1h);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    f->downstream.push_back(ec);
    if (ec) throw boost::system::system_error(ec);
  } else if (req.target() == "/mapped") {  // turns the cut downstream call into an answer of its own
    auto timer = f->clock.make_timer(co_await asio::this_coro::executor);
    timer.expires_after(1h);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    f->downstream.push_back(ec);
    if (ec) {
      res.result(bhttp::status::bad_gateway);
      res.body() = ec.message();
      res.prepare_payload();
      co_return res;
    }
  } else if (req.target() == "/big") {  // more than any socket buffer holds
    res.body().assign(16 * 1024 * 1024, 'b');
    res.prepare_payload();
    co_return res;
  } else if (req.target() == "/throw") {
    throw std::runtime_error("handler failed");
  }
  res.body() = "hello";
  res.prepare_payload();
  co_return res;
}

// A client on a real socket: writes raw bytes, reads responses.
struct client {
  tcp::socket socket;
  beast::flat_buffer buffer;
  std::vector<response> responses;
  error_code read_error;  // why the last read ended without a response
  int reads = 0;

  // No Nagle: a request sent in parts leaves at once, not after the server's
  // delayed ACK of the part before.
  explicit client(server_fixture& f) : socket(*f.io) {
    socket.connect(f.endpoint());
    socket.set_option(tcp::no_delay(true));
  }

  void send(const std::string& raw) { asio::write(socket, asio::buffer(raw)); }

  // Reads one response (or the end of the connection) in the background.
  void read(server_fixture& f) {
    asio::co_spawn(*f.io, read_one(), asio::detached);
  }
  asio::awaitable<void> read_one() {
    response res;
    auto [ec, n] = co_await bhttp::async_read(socket, buffer, res, asio::as_tuple(asio::use_awaitable));
    (void)n;
    if (ec) {
      read_error = ec;
    } else {
      responses.push_back(std::move(res));
    }
    ++reads;
  }
  // The connection was closed by the server (eof, or reset).
  bool closed() const { return reads > 0 && read_error && read_error != asio::error::operation_aborted; }
};

// The bytes of a GET, as a raw client writes them.
std::string raw_get(const std::string& target, const std::string& extra = {}) {
  return "GET " + target + " HTTP/1.1\r\nHost: test\r\n" + extra + "\r\n";
}

// A GET on a new connection is answered 200: the server goes on serving.
bool serves_a_new_connection(server_fixture& f) {
  client fresh(f);
  fresh.send(raw_get("/hello"));
  fresh.read(f);
  return f.drive([&] { return fresh.reads == 1; }) && fresh.responses.size() == 1u &&
         fresh.responses[0].result_int() == 200u;
}

// A hook for the tests of hooks that throw: throws the first time only.
struct throws_once {
  bool thrown = false;
  void operator()() {
    if (!std::exchange(thrown, true)) throw std::runtime_error("hook failed");
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(http_server, server_fixture)

BOOST_AUTO_TEST_CASE(answers_and_reuses_a_kept_alive_connection) {
  start(options());
  client c(*this);
  c.send(raw_get("/hello"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 1; }));
  BOOST_REQUIRE_EQUAL(c.responses.size(), 1u);
  BOOST_TEST(c.responses[0].result_int() == 200u);
  BOOST_TEST(c.responses[0].body() == "hello");
  BOOST_TEST(c.responses[0].keep_alive());
  BOOST_TEST(server->connections() == 1u);

  c.send(raw_get("/hello"));  // the same connection
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 2; }));
  BOOST_REQUIRE_EQUAL(c.responses.size(), 2u);
  BOOST_TEST(c.responses[1].result_int() == 200u);
  BOOST_TEST(server->connections() == 1u);
  BOOST_TEST(calls == 2);
  BOOST_TEST(finished == (std::vector<unsigned>{200, 200}), boost::test_tools::per_element());

  // Connection: close is honoured: the server closes after answering.
  c.send(raw_get("/hello", "Connection: close\r\n"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 3; }));
  BOOST_TEST(!c.responses.back().keep_alive());
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 4; }));
  BOOST_TEST(c.closed());
  BOOST_TEST(drive([&] { return server->connections() == 0; }));
}

BOOST_AUTO_TEST_CASE(a_passed_deadline_answers_504_and_cancels_the_downstream_wait) {
  start(options());
  client c(*this);
  const time_point sent_at = clock.now();
  c.send(raw_get("/downstream", "grpc-timeout: 100m\r\n"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return calls == 1; }));
  BOOST_REQUIRE_EQUAL(handler_deadlines.size(), 1u);
  BOOST_TEST((handler_deadlines[0] == sent_at + 100ms), "the handler's deadline is the client's");
  BOOST_TEST(live::ops == 1);

  advance(99ms);
  run_ready();
  BOOST_TEST(c.reads == 0, "answered before the deadline");
  BOOST_TEST(deadlines_exceeded.empty());
  BOOST_TEST(finished.empty());
  BOOST_TEST(live::ops == 1, "the handler no longer waits downstream");
  BOOST_TEST((clock.next_expiry() == sent_at + 100ms), "the deadline is no longer armed");

  advance(1ms);
  BOOST_REQUIRE(drive([&] { return c.reads == 1; }));
  BOOST_REQUIRE_EQUAL(c.responses.size(), 1u);
  BOOST_TEST(c.responses[0].result_int() == 504u);
  BOOST_REQUIRE_EQUAL(downstream.size(), 1u);
  BOOST_TEST(downstream[0] == asio::error::operation_aborted, "the downstream wait saw the cancellation");
  BOOST_TEST(live::ops == 0);
  BOOST_TEST(deadlines_exceeded.size() == 1u);
  BOOST_TEST(finished == (std::vector<unsigned>{504}), boost::test_tools::per_element());
  BOOST_TEST(server->in_flight() == 0u);

  // The connection stays usable.
  c.send(raw_get("/hello"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 2; }));
  BOOST_TEST(c.responses.back().result_int() == 200u);
}

// A handler that maps the cancelled downstream call to a 502 of its own (as an
// ordinary status mapping does) does not hide the deadline: the client gets
// 504, and it is counted as one.
BOOST_AUTO_TEST_CASE(past_the_deadline_the_answer_is_504_whatever_the_handler_returns) {
  start(options());
  client c(*this);
  const time_point sent_at = clock.now();
  c.send(raw_get("/mapped", "grpc-timeout: 100m\r\n"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return calls == 1; }));
  BOOST_REQUIRE(armed(sent_at + 100ms));
  advance(100ms);
  BOOST_REQUIRE(drive([&] { return c.reads == 1; }));
  BOOST_REQUIRE_EQUAL(c.responses.size(), 1u);
  BOOST_TEST(c.responses[0].result_int() == 504u);
  BOOST_REQUIRE_EQUAL(downstream.size(), 1u);
  BOOST_TEST(downstream[0] == asio::error::operation_aborted);
  BOOST_REQUIRE_EQUAL(deadlines_exceeded.size(), 1u);
  BOOST_TEST((deadlines_exceeded[0] == sent_at + 100ms));
  BOOST_TEST(finished == (std::vector<unsigned>{504}), boost::test_tools::per_element());
  BOOST_TEST(server->in_flight() == 0u);
}

// A proxy may add a deadline field of its own: the request is held to the
// tightest, and one malformed field among them is the client's error.
BOOST_AUTO_TEST_CASE(several_deadline_fields_the_tightest_wins_and_a_malformed_one_answers_400) {
  start(options());
  client c(*this);
  const time_point sent_at = clock.now();
  c.send(raw_get("/hello", "grpc-timeout: 5S\r\ngrpc-timeout: 100m\r\ngrpc-timeout: 2S\r\n"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 1; }));
  BOOST_REQUIRE_EQUAL(handler_deadlines.size(), 1u);
  BOOST_TEST((handler_deadlines[0] == sent_at + 100ms));
  BOOST_TEST(c.responses.at(0).result_int() == 200u);

  c.send(raw_get("/hello", "grpc-timeout: 100m\r\ngrpc-timeout: soon\r\n"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 2; }));
  BOOST_REQUIRE_EQUAL(c.responses.size(), 2u);
  BOOST_TEST(c.responses[1].result_int() == 400u);
  BOOST_TEST(calls == 1, "the handler is not called");
}

BOOST_AUTO_TEST_CASE(a_handler_done_before_its_deadline_answers_normally) {
  start(options().inbound_deadline(rhttp::deadline_header::milliseconds("x-timeout-ms")));
  client c(*this);
  const time_point sent_at = clock.now();
  c.send(raw_get("/gate", "x-timeout-ms: 5000\r\n"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return calls == 1; }));
  BOOST_TEST((handler_deadlines[0] == sent_at + 5s));
  advance(4s);
  run_ready();
  BOOST_TEST(deadlines_exceeded.empty());
  BOOST_TEST(finished.empty());
  open_gate();
  BOOST_REQUIRE(drive([&] { return c.reads == 1; }));
  BOOST_REQUIRE_EQUAL(c.responses.size(), 1u);
  BOOST_TEST(c.responses[0].result_int() == 200u);
  BOOST_TEST(deadlines_exceeded.empty());
  // Its deadline timer is gone: time past it changes nothing.
  advance(10s);
  run_ready();
  BOOST_TEST(c.reads == 1);
  BOOST_TEST(deadlines_exceeded.empty());
  BOOST_TEST(finished.size() == 1u);
  BOOST_TEST(server->connections() == 1u);
}

BOOST_AUTO_TEST_CASE(max_deadline_caps_the_clients_and_bounds_requests_without_one) {
  start(options().max_deadline(50ms));
  client a(*this);
  client b(*this);
  const time_point sent_at = clock.now();
  a.send(raw_get("/downstream", "grpc-timeout: 10S\r\n"));
  b.send(raw_get("/downstream"));
  a.read(*this);
  b.read(*this);
  BOOST_REQUIRE(drive([&] { return calls == 2; }));
  BOOST_TEST((handler_deadlines[0] == sent_at + 50ms));
  BOOST_TEST((handler_deadlines[1] == sent_at + 50ms));
  advance(50ms);
  BOOST_REQUIRE(drive([&] { return a.reads == 1 && b.reads == 1; }));
  BOOST_TEST(a.responses.at(0).result_int() == 504u);
  BOOST_TEST(b.responses.at(0).result_int() == 504u);
}

BOOST_AUTO_TEST_CASE(a_deadline_already_passed_answers_504_without_calling_the_handler) {
  start(options());
  client c(*this);
  c.send(raw_get("/hello", "grpc-timeout: 0n\r\n"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 1; }));
  BOOST_TEST(c.responses.at(0).result_int() == 504u);
  BOOST_TEST(calls == 0);
}

BOOST_AUTO_TEST_CASE(a_malformed_deadline_header_answers_400_without_calling_the_handler) {
  start(options());
  client c(*this);
  const char* const malformed[] = {"soon", "", "100", "-5m", "100 m", "123456789m", "1.5S"};
  for (const char* v : malformed) {
    c.send(raw_get("/hello", std::string("grpc-timeout: ") + v + "\r\n"));
    c.read(*this);
  }
  const auto n = static_cast<int>(std::size(malformed));
  BOOST_REQUIRE(drive([&] { return c.reads == n; }));
  for (int i = 0; i < n; ++i) BOOST_TEST(c.responses.at(i).result_int() == 400u, malformed[i]);
  BOOST_TEST(calls == 0);
  BOOST_TEST(finished == std::vector<unsigned>(n, 400u), boost::test_tools::per_element());
  BOOST_TEST(c.responses.back().keep_alive(), "the connection stays usable");
  // Absent, and well formed: the handler runs.
  c.send(raw_get("/hello"));
  c.send(raw_get("/hello", "grpc-timeout: 99999999H\r\n"));
  c.read(*this);
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == n + 2; }));
  BOOST_TEST(c.responses.at(n).result_int() == 200u);
  BOOST_TEST(c.responses.at(n + 1).result_int() == 200u);
  BOOST_TEST(calls == 2);
}

BOOST_AUTO_TEST_CASE(a_malformed_milliseconds_header_answers_400_too) {
  start(options().inbound_deadline(rhttp::deadline_header::milliseconds("x-timeout-ms")));
  client c(*this);
  c.send(raw_get("/hello", "x-timeout-ms: 12ms\r\n"));
  c.send(raw_get("/hello", "x-timeout-ms: 250\r\n"));
  c.read(*this);
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 2; }));
  BOOST_TEST(c.responses.at(0).result_int() == 400u);
  BOOST_TEST(c.responses.at(1).result_int() == 200u);
  BOOST_REQUIRE_EQUAL(handler_deadlines.size(), 1u);
}

BOOST_AUTO_TEST_CASE(a_handler_exception_answers_500) {
  start(options());
  client c(*this);
  c.send(raw_get("/throw"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 1; }));
  BOOST_TEST(c.responses.at(0).result_int() == 500u);
  BOOST_TEST(server->in_flight() == 0u);
}

BOOST_AUTO_TEST_CASE(a_full_server_sheds_with_503_and_retry_after_at_once) {
  start(options().max_concurrent(2).retry_after(std::chrono::seconds(7)));
  client a(*this), b(*this), c(*this);
  a.send(raw_get("/gate"));
  b.send(raw_get("/gate"));
  a.read(*this);
  b.read(*this);
  BOOST_REQUIRE(drive([&] { return calls == 2; }));
  BOOST_TEST(server->in_flight() == 2u);

  c.send(raw_get("/gate"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 1; }));  // no time passes: answered at once
  BOOST_REQUIRE_EQUAL(c.responses.size(), 1u);
  BOOST_TEST(c.responses[0].result_int() == 503u);
  BOOST_TEST(c.responses[0][bhttp::field::retry_after] == "7");
  BOOST_TEST(c.responses[0][bhttp::field::content_type] == "text/plain; charset=utf-8");
  BOOST_TEST(c.responses[0].body() == "503 Service Unavailable\n", "a short body says what the status means");
  BOOST_TEST(calls == 2, "a shed request never reaches the handler");
  BOOST_TEST(shed == (std::vector<std::uint32_t>{2}), boost::test_tools::per_element());
  BOOST_TEST(a.reads == 0);

  open_gate();
  BOOST_REQUIRE(drive([&] { return a.reads == 1 && b.reads == 1; }));
  BOOST_TEST(a.responses.at(0).result_int() == 200u);
  BOOST_TEST(b.responses.at(0).result_int() == 200u);
  BOOST_TEST(server->in_flight() == 0u, "every slot given back");

  // The shed connection is still open, and now gets through.
  c.send(raw_get("/hello"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 2; }));
  BOOST_TEST(c.responses.at(1).result_int() == 200u);
}

BOOST_AUTO_TEST_CASE(guarded_handler_alone_sheds_and_bounds_without_sockets) {
  start(options());  // only for the io_context and the gate
  rhttp::guarded_handler guarded{test_handler{this}, options().max_concurrent(1), clock};
  rhttp::server_request held{bhttp::verb::get, "/gate", 11};
  rhttp::server_request second{bhttp::verb::get, "/hello", 11};
  completion<response> first_done, second_done;
  spawn(*io, guarded(std::move(held)), first_done);
  BOOST_REQUIRE(drive([&] { return calls == 1; }));
  spawn(*io, guarded(std::move(second)), second_done);
  BOOST_REQUIRE(drive([&] { return second_done.done(); }));
  BOOST_TEST(second_done.value->result_int() == 503u);
  BOOST_TEST((*second_done.value)[bhttp::field::retry_after] == "1");
  BOOST_TEST(guarded.in_flight() == 1u);
  open_gate();
  BOOST_REQUIRE(drive([&] { return first_done.done(); }));
  BOOST_TEST(first_done.value->result_int() == 200u);
  BOOST_TEST(guarded.in_flight() == 0u);
}

BOOST_AUTO_TEST_CASE(a_caller_cancelling_a_guarded_call_gets_operation_aborted) {
  start(options());
  rhttp::guarded_handler guarded{test_handler{this}, options(), clock};
  asio::cancellation_signal cancel;
  completion<response> done;
  spawn(*io, guarded(rhttp::server_request{bhttp::verb::get, "/downstream", 11}, context{}), done, &cancel);
  BOOST_REQUIRE(drive([&] { return calls == 1; }));
  cancel.emit(asio::cancellation_type::terminal);
  BOOST_REQUIRE(drive([&] { return done.done(); }));
  BOOST_TEST(done.times == 1);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), boost::system::system_error,
                        [](const auto& e) { return e.code() == asio::error::operation_aborted; });
  BOOST_TEST(guarded.in_flight() == 0u);
  BOOST_TEST(live::ops == 0);
  BOOST_TEST(finished == (std::vector<unsigned>{0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_slow_loris_is_dropped_after_the_header_timeout) {
  start(options().header_read_timeout(2s));
  client c(*this);
  const time_point connected_at = clock.now();
  c.send("GET /hello HTTP/1.1\r\nHost: test\r\nX-Slow: ");  // and then nothing
  c.read(*this);
  BOOST_REQUIRE(armed(connected_at + 2s));
  BOOST_TEST(server->connections() == 1u);
  advance(1999ms);
  run_ready();
  BOOST_TEST(c.reads == 0);
  BOOST_TEST(slow.empty(), "dropped before its bound");
  BOOST_TEST(server->connections() == 1u);
  advance(1ms);
  BOOST_REQUIRE(drive([&] { return c.reads == 1; }));
  BOOST_TEST(c.closed(), "closed without an answer");
  BOOST_TEST(c.responses.empty());
  BOOST_TEST(slow == (std::vector<rhttp::client_phase>{rhttp::client_phase::header}),
             boost::test_tools::per_element());
  BOOST_TEST(drive([&] { return server->connections() == 0; }));
  BOOST_TEST(calls == 0);
}

BOOST_AUTO_TEST_CASE(a_client_stalling_its_body_is_dropped_after_the_body_timeout) {
  start(options().body_read_timeout(3s));
  client c(*this);
  const time_point header_at = clock.now();
  c.send("POST /hello HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\nabc");
  c.read(*this);
  BOOST_REQUIRE(quiet());  // the header is in: the body's bound counts from here
  BOOST_REQUIRE(armed(header_at + 3s));
  advance(2s);
  run_ready();
  BOOST_TEST(c.reads == 0);
  BOOST_TEST(slow.empty(), "dropped before its bound");
  BOOST_TEST(server->connections() == 1u);
  advance(1s);
  BOOST_REQUIRE(drive([&] { return c.reads == 1; }));
  BOOST_TEST(c.closed());
  BOOST_TEST(slow == (std::vector<rhttp::client_phase>{rhttp::client_phase::body}), boost::test_tools::per_element());
  BOOST_TEST(calls == 0);
}

BOOST_AUTO_TEST_CASE(a_client_that_does_not_read_its_response_is_dropped_after_the_write_timeout) {
  start(options().write_timeout(4s));
  client c(*this);
  c.socket.set_option(asio::socket_base::receive_buffer_size(4096));
  c.send(raw_get("/big"));  // and never read
  BOOST_REQUIRE(drive([&] { return calls == 1; }));
  BOOST_REQUIRE(quiet());  // the write has begun, and stalled
  BOOST_REQUIRE(armed(clock.now() + 4s));
  advance(3s);
  run_ready();
  BOOST_TEST(server->connections() == 1u);
  BOOST_TEST(slow.empty(), "dropped before its bound");
  advance(1s);
  BOOST_REQUIRE(drive([&] { return server->connections() == 0u; }));
  BOOST_TEST(slow == (std::vector<rhttp::client_phase>{rhttp::client_phase::write}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(an_idle_kept_alive_connection_is_closed_after_the_idle_timeout) {
  start(options().idle_timeout(30s).header_read_timeout(1s));
  client c(*this);
  c.send(raw_get("/hello"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 1; }));
  BOOST_REQUIRE(quiet());  // idle from now
  // Idle: the header timeout does not apply before the next request starts.
  advance(29s);
  run_ready();
  BOOST_TEST(server->connections() == 1u);
  BOOST_TEST(slow.empty());
  c.read(*this);
  advance(1s);
  BOOST_REQUIRE(drive([&] { return c.reads == 2; }));
  BOOST_TEST(c.closed());
  BOOST_TEST(slow.empty(), "an idle client is not a slow one");
}

// The bounds are kept by a sweep of the connections (one timer per server),
// not a timer per read and write: a bound is never cut early, and at most one
// granularity late (a tenth of the smallest bound, 100 ms here).
BOOST_AUTO_TEST_CASE(a_slow_client_is_cut_by_the_sweep_within_its_bound_plus_the_granularity) {
  start(options().header_read_timeout(1s));
  const time_point a_at = clock.now();
  client a(*this);
  a.send("GET /hello HTTP/1.1\r\nHo");
  a.read(*this);
  BOOST_REQUIRE(drive([&] { return server->connections() == 1u; }));
  BOOST_REQUIRE(quiet());
  advance(50ms);  // b's bound falls within one granularity of a's
  const time_point b_at = clock.now();
  client b(*this);
  b.send("GET /hello HTTP/1.1\r\nHo");
  b.read(*this);
  BOOST_REQUIRE(drive([&] { return server->connections() == 2u; }));
  BOOST_REQUIRE(quiet());

  advance(a_at + 1s - 1ms - clock.now());
  run_ready();
  BOOST_TEST(a.reads + b.reads == 0, "neither is cut before its bound");
  BOOST_TEST(slow.empty());
  BOOST_TEST(server->connections() == 2u);
  advance(1ms);
  BOOST_REQUIRE(drive([&] { return a.reads == 1; }));
  BOOST_TEST(a.closed());
  run_ready();
  BOOST_TEST(b.reads == 0, "b's bound has not passed");
  BOOST_TEST(slow.size() == 1u);
  BOOST_TEST(server->connections() == 1u);
  advance(b_at + 1s + 100ms - clock.now());  // its bound plus the granularity
  BOOST_REQUIRE(drive([&] { return b.reads == 1; }));
  BOOST_TEST(b.closed());
  BOOST_TEST(a.responses.empty());
  BOOST_TEST(b.responses.empty());
  BOOST_TEST(slow == (std::vector<rhttp::client_phase>{rhttp::client_phase::header, rhttp::client_phase::header}),
             boost::test_tools::per_element());
  BOOST_TEST(drive([&] { return server->connections() == 0u; }));
}

// Each phase within its bound, over many sweeps: header in two parts, body
// in two parts, idle between requests; the connection is never cut.
BOOST_AUTO_TEST_CASE(a_connection_making_progress_is_never_cut) {
  start(options().header_read_timeout(1s).body_read_timeout(1s).write_timeout(1s).idle_timeout(1s));
  client c(*this);
  const time_point began = clock.now();
  for (int i = 1; i <= 8; ++i) {
    c.send("POST /hello HTTP/1.1\r\nHost: te");
    BOOST_REQUIRE(quiet());
    advance(500ms);
    c.send("st\r\nContent-Length: 4\r\n\r\nab");
    BOOST_REQUIRE(quiet());
    advance(500ms);
    c.send("cd");
    c.read(*this);
    BOOST_REQUIRE(drive([&] { return c.reads == i; }));
    BOOST_REQUIRE(quiet());
    advance(900ms);
  }
  BOOST_TEST((clock.now() - began >= 15s), "over many sweeps");
  BOOST_TEST(c.responses.size() == 8u);
  BOOST_TEST(!c.read_error);
  BOOST_TEST(slow.empty());
  BOOST_TEST(server->connections() == 1u);
}

// A kept-alive connection waits for its next request under the idle bound;
// once that request's first bytes come, the header bound counts from them.
BOOST_AUTO_TEST_CASE(the_header_bound_of_a_kept_alive_request_counts_from_its_first_byte) {
  start(options().idle_timeout(30s).header_read_timeout(1s));
  client c(*this);
  c.send(raw_get("/hello"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 1; }));
  BOOST_REQUIRE(quiet());
  advance(20s);
  run_ready();
  BOOST_TEST(server->connections() == 1u, "closed within its idle bound");
  c.send("GET /hello HTTP/1.1\r\nHo");
  c.read(*this);
  BOOST_REQUIRE(quiet());
  const time_point first_byte = clock.now();
  advance(999ms);
  run_ready();
  BOOST_TEST(c.reads == 1, "not cut before its bound");
  BOOST_TEST(slow.empty());
  BOOST_TEST(server->connections() == 1u);
  advance(first_byte + 1s + 100ms - clock.now());
  BOOST_REQUIRE(drive([&] { return c.reads == 2; }));
  BOOST_TEST(c.closed());
  BOOST_TEST(slow == (std::vector<rhttp::client_phase>{rhttp::client_phase::header}), boost::test_tools::per_element());
}

// The sweep holds work on the io_context only while connections are open:
// once the last one ends its wait is cancelled, and after a drain run()
// returns, and so does io_context::run().
BOOST_AUTO_TEST_CASE(the_sweep_stops_with_the_last_connection_and_io_context_run_returns) {
  start(options());
  for (int round = 0; round < 2; ++round) {  // and starts again with the next connection
    client c(*this);
    c.send(raw_get("/hello"));
    c.read(*this);
    BOOST_REQUIRE(drive([&] { return c.reads == 1; }));
    BOOST_TEST(clock.pending() == 1u, "the sweep is armed");
    c.socket.close();
    BOOST_REQUIRE(drive([&] { return server->connections() == 0u; }));
    BOOST_REQUIRE(drive([&] { return clock.pending() == 0u; }));
  }
  server->drain();
  BOOST_REQUIRE(drive([&] { return run_done.done(); }));
  BOOST_TEST(!run_done.exception);
  io->restart();
  io->run_for(std::chrono::seconds(5));
  BOOST_TEST(io->stopped(), "io_context::run() returned: nothing holds work");
}

BOOST_AUTO_TEST_CASE(an_oversized_header_answers_431_and_closes) {
  start(options().max_header_bytes(256));
  client c(*this);
  c.send(raw_get("/hello", "X-Big: " + std::string(1000, 'x') + "\r\n"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 1; }));
  BOOST_REQUIRE_EQUAL(c.responses.size(), 1u);
  BOOST_TEST(c.responses[0].result_int() == 431u);
  BOOST_TEST(!c.responses[0].keep_alive());
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 2; }));
  BOOST_TEST(c.closed());
  BOOST_TEST(calls == 0);
  BOOST_TEST(finished == (std::vector<unsigned>{431}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(an_oversized_body_answers_413_by_length_or_as_it_arrives) {
  start(options().max_body_bytes(16));
  client declared(*this);
  declared.send("POST /hello HTTP/1.1\r\nHost: test\r\nContent-Length: 100\r\n\r\n");
  declared.read(*this);
  BOOST_REQUIRE(drive([&] { return declared.reads == 1; }));
  BOOST_TEST(declared.responses.at(0).result_int() == 413u);

  client chunked(*this);
  chunked.send("POST /hello HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n" +
               std::string(32, 'y') + "\r\n0\r\n\r\n");
  chunked.read(*this);
  BOOST_REQUIRE(drive([&] { return chunked.reads == 1; }));
  BOOST_TEST(chunked.responses.at(0).result_int() == 413u);

  client fits(*this);
  fits.send("POST /hello HTTP/1.1\r\nHost: test\r\nContent-Length: 16\r\n\r\n" + std::string(16, 'z'));
  fits.read(*this);
  BOOST_REQUIRE(drive([&] { return fits.reads == 1; }));
  BOOST_TEST(fits.responses.at(0).result_int() == 200u);
  BOOST_TEST(calls == 1);
  BOOST_TEST(finished == (std::vector<unsigned>{413, 413, 200}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_malformed_request_answers_400) {
  start(options());
  client c(*this);
  c.send("NOT HTTP AT ALL\r\n\r\n");
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 1; }));
  BOOST_TEST(c.responses.at(0).result_int() == 400u);
  BOOST_TEST(c.responses.at(0).body() == "400 Bad Request\n");
  BOOST_TEST(finished == (std::vector<unsigned>{400}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(problem_details_answer_with_rfc_9457_json) {
  start(options().problem_details(true));
  client c(*this);
  c.send(raw_get("/throw"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 1; }));
  BOOST_TEST(c.responses.at(0).result_int() == 500u);
  BOOST_TEST(c.responses.at(0)[bhttp::field::content_type] == "application/problem+json");
  BOOST_TEST(c.responses.at(0).body() == "{\"title\":\"Internal Server Error\",\"status\":500}\n");
  client big(*this);
  big.send("POST /hello HTTP/1.1\r\nHost: test\r\nContent-Length: 100000000\r\n\r\n");
  big.read(*this);
  BOOST_REQUIRE(drive([&] { return big.reads == 1; }));
  BOOST_TEST(big.responses.at(0).result_int() == 413u);
  BOOST_TEST(big.responses.at(0)[bhttp::field::content_type] == "application/problem+json");
}

// A connection that never sends a byte (a browser's preconnect, a check of
// the port) is closed at the header bound like a slow one, but it is not
// counted as one: it never began a request.
BOOST_AUTO_TEST_CASE(a_connection_that_never_sends_a_byte_is_closed_but_not_counted_slow) {
  start(options().header_read_timeout(2s));
  client silent(*this), loris(*this);
  loris.send("GET /hello HTTP/1.1\r\nHo");
  silent.read(*this);
  loris.read(*this);
  BOOST_REQUIRE(drive([&] { return server->connections() == 2u; }));
  BOOST_REQUIRE(quiet());
  advance(2s);
  BOOST_REQUIRE(drive([&] { return silent.reads == 1 && loris.reads == 1; }));
  BOOST_TEST(silent.closed());
  BOOST_TEST(loris.closed());
  BOOST_TEST(slow == (std::vector<rhttp::client_phase>{rhttp::client_phase::header}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(drain_lets_requests_in_progress_finish_and_refuses_new_connections) {
  start(options().drain_grace(5s));
  client busy(*this), idle(*this);
  idle.send(raw_get("/hello"));
  idle.read(*this);
  BOOST_REQUIRE(drive([&] { return idle.reads == 1; }));
  busy.send(raw_get("/gate"));
  busy.read(*this);
  BOOST_REQUIRE(drive([&] { return calls == 2; }));

  server->drain();
  idle.read(*this);
  BOOST_REQUIRE(drive([&] { return idle.reads == 2; }));
  BOOST_TEST(idle.closed(), "an idle connection is closed at once");
  tcp::socket late(*io);
  error_code refused;
  late.connect(endpoint(), refused);
  BOOST_TEST(refused == asio::error::connection_refused);
  BOOST_TEST(!run_done.done());

  advance(4s);
  open_gate();
  BOOST_REQUIRE(drive([&] { return busy.reads == 1; }));
  BOOST_TEST(busy.responses.at(0).result_int() == 200u);
  BOOST_TEST(!busy.responses.at(0).keep_alive(), "told that the connection closes");
  BOOST_REQUIRE(drive([&] { return run_done.done(); }));
  BOOST_TEST(!run_done.exception);
  BOOST_TEST(server->connections() == 0u);
  BOOST_TEST(live::ops == 0);
}

BOOST_AUTO_TEST_CASE(drain_cancels_what_is_left_after_the_grace) {
  start(options().drain_grace(5s));
  client held(*this);
  held.send(raw_get("/downstream"));
  held.read(*this);
  BOOST_REQUIRE(drive([&] { return calls == 1; }));
  server->drain();
  advance(4999ms);
  run_ready();
  BOOST_TEST(downstream.empty());
  BOOST_TEST(!run_done.done());
  BOOST_TEST(server->in_flight() == 1u);
  advance(1ms);
  BOOST_REQUIRE(drive([&] { return run_done.done(); }));
  BOOST_TEST(!run_done.exception);
  BOOST_REQUIRE_EQUAL(downstream.size(), 1u);
  BOOST_TEST(downstream[0] == asio::error::operation_aborted);
  BOOST_REQUIRE(drive([&] { return held.reads == 1; }));
  BOOST_TEST(held.closed(), "no answer: the request was cancelled");
  BOOST_TEST(live::ops == 0);
  BOOST_TEST(server->in_flight() == 0u);
  BOOST_TEST(finished == (std::vector<unsigned>{0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(after_the_grace_a_drain_closes_connections_stalled_in_any_phase) {
  start(options().drain_grace(2s));
  client loris(*this), body(*this), held(*this);
  loris.send("GET /hello HTTP/1.1\r\nHo");
  body.send("POST /hello HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\nab");
  held.send(raw_get("/downstream"));
  loris.read(*this);
  body.read(*this);
  held.read(*this);
  // The sweep is armed (it keeps the connections' bounds and the handler's
  // deadline, max_deadline), and the handler waits downstream.
  BOOST_REQUIRE(drive([&] { return calls == 1 && server->connections() == 3u && clock.pending() == 2u; }));
  server->drain();
  run_ready();
  BOOST_TEST(loris.reads + body.reads + held.reads == 0, "all three have their grace");
  BOOST_TEST(server->connections() == 3u);
  BOOST_TEST(downstream.empty());
  advance(2s);
  BOOST_REQUIRE(drive([&] { return run_done.done(); }));
  BOOST_REQUIRE(drive([&] { return loris.reads == 1 && body.reads == 1 && held.reads == 1; }));
  BOOST_TEST(loris.closed());
  BOOST_TEST(body.closed());
  BOOST_TEST(held.closed());
  BOOST_TEST(slow.empty(), "drained, not dropped as slow");
  BOOST_TEST(live::ops == 0);
  BOOST_TEST(server->connections() == 0u);
}

BOOST_AUTO_TEST_CASE(cancelling_run_drains_and_a_second_cancellation_ends_the_grace) {
  start(options().drain_grace(1h));
  client held(*this);
  held.send(raw_get("/downstream"));
  held.read(*this);
  BOOST_REQUIRE(drive([&] { return calls == 1; }));
  run_cancel.emit(asio::cancellation_type::terminal);
  BOOST_REQUIRE(drive([&] { return server->draining(); }));
  run_ready();
  BOOST_TEST(!run_done.done(), "the request in progress has its grace");
  BOOST_TEST(downstream.empty());
  BOOST_TEST(server->in_flight() == 1u);
  run_cancel.emit(asio::cancellation_type::terminal);
  BOOST_REQUIRE(drive([&] { return run_done.done(); }));
  BOOST_TEST(run_done.times == 1);
  BOOST_REQUIRE_EQUAL(downstream.size(), 1u);
  BOOST_TEST(downstream[0] == asio::error::operation_aborted);
  BOOST_TEST(live::ops == 0);
}

BOOST_AUTO_TEST_CASE(drain_before_any_connection_ends_run_at_once) {
  start(options());
  server->drain();
  BOOST_REQUIRE(drive([&] { return run_done.done(); }));
  BOOST_TEST(!run_done.exception);
  server->drain();  // again: nothing
}

BOOST_AUTO_TEST_CASE(drain_before_run_closes_the_acceptor_and_ends_run_at_once) {
  build(options());
  server->drain();
  run();
  BOOST_REQUIRE(drive([&] { return run_done.done(); }));
  BOOST_TEST(!run_done.exception);
  BOOST_TEST(!acceptor->is_open(), "a listening acceptor would queue connections nobody accepts");
  tcp::socket late(*io);
  error_code refused;
  late.connect(endpoint(), refused);
  BOOST_TEST(refused == asio::error::connection_refused);
  BOOST_TEST(calls == 0);
}

BOOST_AUTO_TEST_CASE(on_request_started_sees_each_request_before_its_handler) {
  std::vector<std::string> started;
  std::vector<int> handler_calls_then;
  start(options().on_request_started([&](const rhttp::server_request& r) {
    started.emplace_back(r.target());
    handler_calls_then.push_back(calls);
  }));
  client c(*this);
  c.send(raw_get("/hello"));
  c.send(raw_get("/hello?again"));
  c.read(*this);
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 2; }));
  BOOST_TEST(started == (std::vector<std::string>{"/hello", "/hello?again"}), boost::test_tools::per_element());
  BOOST_TEST(handler_calls_then == (std::vector<int>{0, 1}), boost::test_tools::per_element());
  BOOST_TEST(finished == (std::vector<unsigned>{200, 200}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_connection_over_max_connections_is_closed_as_soon_as_it_is_accepted) {
  start(options().max_connections(2));
  client a(*this), b(*this);
  BOOST_REQUIRE(drive([&] { return server->connections() == 2u; }));
  client over(*this);
  over.read(*this);
  BOOST_REQUIRE(drive([&] { return over.reads == 1; }));
  BOOST_TEST(over.closed());
  BOOST_TEST(over.responses.empty());
  BOOST_TEST(server->connections() == 2u);
  // The two within the limit are served; once one goes, a new one is too.
  a.send(raw_get("/hello"));
  a.read(*this);
  BOOST_REQUIRE(drive([&] { return a.reads == 1; }));
  BOOST_TEST(a.responses.at(0).result_int() == 200u);
  b.socket.close();
  BOOST_REQUIRE(drive([&] { return server->connections() == 1u; }));
  client next(*this);
  next.send(raw_get("/hello"));
  next.read(*this);
  BOOST_REQUIRE(drive([&] { return next.reads == 1; }));
  BOOST_TEST(next.responses.at(0).result_int() == 200u);
  BOOST_TEST(calls == 2);
}

// What a hook throws ends the connection it concerns (server.md), without
// an answer; the request's slot goes back, and the server goes on serving
// other connections. One case per hook.
BOOST_AUTO_TEST_CASE(on_request_started_throwing_ends_its_connection_before_the_handler) {
  throws_once hook;
  start(options().on_request_started([&](const rhttp::server_request&) { hook(); }));
  client c(*this);
  c.send(raw_get("/hello"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 1; }));
  BOOST_TEST(hook.thrown);
  BOOST_TEST(c.closed(), "closed without an answer");
  BOOST_TEST(c.responses.empty());
  BOOST_TEST(calls == 0);
  BOOST_TEST(drive([&] { return server->connections() == 0u; }));
  BOOST_TEST(server->in_flight() == 0u);
  BOOST_TEST(serves_a_new_connection(*this));
  BOOST_TEST(!run_done.done());
}

BOOST_AUTO_TEST_CASE(on_request_finished_throwing_ends_its_connection_unanswered) {
  throws_once hook;
  start(options().on_request_finished([&](const rhttp::request_finished&) { hook(); }));
  client c(*this);
  c.send(raw_get("/hello"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return c.reads == 1; }));
  BOOST_TEST(hook.thrown);
  BOOST_TEST(calls == 1);
  BOOST_TEST(c.closed(), "closed without an answer");
  BOOST_TEST(c.responses.empty());
  BOOST_TEST(drive([&] { return server->connections() == 0u; }));
  BOOST_TEST(server->in_flight() == 0u, "the slot was not given back");
  BOOST_TEST(serves_a_new_connection(*this));
  BOOST_TEST(!run_done.done());
}

BOOST_AUTO_TEST_CASE(on_shed_throwing_ends_the_shed_connection_and_not_the_others) {
  throws_once hook;
  start(options().max_concurrent(1).on_shed([&](std::uint32_t) { hook(); }));
  client busy(*this), turned_away(*this);
  busy.send(raw_get("/gate"));
  busy.read(*this);
  BOOST_REQUIRE(drive([&] { return calls == 1; }));
  turned_away.send(raw_get("/hello"));
  turned_away.read(*this);
  BOOST_REQUIRE(drive([&] { return turned_away.reads == 1; }));
  BOOST_TEST(hook.thrown);
  BOOST_TEST(turned_away.closed(), "closed without its 503");
  BOOST_TEST(turned_away.responses.empty());
  BOOST_TEST(server->in_flight() == 1u);
  open_gate();
  BOOST_REQUIRE(drive([&] { return busy.reads == 1; }));
  BOOST_TEST(busy.responses.at(0).result_int() == 200u);
  BOOST_TEST(server->in_flight() == 0u);
  BOOST_TEST(serves_a_new_connection(*this));
}

BOOST_AUTO_TEST_CASE(on_deadline_exceeded_throwing_ends_its_connection_without_the_504) {
  throws_once hook;
  start(options().on_deadline_exceeded([&](time_point) { hook(); }));
  client c(*this);
  const time_point sent_at = clock.now();
  c.send(raw_get("/downstream", "grpc-timeout: 100m\r\n"));
  c.read(*this);
  BOOST_REQUIRE(drive([&] { return calls == 1; }));
  BOOST_REQUIRE(armed(sent_at + 100ms));
  advance(100ms);
  BOOST_REQUIRE(drive([&] { return c.reads == 1; }));
  BOOST_TEST(hook.thrown);
  BOOST_TEST(c.closed(), "closed without its 504");
  BOOST_TEST(c.responses.empty());
  BOOST_REQUIRE_EQUAL(downstream.size(), 1u);
  BOOST_TEST(downstream[0] == asio::error::operation_aborted, "the handler was not cancelled");
  BOOST_TEST(live::ops == 0);
  BOOST_TEST(drive([&] { return server->connections() == 0u; }));
  BOOST_TEST(server->in_flight() == 0u, "the slot was not given back");
  BOOST_TEST(serves_a_new_connection(*this));
}

BOOST_AUTO_TEST_CASE(on_slow_client_throwing_still_drops_the_slow_client) {
  throws_once hook;
  start(options().header_read_timeout(1s).on_slow_client([&](rhttp::client_phase) { hook(); }));
  client loris(*this);
  const time_point connected_at = clock.now();
  loris.send("GET /hello HTTP/1.1\r\nHo");
  loris.read(*this);
  BOOST_REQUIRE(armed(connected_at + 1s));
  advance(1s);
  BOOST_REQUIRE(drive([&] { return loris.reads == 1; }));
  BOOST_TEST(hook.thrown);
  BOOST_TEST(loris.closed());
  BOOST_TEST(drive([&] { return server->connections() == 0u; }));
  BOOST_TEST(serves_a_new_connection(*this));
  BOOST_TEST(!run_done.done());
}

BOOST_AUTO_TEST_CASE(destroying_the_io_context_mid_call_frees_every_frame_and_slot) {
  start(options().max_concurrent(8));
  client gated(*this), waiting(*this), loris(*this);
  gated.send(raw_get("/gate"));
  waiting.send(raw_get("/downstream", "grpc-timeout: 1S\r\n"));
  loris.send("GET /hel");
  BOOST_REQUIRE(drive([&] { return calls == 2; }));
  BOOST_TEST(live::ops == 2);
  BOOST_TEST(server->in_flight() == 2u);
  gated.socket.close();
  waiting.socket.close();
  loris.socket.close();
  gate.reset();
  acceptor.reset();
  io.reset();
  BOOST_TEST(live::ops == 0, "handler frames left after the context was destroyed");
  BOOST_TEST(server->in_flight() == 0u, "slots left taken");
  BOOST_TEST(!run_done.done(), "handlers are destroyed uncalled");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(http_server_options)

BOOST_AUTO_TEST_CASE(bad_values_are_refused_naming_the_field) {
  using rhttp::server_options;
  const auto refused = [](auto make, const std::string& field) {
    try {
      make();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what()).find(field) != std::string::npos;
    }
    return false;
  };
  BOOST_TEST(refused([] { return server_options{}.max_concurrent(0); }, "max_concurrent"));
  BOOST_TEST(refused([] { return server_options{}.max_concurrent(0x80000000u); }, "max_concurrent"));
  BOOST_TEST(refused([] { return server_options{}.retry_after(std::chrono::seconds(-1)); }, "retry_after"));
  BOOST_TEST(refused([] { return server_options{}.max_deadline(0s); }, "max_deadline"));
  BOOST_TEST(refused([] { return server_options{}.header_read_timeout(0s); }, "header_read_timeout"));
  BOOST_TEST(refused([] { return server_options{}.body_read_timeout(-1s); }, "body_read_timeout"));
  BOOST_TEST(refused([] { return server_options{}.write_timeout(0s); }, "write_timeout"));
  BOOST_TEST(refused([] { return server_options{}.idle_timeout(0s); }, "idle_timeout"));
  BOOST_TEST(refused([] { return server_options{}.max_header_bytes(0); }, "max_header_bytes"));
  BOOST_TEST(refused([] { return server_options{}.max_header_bytes(std::uint64_t{1} << 32); }, "max_header_bytes"));
  BOOST_TEST(refused([] { return server_options{}.max_connections(0); }, "max_connections"));
  BOOST_TEST(refused([] { return server_options{}.drain_grace(-1s); }, "drain_grace"));

  const auto o = server_options{}.retry_after(std::chrono::seconds(0)).drain_grace(0s).max_body_bytes(0)
                     .max_deadline(duration::max());
  BOOST_TEST(o.retry_after().count() == 0);
  BOOST_TEST(o.max_body_bytes() == 0u);
  BOOST_TEST(server_options{}.max_concurrent() == 100u);
  BOOST_TEST(server_options{}.inbound_deadline().is_grpc_timeout());
  BOOST_TEST((o.max_deadline() == duration::max()), "no cap, when asked for");
  BOOST_TEST((server_options{}.max_deadline() == 30s), "a handler is bounded by default");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(http_metrics_page)

BOOST_AUTO_TEST_CASE(the_page_is_served_at_its_path_and_everything_else_goes_to_the_handler) {
  resilience::metrics telemetry;
  const auto failed = resilience::outcome<int>::from_error(asio::error::connection_reset);
  telemetry.events("backend").on_event(resilience::detail::event_about(resilience::event_kind::retry, failed, 1));
  int handled = 0;
  const auto page = rhttp::with_metrics_page(
      telemetry, "/internal/metrics",
      [&](rhttp::server_request req, const context&) -> asio::awaitable<response> {
        ++handled;
        response res{bhttp::status::not_found, req.version()};
        co_return res;
      });
  asio::io_context io;
  const auto ask = [&](bhttp::verb v, const char* target) {
    completion<response> done;
    spawn(io, page(rhttp::server_request{v, target, 11}, context{}), done);
    io.restart();
    io.run();
    BOOST_REQUIRE(done.value);
    return *done.value;
  };
  const response got = ask(bhttp::verb::get, "/internal/metrics?name=x");
  BOOST_TEST(got.result_int() == 200u);
  BOOST_TEST(got[bhttp::field::content_type] == resilience::prometheus_content_type);
  BOOST_TEST(got.body() == resilience::prometheus_text(telemetry));
  BOOST_TEST(got.body().find("resilience_strategy_events_total") != std::string::npos, got.body());
  const response head = ask(bhttp::verb::head, "/internal/metrics");
  BOOST_TEST(head.result_int() == 200u);
  BOOST_TEST(head.body().empty());
  BOOST_TEST(handled == 0);
  BOOST_TEST(ask(bhttp::verb::get, "/internal/metrics/more").result_int() == 404u);
  BOOST_TEST(ask(bhttp::verb::post, "/internal/metrics").result_int() == 404u);
  BOOST_TEST(ask(bhttp::verb::get, "/").result_int() == 404u);
  BOOST_TEST(handled == 3);
}

BOOST_AUTO_TEST_CASE(a_bad_path_is_refused) {
  resilience::metrics telemetry;
  const auto handler = [](rhttp::server_request, const context&) -> asio::awaitable<response> { co_return response{}; };
  BOOST_CHECK_THROW(rhttp::with_metrics_page(telemetry, "", handler), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::with_metrics_page(telemetry, "metrics", handler), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::with_metrics_page(telemetry, "/metrics?x", handler), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
