// The client's connection pool (http/connection_pool.hpp) through the client:
// keep-alive reuse, a connection the server closed, idle expiry, the cap per
// host and its queue, and connections tied to their io_context. The same
// scripted servers and manual clock as http_client_tests.cpp.
#include "http_client_support.hpp"

#include <algorithm>

BOOST_AUTO_TEST_SUITE(http_client)

BOOST_AUTO_TEST_CASE(reuses_a_kept_alive_connection_until_the_server_says_close) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 3 ? step{step::respond, 200, {}, true} : step{}; };
  int opened = 0;
  std::vector<rhttp::close_reason> closed;
  client_t c(quick().pool(rhttp::connection_pool_options{}
                              .on_opened([&](std::string_view) { ++opened; })
                              .on_closed([&](std::string_view, rhttp::close_reason why) { closed.push_back(why); })),
             clock);
  for (int i = 1; i <= 4; ++i) {
    completion<result_t> done;
    spawn(io, call(c, srv.at(), get()), done);
    BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
    BOOST_TEST(status_of(done) == 200u);
  }
  BOOST_TEST(srv.requests == 4);
  BOOST_TEST(srv.accepted == 2);  // requests 1-3 on one, 4 on a new one after Connection: close
  BOOST_TEST(opened == 2);
  BOOST_REQUIRE(closed.size() == 1u);
  BOOST_TEST((closed[0] == rhttp::close_reason::not_reusable));
  BOOST_TEST(c.pool().idle_connections(srv.at()) == 1u);
}

// A client that records why it closes connections, and how many attempts
// its last call took.
struct recording_client {
  std::vector<rhttp::close_reason> closed;
  std::uint32_t attempts = 0;
  client_t client;
  explicit recording_client(manual_clock& clock)
      : client(quick()
                   .pool(rhttp::connection_pool_options{}.on_closed(
                       [this](std::string_view, rhttp::close_reason why) { closed.push_back(why); }))
                   .on_call_finished([this](const rhttp::client_call_event& e) { attempts = e.attempts; }),
               clock) {}
};

// A server ends a kept-alive connection after answering the first request
// (a FIN, after saying keep-alive); `second` is then sent. Returns what the
// second call's client reported: the connections it closed, its attempts,
// and the bytes the second request left on the closed connection.
struct after_a_closed_connection {
  unsigned status = 0;
  std::vector<rhttp::close_reason> closed;
  std::uint32_t attempts = 0;
  std::size_t bytes_left_on_the_closed_one = 0;
  int accepted = 0;
  int requests = 0;
};
template <class Req>
after_a_closed_connection send_after_the_server_closed_its_connection(Req second) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::respond, 200, {}, false, true} : step{}; };
  after_a_closed_connection seen;
  recording_client recorded(clock);
  client_t& c = recorded.client;
  completion<result_t> first;
  spawn(io, call(c, srv.at(), get()), first);
  BOOST_REQUIRE(run_until(io, [&] { return first.done(); }));
  BOOST_TEST(status_of(first) == 200u);
  BOOST_TEST(c.pool().idle_connections(srv.at()) == 1u);  // kept: the response said keep-alive
  BOOST_REQUIRE(run_until(io, [&] { return srv.held.size() == 1u && fin_acknowledged(srv.held[0]); }));
  completion<result_t> done;
  spawn(io, call(c, srv.at(), std::move(second)), done);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  seen.status = status_of(done);
  seen.closed = recorded.closed;
  seen.attempts = recorded.attempts;
  seen.bytes_left_on_the_closed_one = srv.held[0].available();
  seen.accepted = srv.accepted;
  seen.requests = srv.requests;
  const after_a_closed_connection now = seen;  // not what the client's end closes
  return now;
}

// A request that may not be sent twice (a POST without an Idempotency-Key)
// is never written to a connection the server closed: it is looked at first.
BOOST_AUTO_TEST_CASE(notices_a_server_that_closed_an_idle_connection_before_reusing_it) {
  const auto seen = send_after_the_server_closed_its_connection(post("{}"));
  BOOST_TEST(seen.status == 200u);
  BOOST_REQUIRE(seen.closed.size() == 1u);
  BOOST_TEST((seen.closed[0] == rhttp::close_reason::peer_closed));
  BOOST_TEST(seen.bytes_left_on_the_closed_one == 0u);  // found before a byte was written
  BOOST_TEST(seen.attempts == 1u);
  BOOST_TEST(seen.accepted == 2);
  BOOST_TEST(seen.requests == 2);  // none lost on the closed connection
}

// A GET takes the idle connection without looking (a syscall on every
// reuse); finding it closed as the answer should begin, it goes again on a
// new connection within the same attempt, unseen by the retry and breaker.
BOOST_AUTO_TEST_CASE(a_get_that_finds_its_connection_closed_is_sent_again_within_the_attempt) {
  const auto seen = send_after_the_server_closed_its_connection(get());
  BOOST_TEST(seen.status == 200u);
  BOOST_REQUIRE(seen.closed.size() == 1u);
  BOOST_TEST((seen.closed[0] == rhttp::close_reason::peer_closed));
  BOOST_TEST(seen.bytes_left_on_the_closed_one > 0u);  // written there first
  BOOST_TEST(seen.attempts == 1u);
  BOOST_TEST(seen.accepted == 2);
  BOOST_TEST(seen.requests == 2);
}

// A resend is one request more for the server: the retry budget bounds it
// as it bounds a retry. Refused, the closed connection's error is the
// attempt's outcome, and nothing more is sent.
BOOST_AUTO_TEST_CASE(a_get_is_not_sent_again_when_the_retry_budget_refuses) {
  struct refusing_budget {
    int asked = 0;
    void record(resilience::attempt_verdict, bool) noexcept {}
    bool try_retry() noexcept {
      ++asked;
      return false;
    }
  } budget;
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::respond, 200, {}, false, true} : step{}; };
  client_t c(quick().budget(budget), clock);
  completion<result_t> first;
  spawn(io, call(c, srv.at(), get()), first);
  BOOST_REQUIRE(run_until(io, [&] { return first.done(); }));
  BOOST_REQUIRE(run_until(io, [&] { return srv.held.size() == 1u && fin_acknowledged(srv.held[0]); }));
  completion<result_t> second;
  spawn(io, call(c, srv.at(), get()), second);
  BOOST_REQUIRE(run_until(io, [&] { return second.done(); }));
  BOOST_REQUIRE(second.value);
  BOOST_TEST(!second.value->has_value(), "the closed connection's error");
  BOOST_TEST(budget.asked == 2, "for the resend, then for the retry");
  BOOST_TEST(srv.accepted == 1);
  BOOST_TEST(srv.requests == 1);
}

// A server that says why it closes an idle connection (408) answered no
// request of ours: a GET that reads that answer goes once more.
BOOST_AUTO_TEST_CASE(a_408_on_an_idle_connection_is_no_answer_to_the_next_get) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) {
    return n == 1 ? step{.when_idle = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"}
                  : step{};
  };
  recording_client recorded(clock);
  client_t& c = recorded.client;
  const auto& closed = recorded.closed;
  const auto& attempts = recorded.attempts;
  completion<result_t> first;
  spawn(io, call(c, srv.at(), get()), first);
  BOOST_REQUIRE(run_until(io, [&] { return first.done(); }));
  BOOST_TEST(status_of(first) == 200u);
  srv.open_gate();
  BOOST_REQUIRE(run_until(io, [&] { return srv.held.size() == 1u && fin_acknowledged(srv.held[0]); }));
  completion<result_t> second;
  spawn(io, call(c, srv.at(), get()), second);
  BOOST_REQUIRE(run_until(io, [&] { return second.done(); }));
  BOOST_TEST(status_of(second) == 200u);
  BOOST_TEST(attempts == 1u);
  BOOST_REQUIRE(!closed.empty());
  BOOST_TEST((closed[0] == rhttp::close_reason::peer_closed));
  BOOST_TEST(srv.accepted == 2);
}

// An idempotent request is sent again once within an attempt, and that
// time on a connection looked at: a second closed one is found, not used.
BOOST_AUTO_TEST_CASE(a_get_is_sent_again_at_most_once_per_attempt) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  // Two calls at once open two connections; both say keep-alive, then end.
  srv.script = [](int n) { return n <= 2 ? step{step::hold, 200, {}, false, true} : step{}; };
  recording_client recorded(clock);
  client_t& c = recorded.client;
  const auto& closed = recorded.closed;
  const auto& attempts = recorded.attempts;
  completion<result_t> one, two;
  spawn(io, call(c, srv.at(), get()), one);
  spawn(io, call(c, srv.at(), get()), two);
  BOOST_REQUIRE(run_until(io, [&] { return srv.requests == 2; }));
  srv.open_gate();
  BOOST_REQUIRE(run_until(io, [&] {
    return one.done() && two.done() && srv.held.size() == 2u && fin_acknowledged(srv.held[0]) &&
           fin_acknowledged(srv.held[1]);
  }));
  BOOST_REQUIRE(c.pool().idle_connections(srv.at()) == 2u);
  completion<result_t> third;
  spawn(io, call(c, srv.at(), get()), third);
  BOOST_REQUIRE(run_until(io, [&] { return third.done(); }));
  BOOST_TEST(status_of(third) == 200u);
  BOOST_TEST(attempts == 1u);
  BOOST_TEST((closed == std::vector{rhttp::close_reason::peer_closed, rhttp::close_reason::peer_closed}));
  // Written to one closed connection only; the other was looked at first.
  BOOST_TEST((srv.held[0].available() > 0u) != (srv.held[1].available() > 0u));
  BOOST_TEST(srv.accepted == 3);
  BOOST_TEST(srv.requests == 3);
}

BOOST_AUTO_TEST_CASE(closes_connections_idle_past_the_idle_timeout) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  std::vector<rhttp::close_reason> closed;
  client_t c(quick().pool(rhttp::connection_pool_options{}.idle_timeout(5s).on_closed(
                 [&](std::string_view, rhttp::close_reason why) { closed.push_back(why); })),
             clock);
  completion<result_t> first;
  spawn(io, call(c, srv.at(), get()), first);
  BOOST_REQUIRE(run_until(io, [&] { return first.done(); }));
  clock.advance(4s);
  BOOST_TEST(c.pool().close_expired() == 0u);
  BOOST_TEST(c.pool().hosts() == 1u);
  clock.advance(1s);
  BOOST_TEST(c.pool().close_expired() == 1u);
  BOOST_REQUIRE(closed.size() == 1u);
  BOOST_TEST((closed[0] == rhttp::close_reason::idle_timeout));
  BOOST_TEST(c.pool().hosts() == 0u, "a host left with no connection is forgotten");
  completion<result_t> second;
  spawn(io, call(c, srv.at(), get()), second);
  BOOST_REQUIRE(run_until(io, [&] { return second.done(); }));
  BOOST_TEST(status_of(second) == 200u);
  BOOST_TEST(srv.accepted == 2);
}

BOOST_AUTO_TEST_CASE(a_call_to_one_host_closes_expired_connections_of_the_others) {
  asio::io_context io;
  manual_clock clock;
  server first(io), second(io);
  std::vector<std::string> closed;
  client_t c(quick().pool(rhttp::connection_pool_options{}.idle_timeout(10s).on_closed(
                 [&](std::string_view key, rhttp::close_reason) { closed.emplace_back(key); })),
             clock);
  auto call_to = [&](const server& s) {
    completion<result_t> done;
    spawn(io, call(c, s.at(), get()), done);
    BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
    BOOST_TEST(status_of(done) == 200u);
  };
  call_to(first);
  clock.advance(4s);
  call_to(second);  // the first host's connection is not yet expired
  BOOST_TEST(closed.empty());
  BOOST_TEST(c.pool().hosts() == 2u);
  clock.advance(7s);  // 11 s idle for the first, 7 s for the second
  call_to(second);
  BOOST_REQUIRE(closed.size() == 1u);
  BOOST_TEST(closed[0] == first.at().key());
  BOOST_TEST(c.pool().hosts() == 1u);
  BOOST_TEST(c.pool().idle_connections(second.at()) == 1u);
}

BOOST_AUTO_TEST_CASE(caps_connections_per_host_and_queues_callers) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::hold} : step{}; };
  client_t c(quick().pool(rhttp::connection_pool_options{}.max_connections_per_host(1)), clock);
  completion<result_t> first, second;
  spawn(io, call(c, srv.at(), get("/1")), first);
  spawn(io, call(c, srv.at(), get("/2")), second);
  BOOST_REQUIRE(run_until(io, [&] { return srv.requests == 1; }));
  run_ready(io);
  BOOST_TEST(c.pool().open_connections(srv.at()) == 1u, "the second caller opened a connection of its own");
  BOOST_TEST(srv.accepted == 1);
  BOOST_TEST(!second.done());
  srv.open_gate();
  BOOST_REQUIRE(run_until(io, [&] { return first.done() && second.done(); }));
  BOOST_TEST(status_of(first) == 200u);
  BOOST_TEST(status_of(second) == 200u);
  BOOST_TEST(srv.accepted == 1);  // the second took the first's connection
  BOOST_TEST(srv.seen[1].target() == "/2");
}

BOOST_AUTO_TEST_CASE(a_full_pool_fails_at_once_when_told_not_to_wait) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::hold} : step{}; };
  client_t c(quick().pool(rhttp::connection_pool_options{}.max_connections_per_host(1).wait_for_connection(false)),
             clock);
  completion<result_t> first, second;
  spawn(io, call(c, srv.at(), get()), first);
  BOOST_REQUIRE(run_until(io, [&] { return srv.requests == 1; }));
  spawn(io, call(c, srv.at(), get()), second);
  BOOST_REQUIRE(run_until(io, [&] { return second.done(); }));
  BOOST_TEST((error_of(second) == resilience::error::bulkhead_full));
  srv.open_gate();
  BOOST_REQUIRE(run_until(io, [&] { return first.done(); }));
  BOOST_TEST(status_of(first) == 200u);
}

BOOST_AUTO_TEST_CASE(a_call_that_waits_for_a_pooled_connection_reports_how_long) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::hold} : step{}; };
  recorded_events events{resilience::event_kind::pool_wait};
  client_t c(quick().max_retries(0).attempt_timeout(5s).events(events).pool(
                 rhttp::connection_pool_options{}.max_connections_per_host(1)),
             clock);
  completion<result_t> first, second;
  spawn(io, call(c, srv.at(), get("/1")), first);
  BOOST_REQUIRE(run_until(io, [&] { return srv.requests == 1; }));
  spawn(io, call(c, srv.at(), get("/2")), second);
  run_ready(io);
  clock.advance(2s);
  run_ready(io);
  BOOST_TEST(!second.done());
  BOOST_TEST(events.seen.empty(), "reported before the wait ended");
  srv.open_gate();
  BOOST_REQUIRE(run_until(io, [&] { return first.done() && second.done(); }));
  BOOST_TEST(status_of(first) == 200u);
  BOOST_TEST(status_of(second) == 200u);
  BOOST_REQUIRE(events.seen.size() == 1u);  // the first call took its connection at once: no event
  BOOST_TEST((events.seen[0].outcome == resilience::call_outcome::success));
  BOOST_TEST((events.seen[0].delay == 2s));
  BOOST_TEST(events.seen[0].attempt == 1u);
  BOOST_TEST(!events.seen[0].error);
}

BOOST_AUTO_TEST_CASE(an_attempt_whose_time_runs_out_waiting_for_a_pooled_connection_ends_with_pool_exhausted) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  recorded_events events{resilience::event_kind::pool_wait};
  client_t c(quick().max_retries(0).attempt_timeout(1s).events(events).pool(
                 rhttp::connection_pool_options{}.max_connections_per_host(1)),
             clock);
  // The one connection, held past the attempt's time as a slow call would hold it.
  std::optional<rhttp::connection_lease> held;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto lease = co_await c.pool().acquire(srv.at());
        if (lease) held.emplace(std::move(*lease));
      },
      asio::detached);
  BOOST_REQUIRE(run_until(io, [&] { return held.has_value(); }));
  completion<result_t> waiting;
  spawn(io, call(c, srv.at(), get()), waiting);
  run_ready(io);
  BOOST_TEST(!waiting.done());
  clock.advance(1s);
  BOOST_REQUIRE(run_until(io, [&] { return waiting.done(); }));
  BOOST_TEST((error_of(waiting) == resilience::error::pool_exhausted));
  BOOST_TEST(resilience::reached_no_server(error_of(waiting)));
  BOOST_TEST(srv.requests == 0);
  BOOST_REQUIRE(events.seen.size() == 1u);
  BOOST_TEST((events.seen[0].outcome == resilience::call_outcome::error));
  BOOST_TEST((events.seen[0].error == resilience::error::pool_exhausted));
  BOOST_TEST((events.seen[0].delay == 1s));
  held.reset();
  BOOST_TEST(c.pool().open_connections(srv.at()) == 0u);
}

namespace {
// Holds every request until `expected` have arrived: only a client that
// sends them all at once gets an answer to the first.
struct latch_handler {
  struct state {
    int expected;
    int arrived = 0;
    asio::steady_timer* gate = nullptr;  // never expires: cancelled to open
  };
  state* s;
  asio::awaitable<bhttp::response<bhttp::string_body>> operator()(rhttp::server_request req,
                                                                  const resilience::context&) const {
    state& st = *s;
    if (++st.arrived < st.expected)
      co_await st.gate->async_wait(asio::as_tuple(asio::use_awaitable));
    else
      st.gate->cancel();  // the last of the burst lets the others go; later ones pass
    bhttp::response<bhttp::string_body> res{bhttp::status::ok, req.version()};
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    co_return res;
  }
};

// Runs handlers until `done`, giving up once none has been ready for 3000
// turns in a row: a burst takes more turns than run_until's cap, and a
// client that stopped sending fails the test instead of hanging it.
template <class Pred>
bool run_while_busy(asio::io_context& io, Pred done) {
  for (int idle = 0; idle < 3000 && !done();) {
    if (io.stopped()) io.restart();
    idle = io.run_one_for(std::chrono::milliseconds(5)) == 0 ? idle + 1 : 0;
  }
  return done();
}
}  // namespace

// A service on the defaults whose handlers each call one upstream: the
// client keeps as many connections per host as the server admits requests,
// so a burst of that many never queues for a connection (it did at 10 per
// host: 90 of 100 waited, and a few stalled requests made the others time
// out in the pool). The connections a burst opened then close after
// idle_timeout, but the one still in use.
BOOST_AUTO_TEST_CASE(a_default_client_sends_a_burst_of_the_default_servers_concurrency_at_once) {
  manual_clock clock;
  latch_handler::state latch{static_cast<int>(rhttp::server_options{}.max_concurrent())};
  // Everything the calls' and the server's frames refer to goes before the
  // io_context, which destroys the frames left when a check fails.
  rhttp::server<latch_handler, manual_clock> upstream{latch_handler{&latch},
                                                      rhttp::server_options{}.idle_timeout(1h), clock};
  recorded_events events{resilience::event_kind::pool_wait};
  std::vector<rhttp::close_reason> closed;
  client_t c(quick().events(events).pool(rhttp::connection_pool_options{}.on_closed(
                 [&](std::string_view, rhttp::close_reason why) { closed.push_back(why); })),
             clock);
  BOOST_TEST(c.pool().options().max_connections_per_host() == rhttp::server_options{}.max_concurrent());
  std::vector<completion<result_t>> burst(static_cast<std::size_t>(latch.expected));
  completion<result_t> later[2];
  asio::io_context io;
  asio::steady_timer gate{io, asio::steady_timer::time_point::max()};
  latch.gate = &gate;
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  const auto to = rhttp::endpoint::http("127.0.0.1", acceptor.local_endpoint().port());
  asio::co_spawn(io, upstream.run(acceptor), asio::detached);

  for (auto& done : burst) spawn(io, call(c, to, get()), done);
  BOOST_REQUIRE(run_while_busy(io, [&] {
    return std::all_of(burst.begin(), burst.end(), [](const auto& d) { return d.done(); });
  }));
  for (const auto& done : burst) BOOST_TEST(status_of(done) == 200u);
  BOOST_TEST(latch.arrived == latch.expected);
  BOOST_TEST(events.seen.empty(), "no call waited for a connection");
  BOOST_TEST(c.pool().open_connections(to) == static_cast<std::uint32_t>(latch.expected));
  BOOST_TEST(closed.empty());

  // One call every 30 s keeps the most recently used connection; the others
  // close once they have idled for idle_timeout() (60 s).
  const auto one_call = [&](completion<result_t>& done) {
    spawn(io, call(c, to, get()), done);
    BOOST_REQUIRE(run_while_busy(io, [&] { return done.done(); }));
    BOOST_TEST(status_of(done) == 200u);
  };
  clock.advance(30s);
  one_call(later[0]);
  BOOST_TEST(closed.empty());
  clock.advance(30s);
  one_call(later[1]);
  BOOST_TEST(closed.size() == static_cast<std::size_t>(latch.expected - 1));
  BOOST_TEST(std::count(closed.begin(), closed.end(), rhttp::close_reason::idle_timeout) ==
             static_cast<std::ptrdiff_t>(closed.size()));
  BOOST_TEST(c.pool().open_connections(to) == 1u);
  BOOST_TEST(run_while_busy(io, [&] { return upstream.connections() == 1u; }), "the server saw them closed");
}

BOOST_AUTO_TEST_CASE(a_caller_cancelled_while_queued_leaves_the_queue) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::hold} : step{}; };
  client_t c(quick().pool(rhttp::connection_pool_options{}.max_connections_per_host(1)), clock);
  completion<result_t> first, second, third;
  asio::cancellation_signal cancel;
  spawn(io, call(c, srv.at(), get()), first);
  BOOST_REQUIRE(run_until(io, [&] { return srv.requests == 1; }));
  spawn(io, call(c, srv.at(), get()), second, &cancel);
  spawn(io, call(c, srv.at(), get()), third);
  run_ready(io);
  BOOST_REQUIRE(!second.done());
  BOOST_TEST(c.pool().open_connections(srv.at()) == 1u);
  cancel.emit(asio::cancellation_type::terminal);
  BOOST_REQUIRE(run_until(io, [&] { return second.done(); }));
  BOOST_TEST((error_of(second) == asio::error::operation_aborted));
  srv.open_gate();
  BOOST_REQUIRE(run_until(io, [&] { return first.done() && third.done(); }));
  BOOST_TEST(status_of(third) == 200u);
  BOOST_TEST(srv.requests == 2);
  BOOST_TEST(c.pool().open_connections(srv.at()) == 1u);
}

BOOST_AUTO_TEST_CASE(an_io_context_destroyed_before_the_client_takes_its_idle_connections_with_it) {
  manual_clock clock;
  std::vector<rhttp::close_reason> closed;
  client_t c(quick().pool(rhttp::connection_pool_options{}.on_closed(
                 [&](std::string_view, rhttp::close_reason why) { closed.push_back(why); })),
             clock);
  for (int round = 1; round <= 2; ++round) {  // a second context after the first is gone
    std::optional<asio::io_context> io(std::in_place);
    std::optional<server> srv(std::in_place, *io);
    const auto at = srv->at();
    completion<result_t> done;
    spawn(*io, call(c, at, get()), done);
    BOOST_REQUIRE(run_until(*io, [&] { return done.done(); }));
    BOOST_TEST(status_of(done) == 200u);
    BOOST_TEST(c.pool().idle_connections(at) == 1u);
    srv.reset();
    io.reset();  // before the client: its sockets must not outlive their reactor
    BOOST_TEST(c.pool().idle_connections(at) == 0u);
    BOOST_TEST(c.pool().open_connections(at) == 0u);
    BOOST_REQUIRE(closed.size() == static_cast<std::size_t>(round));
    BOOST_TEST((closed.back() == rhttp::close_reason::pool_closed));
  }
}

// A client shared by two io_contexts: a socket's operations complete on the
// context it was opened on, so a call on the other one must not be handed
// it (it waited on a reactor nobody ran). At the limit of one connection,
// the idle one of the other context makes room.
BOOST_AUTO_TEST_CASE(a_client_shared_by_two_contexts_reuses_only_connections_of_the_callers_context) {
  asio::io_context a, b;
  manual_clock clock;
  server srv(b);
  std::vector<rhttp::close_reason> closed;
  client_t c(quick().pool(rhttp::connection_pool_options{}.max_connections_per_host(1).on_closed(
                 [&](std::string_view, rhttp::close_reason why) { closed.push_back(why); })),
             clock);
  completion<result_t> on_a;
  spawn(a, call(c, srv.at(), get()), on_a);
  for (int i = 0; i < 3000 && !on_a.done(); ++i) {  // a calls, b serves
    if (a.stopped()) a.restart();
    a.poll();
    if (b.stopped()) b.restart();
    b.run_one_for(std::chrono::milliseconds(1));
  }
  BOOST_REQUIRE(on_a.done());
  BOOST_TEST(status_of(on_a) == 200u);
  BOOST_REQUIRE(c.pool().idle_connections(srv.at()) == 1u);

  for (int i = 1; i <= 2; ++i) {  // b alone: its own connection, opened once, then reused
    completion<result_t> on_b;
    spawn(b, call(c, srv.at(), get()), on_b);
    BOOST_REQUIRE(run_until(b, [&] { return on_b.done(); }));
    BOOST_TEST(status_of(on_b) == 200u);
  }
  BOOST_TEST(srv.accepted == 2);
  BOOST_REQUIRE(closed.size() == 1u);
  BOOST_TEST((closed[0] == rhttp::close_reason::other_context));
  BOOST_TEST(c.pool().idle_connections(srv.at()) == 1u);
  BOOST_TEST(!c.pool().try_reuse(srv.at(), a.get_executor()).has_value(), "a call on a would get b's connection");
}

// Bytes after a response were asked for by nobody: a connection holding
// them is not reused, or the next request would read them as its answer.
BOOST_AUTO_TEST_CASE(a_connection_with_bytes_after_its_response_is_not_reused) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{.after = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nSTALE"} : step{}; };
  client_t c(quick(), clock);
  two_gets_get_their_own_replies(io, c, srv);
  BOOST_TEST(srv.accepted == 2);
}

BOOST_AUTO_TEST_SUITE_END()
