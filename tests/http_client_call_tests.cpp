// The HTTP client's calls as their caller sees them: cancelled, inside the
// caller's context (its deadline, its properties), refused by a host's
// breaker, reported, and freed. Against small Beast servers on 127.0.0.1, on
// a manual clock; no assertion depends on how long anything took. (The rest
// of client.hpp's tests are in http_client_tests.cpp: in one file they took
// 1.3 GB to compile at -O2.)
#include "http_client_support.hpp"

#include <boost/asio/deferred.hpp>
#include <boost/asio/use_future.hpp>

#include <future>
#include <optional>
#include <set>
#include <utility>

BOOST_AUTO_TEST_SUITE(http_client_calls)

BOOST_AUTO_TEST_CASE(cancelled_while_reading_ends_aborted_and_closes_the_connection) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::hang} : step{}; };
  client_t c(quick(), clock);
  completion<result_t> done;
  asio::cancellation_signal cancel;
  spawn(io, call(c, srv.at(), get()), done, &cancel);
  BOOST_REQUIRE(run_until(io, [&] { return srv.requests == 1; }));
  cancel.emit(asio::cancellation_type::terminal);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST((error_of(done) == asio::error::operation_aborted));
  BOOST_TEST(c.pool().open_connections(srv.at()) == 0u);
  BOOST_TEST(srv.requests == 1);  // not retried
}

// async_request: the same call through any completion token, with the
// cancellation a coroutine caller has.
BOOST_AUTO_TEST_CASE(async_request_completes_through_any_completion_token) {
  using response = bhttp::response<bhttp::string_body>;
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 2 ? step{step::respond, 404} : n == 5 ? step{step::hang} : step{}; };
  client_t c(quick(), clock);

  std::optional<std::pair<error_code, unsigned>> called;  // a callback
  c.async_request(io.get_executor(), srv.at(), get(),
                  [&](error_code ec, response res) { called.emplace(ec, res.result_int()); });
  BOOST_REQUIRE(run_until(io, [&] { return called.has_value(); }));
  BOOST_TEST(!called->first);
  BOOST_TEST(called->second == 200u);

  std::future<response> future = c.async_request(io.get_executor(), srv.at(), get(), asio::use_future);
  BOOST_REQUIRE(run_until(io, [&] { return future.wait_for(0s) == std::future_status::ready; }));
  BOOST_TEST(future.get().result_int() == 404u, "a final response of any status is the result");

  auto later = c.async_request(io.get_executor(), srv.at(), get(), asio::deferred);
  run_ready(io);
  BOOST_TEST(srv.requests == 2, "deferred: not sent until launched");
  std::optional<unsigned> launched;
  std::move(later)([&](error_code, response res) { launched = res.result_int(); });
  BOOST_REQUIRE(run_until(io, [&] { return launched.has_value(); }));
  BOOST_TEST(*launched == 200u);

  // Inside a coroutine, with the caller's context: its deadline bounds it.
  completion<response> awaited;
  resilience::context parent;
  parent.deadline = clock.now() + 10s;
  spawn(io, c.async_request(io.get_executor(), srv.at(), get(), parent, asio::use_awaitable), awaited);
  BOOST_REQUIRE(run_until(io, [&] { return awaited.done(); }));
  BOOST_REQUIRE(awaited.value);
  BOOST_TEST(awaited.value->result_int() == 200u);

  // Cancelled through the token's slot, while the server holds the answer.
  asio::cancellation_signal cancel;
  std::optional<error_code> cancelled;
  c.async_request(io.get_executor(), srv.at(), get(),
                  asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec, response) { cancelled = ec; }));
  BOOST_REQUIRE(run_until(io, [&] { return srv.requests == 5; }));
  cancel.emit(asio::cancellation_type::terminal);
  BOOST_REQUIRE(run_until(io, [&] { return cancelled.has_value(); }));
  BOOST_TEST((*cancelled == asio::error::operation_aborted));
  BOOST_TEST(srv.requests == 5, "not retried");
}

BOOST_AUTO_TEST_CASE(cancelled_while_waiting_to_retry_ends_aborted) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int) { return step{step::respond, 503, {{"Retry-After", "10"}}}; };
  int retries = 0;
  client_t c(quick().on_retry([&](const rhttp::client_retry_event&) { ++retries; }), clock);
  completion<result_t> done;
  asio::cancellation_signal cancel;
  spawn(io, call(c, srv.at(), get()), done, &cancel);
  BOOST_REQUIRE(run_until(io, [&] { return retries == 1 && clock.pending() == 1; }));
  cancel.emit(asio::cancellation_type::terminal);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST((error_of(done) == asio::error::operation_aborted));
  BOOST_TEST(clock.pending() == 0u);
  BOOST_TEST(c.pool().idle_connections(srv.at()) == 1u);  // the 503's exchange was complete: kept
}

// What the default breaker does, as a newcomer would meet it: an upstream
// failing 30% of its attempts (every third request a 503, Retry-After-less)
// and one failing all of them, 300 calls, 100 ms of virtual time apart.
struct against_upstream {
  int succeeded = 0, refused = 0, requests = 0;
};
against_upstream run_against(int fail_every_n_of_10, rhttp::client_options options) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [fail_every_n_of_10](int n) {
    return (n * 7) % 10 < fail_every_n_of_10 ? step{step::respond, 503} : step{};  // spread over each ten
  };
  client_t c(options, clock);
  against_upstream seen;
  for (int i = 0; i < 300; ++i) {
    completion<result_t> done;
    spawn(io, call(c, srv.at(), get()), done);
    BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
    BOOST_REQUIRE(done.value);
    if (done.value->has_value() && (*done.value)->result_int() == 200u) ++seen.succeeded;
    if (done.value->has_error() && done.value->error() == resilience::error::circuit_open) ++seen.refused;
    clock.advance(100ms);
  }
  seen.requests = srv.requests;
  return seen;
}

BOOST_AUTO_TEST_CASE(the_default_breaker_rides_out_a_partial_failure_and_opens_on_a_dead_upstream) {
  // Backoff of 0, so that only the breaker decides; every other default kept.
  const auto defaults = rhttp::client_options::standard().backoff(resilience::backoff::constant(0ms).with_jitter(resilience::jitter::none));
  const against_upstream partial = run_against(3, defaults);
  BOOST_TEST(partial.refused == 0, "30% of attempts failing does not open it");
  BOOST_TEST(partial.succeeded >= 297, "the retries recover (almost) every call: " << partial.succeeded);

  // Polly's defaults open on the same upstream, and every call in the break fails.
  const against_upstream polly = run_against(
      3, defaults.breaker(resilience::breaker_options{}.failure_ratio(0.1).minimum_calls(100).time_window(30s)
                              .open_duration(5s)));
  BOOST_TEST(polly.refused > 0);
  BOOST_TEST(polly.succeeded < partial.succeeded);

  // A dead upstream: the default opens after 20 failed attempts in its window,
  // and from then on most calls are refused without a request.
  const against_upstream dead = run_against(10, defaults);
  BOOST_TEST(dead.succeeded == 0);
  BOOST_TEST(dead.refused > 200, dead.refused);
  BOOST_TEST(dead.requests < 200, dead.requests);
}

BOOST_AUTO_TEST_CASE(the_breaker_of_a_host_opens_and_rejects_without_connecting) {
  asio::io_context io;
  manual_clock clock;
  server failing(io), healthy(io);
  failing.script = [](int) { return step{step::respond, 500, {}, true}; };
  client_t c(quick().max_retries(0).breaker(resilience::breaker_options{}.consecutive_failures(2).open_duration(30s)),
             clock);
  for (int i = 0; i < 2; ++i) {
    completion<result_t> done;
    spawn(io, call(c, failing.at(), get()), done);
    BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
    BOOST_TEST(status_of(done) == 500u);
  }
  completion<result_t> rejected;
  spawn(io, call(c, failing.at(), get()), rejected);
  BOOST_REQUIRE(run_until(io, [&] { return rejected.done(); }));
  BOOST_TEST((error_of(rejected) == resilience::error::circuit_open));
  BOOST_TEST(failing.accepted == 2);  // rejected without connecting
  BOOST_TEST(failing.requests == 2);

  completion<result_t> other;  // another host has its own breaker
  spawn(io, call(c, healthy.at(), get()), other);
  BOOST_REQUIRE(run_until(io, [&] { return other.done(); }));
  BOOST_TEST(status_of(other) == 200u);
}

asio::awaitable<result_t> call_within(client_t& c, rhttp::endpoint to, bhttp::request<bhttp::empty_body> req,
                                      resilience::context parent) {
  co_return co_await c.request(std::move(to), std::move(req), parent);
}

// The caller's context bounds the call with its deadline and lends it its
// properties, with no copying by hand.
BOOST_AUTO_TEST_CASE(the_callers_context_bounds_the_call_and_receives_its_marks) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int) { return step{step::hold}; };
  client_t c(quick(), clock);
  resilience::properties props;
  resilience::context parent = resilience::context{}.with(props);
  parent.deadline = clock.now() + 250ms;
  completion<result_t> done;
  spawn(io, call_within(c, srv.at(), get(), parent), done);
  BOOST_REQUIRE(run_until(io, [&] { return srv.requests == 1 && clock.pending() >= 1; }));
  BOOST_TEST((clock.next_expiry() == parent.deadline), "the attempt is bound by the caller's deadline");
  clock.advance(250ms);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST((error_of(done) == resilience::error::deadline_exceeded));
  BOOST_TEST(props.value_or(rhttp::request_may_have_been_sent, false), "the caller sees the call's marks");
  BOOST_TEST(srv.requests == 1, "no retry past the deadline");
}

// The caller knows what the client cannot: this POST carries its own
// deduplication, so the caller marks it idempotent in its properties.
BOOST_AUTO_TEST_CASE(a_post_its_caller_marked_idempotent_is_retried_once_sent) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int) { return step{step::reset}; };  // reads the request, then resets
  client_t c(quick(), clock);
  resilience::properties props;
  props.set(rhttp::idempotent, true);
  completion<result_t> done;
  spawn(io, c.request(srv.at(), post("{}"), resilience::context{}.with(props)), done);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST(error_of(done).failed());
  BOOST_TEST(srv.requests == 1 + 3, "the first attempt and 3 retries");

  // request_options::idempotent(false), given for this call, wins.
  completion<result_t> told;
  spawn(io, c.request(srv.at(), post("{}"), resilience::context{}.with(props), rhttp::request_options{}.idempotent(false)),
        told);
  BOOST_REQUIRE(run_until(io, [&] { return told.done(); }));
  BOOST_TEST(srv.requests == 4 + 1);
}

// Cancelled by the caller well before its deadline: a stop, not a deadline.
BOOST_AUTO_TEST_CASE(a_callers_own_cancellation_under_its_context_stays_aborted) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int) { return step{step::hang}; };
  client_t c(quick(), clock);
  resilience::context parent;
  parent.deadline = clock.now() + 10s;
  completion<result_t> done;
  asio::cancellation_signal cancel;
  spawn(io, call_within(c, srv.at(), get(), parent), done, &cancel);
  BOOST_REQUIRE(run_until(io, [&] { return srv.requests == 1; }));
  cancel.emit(asio::cancellation_type::terminal);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST((error_of(done) == asio::error::operation_aborted));
  BOOST_TEST(srv.requests == 1);
}

// A gateway: a guarded handler passes its inbound deadline to an upstream
// call. When the deadline passes, the handler's bound cancels the call; the
// call reports the deadline (not a bare operation_aborted that reads as an
// upstream failure), and the client of the gateway gets 504.
BOOST_AUTO_TEST_CASE(an_upstream_call_cut_by_the_inbound_deadline_ends_deadline_exceeded) {
  asio::io_context io;
  manual_clock clock;
  server upstream(io);
  upstream.script = [](int) { return step{step::hold}; };
  client_t c(quick(), clock);
  std::vector<error_code> seen;
  int deadlines = 0;
  auto handler = [&](rhttp::server_request, const resilience::context& ctx)
      -> asio::awaitable<bhttp::response<bhttp::string_body>> {
    const auto r = co_await c.request(upstream.at(), get(), ctx);
    seen.push_back(r.has_error() ? r.error() : error_code{});
    bhttp::response<bhttp::string_body> res{r.has_error() ? bhttp::status::bad_gateway : bhttp::status::ok, 11};
    co_return res;
  };
  rhttp::guarded_handler guarded{handler, rhttp::server_options{}.on_deadline_exceeded([&](auto) { ++deadlines; }),
                                 clock};
  rhttp::server_request inbound{bhttp::verb::get, "/quote", 11};
  inbound.set("grpc-timeout", "100m");
  completion<bhttp::response<bhttp::string_body>> done;
  spawn(io, guarded(std::move(inbound)), done);
  BOOST_REQUIRE(run_until(io, [&] { return upstream.requests == 1; }));
  clock.advance(100ms);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_REQUIRE(done.value);
  BOOST_TEST(done.value->result_int() == 504u);
  BOOST_TEST(deadlines == 1);
  BOOST_REQUIRE_EQUAL(seen.size(), 1u);
  BOOST_TEST((seen[0] == resilience::error::deadline_exceeded), seen[0].message());
}

// Worker loops calling a host whose breaker is open are refused without
// I/O; each refusal still gives the io_context a turn, so the timer that
// ends the loops fires while they run (before, they spun until done).
BOOST_AUTO_TEST_CASE(loops_refused_by_an_open_breaker_leave_room_for_a_timer) {
  asio::io_context io;
  manual_clock clock;
  server failing(io);
  failing.script = [](int) { return step{step::respond, 500, {}, true}; };
  client_t c(quick().max_retries(0).breaker(resilience::breaker_options{}.consecutive_failures(1).open_duration(1h)),
             clock);
  completion<result_t> first;
  spawn(io, call(c, failing.at(), get()), first);
  BOOST_REQUIRE(run_until(io, [&] { return first.done(); }));
  BOOST_REQUIRE(status_of(first) == 500u);

  constexpr int loops = 4, most = 2000;
  bool stop = false;
  int calls = 0, at_timer = -1, not_refused = 0, ended = 0;
  for (int i = 0; i < loops; ++i) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          for (int n = 0; n < most && !stop; ++n) {
            ++calls;
            const auto r = co_await c.request(failing.at(), get());
            if (!r.has_error() || r.error() != resilience::error::circuit_open) ++not_refused;
          }
          ++ended;
        },
        asio::detached);
  }
  asio::steady_timer timer(io, 0ms);
  timer.async_wait([&](error_code) {
    at_timer = calls;
    stop = true;
  });
  BOOST_REQUIRE(run_until(io, [&] { return ended == loops; }));
  BOOST_TEST(at_timer >= 0);
  BOOST_TEST(at_timer < most);
  BOOST_TEST(not_refused == 0);
  BOOST_TEST(failing.requests == 1);
}

BOOST_AUTO_TEST_CASE(reports_each_calls_attempts_and_which_waits_were_the_servers) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) {
    if (n == 1) return step{step::respond, 503, {{"Retry-After", "2"}}};
    if (n == 2) return step{step::respond, 500};
    if (n == 3) return step{};
    return step{step::respond, 500, {}, true};
  };
  std::vector<bool> server_waits;
  std::vector<rhttp::client_call_event> finished;
  client_t c(quick()
                 .breaker(resilience::breaker_options{}.consecutive_failures(4).open_duration(30s))
                 .on_retry([&](const rhttp::client_retry_event& e) { server_waits.push_back(e.retry_after); })
                 .on_call_finished([&](const rhttp::client_call_event& e) { finished.push_back(e); }),
             clock);
  completion<result_t> done;
  spawn(io, call(c, srv.at(), get()), done);
  BOOST_REQUIRE(run_until(io, [&] { return server_waits.size() == 1 && clock.pending() == 1; }));
  BOOST_TEST(finished.empty());  // reported as the call returns, not before
  clock.advance(2s);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST(status_of(done) == 200u);
  BOOST_TEST((server_waits == std::vector<bool>{true, false}));  // Retry-After, then the backoff
  BOOST_REQUIRE(finished.size() == 1u);
  BOOST_TEST(finished[0].attempts == 3u);
  BOOST_TEST(finished[0].status == 200u);
  BOOST_TEST(!finished[0].error);

  // Four 500s open the breaker: the next call makes no attempt at all.
  completion<result_t> failed, refused;
  spawn(io, call(c, srv.at(), get()), failed);
  BOOST_REQUIRE(run_until(io, [&] { return failed.done(); }));
  BOOST_TEST(status_of(failed) == 500u);
  BOOST_REQUIRE(finished.size() == 2u);
  BOOST_TEST(finished[1].attempts == 4u);
  BOOST_TEST(finished[1].status == 500u);
  spawn(io, call(c, srv.at(), get()), refused);
  BOOST_REQUIRE(run_until(io, [&] { return refused.done(); }));
  BOOST_TEST((error_of(refused) == resilience::error::circuit_open));
  BOOST_REQUIRE(finished.size() == 3u);
  BOOST_TEST(finished[2].attempts == 0u);
  BOOST_TEST((finished[2].error == resilience::error::circuit_open));
  BOOST_TEST(finished[2].status == 0u);
}

// RFC 9110 §10.2.3: a Retry-After says how long to wait before a follow-up
// request, not only a retry. A call that got one ends (no retries here); the
// next call to that host waits out the rest, another host's does not.
BOOST_AUTO_TEST_CASE(a_retry_after_holds_the_hosts_next_calls_until_then) {
  asio::io_context io;
  manual_clock clock;
  server srv(io), other(io);
  srv.script = [](int n) { return n == 1 ? step{step::respond, 429, {{"Retry-After", "5"}}} : step{}; };
  std::vector<rhttp::client_call_event> finished;
  client_t c(quick()
                 .max_retries(0)
                 .max_host_hold(5min)
                 .jitter_retry_after(false)
                 .on_call_finished([&](const rhttp::client_call_event& e) { finished.push_back(e); }),
             clock);
  completion<result_t> first, held, elsewhere;
  spawn(io, call(c, srv.at(), get()), first);
  BOOST_REQUIRE(run_until(io, [&] { return first.done(); }));
  BOOST_TEST(status_of(first) == 429u);

  clock.advance(1s);
  spawn(io, call(c, srv.at(), get()), held);
  spawn(io, call(c, other.at(), get()), elsewhere);
  BOOST_REQUIRE(run_until(io, [&] { return elsewhere.done() && clock.pending() == 1; }));
  BOOST_TEST(status_of(elsewhere) == 200u);
  BOOST_TEST((clock.next_expiry() == clock.now() + 4s), "the rest of the 5 s, no more (no spread here)");
  clock.advance(4s - 1ms);
  run_ready(io);
  BOOST_TEST(srv.requests == 1, "nothing sent before the Retry-After");
  BOOST_TEST(!held.done());
  BOOST_TEST((clock.next_expiry() == clock.now() + 1ms), "the held call no longer waits for the hold's end");
  clock.advance(1ms);
  BOOST_REQUIRE(run_until(io, [&] { return held.done(); }));
  BOOST_TEST(status_of(held) == 200u);
  BOOST_TEST(srv.requests == 2);
  BOOST_REQUIRE(finished.size() == 3u);
  BOOST_TEST((finished[2].held == 4s));
  BOOST_TEST((finished[2].elapsed == 4s));
  BOOST_TEST((finished[1].held == resilience::duration::zero()));
}

// A hold the call cannot wait out (longer than max_retry_after, or past its
// deadline) ends it at once, unsent; max_host_hold bounds how long a hold
// lasts.
BOOST_AUTO_TEST_CASE(a_hold_past_max_retry_after_or_the_deadline_ends_the_call_rate_limited_unsent) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) {
    if (n == 1) return step{step::respond, 503, {{"Retry-After", "3600"}}};
    if (n == 2) return step{step::respond, 429, {{"Retry-After", "5"}}};
    return step{};
  };
  std::vector<rhttp::client_call_event> finished;
  int retries = 0;
  client_t c(quick()
                 .max_retry_after(30s)
                 .max_host_hold(60s)
                 .on_retry([&](const rhttp::client_retry_event&) { ++retries; })
                 .on_call_finished([&](const rhttp::client_call_event& e) { finished.push_back(e); }),
             clock);
  completion<result_t> first, refused;
  spawn(io, call(c, srv.at(), get()), first);
  BOOST_REQUIRE(run_until(io, [&] { return first.done(); }));
  BOOST_TEST(status_of(first) == 503u, "an hour's Retry-After ends the call with its response");
  spawn(io, call(c, srv.at(), get()), refused);
  BOOST_REQUIRE(run_until(io, [&] { return refused.done(); }));
  BOOST_TEST((error_of(refused) == resilience::error::rate_limited), "held 60 s, past max_retry_after");
  BOOST_TEST(srv.requests == 1);
  BOOST_TEST(finished.back().attempts == 0u);
  BOOST_TEST(clock.pending() == 0u);

  clock.advance(60s);  // max_host_hold: then one call goes, and learns the next hold
  completion<result_t> asks_again, too_short;
  spawn(io, call(c, srv.at(), get()), asks_again);
  BOOST_REQUIRE(run_until(io, [&] { return retries == 1 && clock.pending() == 1; }));
  BOOST_TEST(srv.requests == 2, "its own retry waits the 5 s");
  spawn(io, call(c, srv.at(), get(), rhttp::request_options{}.deadline(clock.now() + 2s)), too_short);
  BOOST_REQUIRE(run_until(io, [&] { return too_short.done(); }));
  BOOST_TEST((error_of(too_short) == resilience::error::rate_limited), "5 s of hold, 2 s of deadline");
  clock.advance(5s);
  BOOST_REQUIRE(run_until(io, [&] { return asks_again.done(); }));
  BOOST_TEST(status_of(asks_again) == 200u);
  BOOST_TEST(srv.requests == 3);
}

// Twenty callers held by one Retry-After do not come back together: each
// waits the hold and a spread of up to the hold's length on top, never less
// than the hold.
BOOST_AUTO_TEST_CASE(held_callers_come_back_spread_above_the_hold) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::respond, 429, {{"Retry-After", "5"}}} : step{}; };
  std::vector<resilience::duration> held_for;
  client_t c(rhttp::client_options::standard().max_retries(0).max_host_hold(5min).on_call_finished(
                 [&](const rhttp::client_call_event& e) { held_for.push_back(e.held); }),
             clock);
  completion<result_t> first;
  spawn(io, call(c, srv.at(), get()), first);
  BOOST_REQUIRE(run_until(io, [&] { return first.done(); }));
  std::vector<completion<result_t>> held(20);
  for (auto& h : held) spawn(io, call(c, srv.at(), get()), h);
  BOOST_REQUIRE(run_until(io, [&] { return clock.pending() == held.size(); }));
  BOOST_TEST(srv.requests == 1);
  // Each held call's wait ends at an instant of its own: one at a time, each
  // to its end before the next instant comes.
  for (std::size_t woken = 1; woken <= held.size(); ++woken) {
    BOOST_REQUIRE(clock.next_expiry());
    clock.advance(*clock.next_expiry() - clock.now());
    BOOST_REQUIRE(run_until(io, [&] { return held_for.size() == 1 + woken; }));
  }
  BOOST_TEST(srv.requests == 21);
  const std::set<resilience::duration> waits(held_for.begin() + 1, held_for.end());
  BOOST_TEST((*waits.begin() >= 5s), "none sooner than the server asked");
  BOOST_TEST((*waits.rbegin() <= 10s), "at most the hold's length (5 s) later");
  BOOST_TEST(waits.size() == held.size(), "spread, not in lockstep");
}

// A call that passed the hold check before the 429 came, and was waiting
// for a connection (one per host here), is held too once it gets one: it
// gives the connection and its breaker permit back and waits as a new call
// would, or ends rate_limited, which the breaker does not count.
BOOST_AUTO_TEST_CASE(a_call_waiting_for_a_connection_when_the_429_comes_is_held_too) {
  for (const bool can_wait : {true, false}) {
    asio::io_context io;
    manual_clock clock;
    server srv(io);
    srv.script = [](int n) { return n == 1 ? step{step::hold, 429, {{"Retry-After", "5"}}} : step{}; };
    std::vector<rhttp::client_call_event> finished;
    client_t c(quick()
                   .max_retries(0)
                   .max_host_hold(5min)
                   .max_retry_after(can_wait ? 30s : 2s)
                   .jitter_retry_after(false)
                   .pool(rhttp::connection_pool_options{}.max_connections_per_host(1))
                   .on_call_finished([&](const rhttp::client_call_event& e) { finished.push_back(e); }),
               clock);
    completion<result_t> first, waiting;
    spawn(io, call(c, srv.at(), get()), first);
    BOOST_REQUIRE(run_until(io, [&] { return srv.requests == 1; }));
    spawn(io, call(c, srv.at(), get()), waiting);
    run_ready(io);
    BOOST_TEST(!waiting.done());
    BOOST_TEST(c.pool().open_connections(srv.at()) == 1u, "it did not wait for the one connection");
    srv.open_gate();  // the 429 comes; the connection is free
    BOOST_REQUIRE(run_until(io, [&] { return first.done(); }));
    BOOST_TEST(status_of(first) == 429u);
    if (can_wait) {
      run_ready(io);
      BOOST_TEST(srv.requests == 1, "not sent on the connection the 429 freed");
      BOOST_TEST(!waiting.done());
      BOOST_TEST((clock.next_expiry() == clock.now() + 5s), "the hold, outside the attempt's 10 s");
      clock.advance(5s);
      BOOST_REQUIRE(run_until(io, [&] { return waiting.done(); }));
      BOOST_TEST(status_of(waiting) == 200u);
      BOOST_TEST(srv.requests == 2);
      BOOST_TEST((finished.back().held == 5s));
    } else {
      BOOST_REQUIRE(run_until(io, [&] { return waiting.done(); }));
      BOOST_TEST((error_of(waiting) == resilience::error::rate_limited), "5 s of hold, 2 s of max_retry_after");
      BOOST_TEST(srv.requests == 1);
      BOOST_TEST(finished.back().attempts == 0u, "it gave its permit back unsent");
    }
    const auto m = c.breakers().breaker_for(srv.at().key())->metrics();
    BOOST_TEST(m.failures == 0u);
    BOOST_TEST(m.calls == (can_wait ? 2u : 1u), "the breaker judged what was sent, nothing else");
  }
}

BOOST_AUTO_TEST_CASE(a_call_cancelled_while_held_ends_aborted_unsent_and_by_default_nothing_is_held) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::respond, 429, {{"Retry-After", "5"}}} : step{}; };
  client_t c(quick().max_retries(0).max_host_hold(5min), clock);
  completion<result_t> first, held;
  spawn(io, call(c, srv.at(), get()), first);
  BOOST_REQUIRE(run_until(io, [&] { return first.done(); }));
  asio::cancellation_signal cancel;
  spawn(io, call(c, srv.at(), get()), held, &cancel);
  BOOST_REQUIRE(run_until(io, [&] { return clock.pending() == 1; }));
  cancel.emit(asio::cancellation_type::terminal);
  BOOST_REQUIRE(run_until(io, [&] { return held.done(); }));
  BOOST_TEST((error_of(held) == asio::error::operation_aborted));
  BOOST_TEST(clock.pending() == 0u);
  BOOST_TEST(srv.requests == 1);

  server fresh(io);
  fresh.script = srv.script;
  client_t unheld(quick().max_retries(0), clock);  // max_host_hold: 0 by default
  completion<result_t> a, b;
  spawn(io, call(unheld, fresh.at(), get()), a);
  BOOST_REQUIRE(run_until(io, [&] { return a.done(); }));
  spawn(io, call(unheld, fresh.at(), get()), b);
  BOOST_REQUIRE(run_until(io, [&] { return b.done(); }));
  BOOST_TEST(status_of(b) == 200u, "sent at once");
  BOOST_CHECK_THROW(rhttp::client_options{}.max_host_hold(-1s), std::invalid_argument);
}

// A host that keeps answering 429 (no Retry-After, so no hold) is sent a
// shrinking share of the calls: the others end throttled, unsent. Another
// host of the same client is not throttled.
BOOST_AUTO_TEST_CASE(an_adaptive_throttle_per_host_sheds_calls_a_host_keeps_refusing) {
  asio::io_context io;
  manual_clock clock;
  server refusing(io), healthy(io);
  refusing.script = [](int) { return step{step::respond, 429}; };
  std::vector<rhttp::client_call_event> finished;
  int throttled_events = 0;
  client_t c(quick()
                 .max_retries(0)
                 .adaptive_throttle(resilience::adaptive_throttle_options{}
                                        .k(2)
                                        .random(resilience::random_source::seeded(42))
                                        .on_throttled([&](const resilience::throttle_event&) { ++throttled_events; }))
                 .on_call_finished([&](const rhttp::client_call_event& e) { finished.push_back(e); }),
             clock);
  int throttled = 0;
  for (int i = 0; i < 200; ++i) {
    completion<result_t> done, fine;
    spawn(io, call(c, refusing.at(), get()), done);
    spawn(io, call(c, healthy.at(), get()), fine);
    BOOST_REQUIRE(run_until(io, [&] { return done.done() && fine.done(); }));
    BOOST_TEST(status_of(fine) == 200u);
    if (done.value->has_error()) {
      BOOST_TEST((done.value->error() == resilience::error::throttled));
      ++throttled;
    }
    clock.advance(100ms);
  }
  BOOST_TEST(refusing.requests + throttled == 200);
  BOOST_TEST(throttled > 150, "most calls to a host that accepts none are shed: " << throttled);
  BOOST_TEST(healthy.requests == 200, "the other host is not");
  BOOST_TEST(throttled_events == throttled);
  const auto unsent = std::count_if(finished.begin(), finished.end(), [](const rhttp::client_call_event& e) {
    return e.error == resilience::error::throttled && e.attempts == 0u;
  });
  BOOST_TEST(unsent == throttled);
}

// gRFC A6 keeps a retry throttle per server: a host that fails every call
// spends its own tokens, and another host's retries still go.
BOOST_AUTO_TEST_CASE(a_budget_per_host_spends_only_the_failing_hosts_retries) {
  asio::io_context io;
  manual_clock clock;
  server failing(io), flaky(io);
  failing.script = [](int) { return step{step::respond, 503}; };
  flaky.script = [](int n) { return n % 2 == 1 ? step{step::respond, 503} : step{}; };  // every first attempt fails
  int refusals = 0;
  client_t c(quick()
                 .breaker(resilience::breaker_options{}.consecutive_failures(1000))
                 .budget_per_host(rhttp::retry_token_budget_settings{10, 0.1})
                 .on_budget_refused([&](const resilience::budget_refusal&) { ++refusals; }),
             clock);
  for (int i = 0; i < 10; ++i) {
    completion<result_t> done;
    spawn(io, call(c, failing.at(), get()), done);
    BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
    BOOST_TEST(status_of(done) == 503u);
  }
  // 10 tokens, one taken per failure, retries while above 5: the first call
  // makes its 4 attempts (10 -> 6), and each call after it one.
  BOOST_TEST(failing.requests == 4 + 9);
  BOOST_TEST(refusals == 9);
  for (int i = 0; i < 3; ++i) {
    completion<result_t> done;
    spawn(io, call(c, flaky.at(), get()), done);
    BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
    BOOST_TEST(status_of(done) == 200u, "its own budget lets the retry go");
  }
  BOOST_TEST(flaky.requests == 6);
  BOOST_TEST(refusals == 9);
  BOOST_CHECK_THROW(rhttp::client_options{}.budget_per_host(rhttp::retry_token_budget_settings{0, 0.1}), std::invalid_argument);
}

// By default each host has a ratio budget (20% of the last 10 s's calls, at
// least 10 retries a second): against a host failing every call, retries
// add at most that to the load, where three retries a call would quadruple it.
BOOST_AUTO_TEST_CASE(by_default_retries_add_at_most_the_budget_to_the_load) {
  for (const bool budgeted : {true, false}) {
    asio::io_context io;
    manual_clock clock;
    server failing(io);
    failing.script = [](int) { return step{step::respond, 503}; };
    auto options = quick().breaker(resilience::breaker_options{}.no_failure_ratio().consecutive_failures(100000));
    if (!budgeted) options = options.no_retry_budget();
    client_t c(options, clock);
    constexpr int calls = 500;  // 100 a second for 5 s
    for (int i = 0; i < calls; ++i) {
      completion<result_t> done;
      spawn(io, call(c, failing.at(), get()), done);
      BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
      BOOST_TEST_REQUIRE(done.value->has_value(), i << ": " << done.value->error().message());
      BOOST_TEST(done.value->value().result_int() == 503u);
      clock.advance(10ms);
    }
    if (budgeted) {
      // 20% of the calls, plus the floor's 10 a second over the 10 s window.
      BOOST_TEST(failing.requests <= calls + calls / 5 + 100, failing.requests);
      BOOST_TEST(failing.requests > calls);
    } else {
      BOOST_TEST(failing.requests == 4 * calls);
    }
  }
}

BOOST_AUTO_TEST_CASE(frees_every_frame_when_the_io_context_is_destroyed_mid_call) {
  manual_clock clock;
  std::optional<asio::io_context> io(std::in_place);
  std::optional<server> srv(std::in_place, *io);
  srv->script = [](int n) { return n <= 2 ? step{step::hold} : step{}; };
  client_t c(quick().pool(rhttp::connection_pool_options{}.max_connections_per_host(2)), clock);
  completion<result_t> a, b, queued;
  spawn(*io, call(c, srv->at(), get()), a);
  spawn(*io, call(c, srv->at(), get()), b);
  BOOST_REQUIRE(run_until(*io, [&] { return srv->requests == 2; }));
  spawn(*io, call(c, srv->at(), get()), queued);  // waits for a connection
  run_ready(*io);
  BOOST_TEST(live::ops == 3);
  BOOST_TEST(c.pool().open_connections(srv->at()) == 2u);
  const auto at = srv->at();
  srv.reset();
  io.reset();
  BOOST_TEST(live::ops == 0);
  BOOST_TEST(!a.done());
  BOOST_TEST(!queued.done());
  BOOST_TEST(c.pool().open_connections(at) == 0u);  // every place given back
  BOOST_TEST(clock.pending() == 0u);
}

// The client's hooks must not throw (client.md). One that does ends its
// call: the exception reaches the caller in place of the result, and the
// call holds nothing after it (no connection in use, no pending timer); the
// client serves the next call on the same connection.
struct hook_thrown_at {
  bool throwing = true;
  void operator()() const {
    if (throwing) throw std::runtime_error("hook failed");
  }
};

void ends_with_the_hooks_exception_and_holds_nothing(asio::io_context& io, manual_clock& clock, server& srv,
                                                     client_t& c, hook_thrown_at& hook, int requests) {
  completion<result_t> done;
  spawn(io, call(c, srv.at(), get()), done);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST(done.times == 1);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), std::runtime_error,
                        [](const auto& e) { return std::string(e.what()) == "hook failed"; });
  BOOST_TEST(srv.requests == requests, "retried after the hook threw");
  BOOST_TEST(c.pool().open_connections(srv.at()) == c.pool().idle_connections(srv.at()), "a connection still in use");
  BOOST_TEST(clock.pending() == 0u);
  hook.throwing = false;
  completion<result_t> next;
  spawn(io, call(c, srv.at(), get()), next);
  BOOST_REQUIRE(run_until(io, [&] { return next.done(); }));
  BOOST_TEST(status_of(next) == 200u);
  BOOST_TEST(srv.accepted == 1);
}

BOOST_AUTO_TEST_CASE(an_on_retry_that_throws_ends_the_call_with_its_exception) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::respond, 503} : step{}; };
  hook_thrown_at hook;
  client_t c(quick().on_retry([&](const rhttp::client_retry_event&) { hook(); }), clock);
  ends_with_the_hooks_exception_and_holds_nothing(io, clock, srv, c, hook, 1);
}

BOOST_AUTO_TEST_CASE(an_on_call_finished_that_throws_ends_the_call_with_its_exception) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  hook_thrown_at hook;
  client_t c(quick().on_call_finished([&](const rhttp::client_call_event&) { hook(); }), clock);
  ends_with_the_hooks_exception_and_holds_nothing(io, clock, srv, c, hook, 1);
}

BOOST_AUTO_TEST_CASE(an_on_budget_refused_that_throws_ends_the_call_with_its_exception) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::respond, 503} : step{}; };
  // Two tokens, retries only above one: the first failure spends the budget.
  resilience::retry_token_budget budget{2, 0.1};
  hook_thrown_at hook;
  client_t c(quick().budget(budget).on_budget_refused([&](const resilience::budget_refusal&) { hook(); }), clock);
  ends_with_the_hooks_exception_and_holds_nothing(io, clock, srv, c, hook, 1);
}

// Interim responses (103 Early Hints, 100 Continue) precede the final one:
// the caller gets the final response, and the next request on the kept
// connection gets its own (the 200 used to be left for it).

BOOST_AUTO_TEST_SUITE_END()

// One sink hears the server and the upstream calls its handler makes under
// its context; a client with a sink of its own reports there instead.
BOOST_AUTO_TEST_CASE(a_handlers_upstream_calls_report_to_the_servers_sink_unless_the_client_has_one) {
  asio::io_context io;
  manual_clock clock;
  server upstream(io);
  upstream.script = [](int n) { return n % 2 == 1 ? step{step::respond, 503} : step{}; };  // 1-based
  recorded_events served, own;
  client_t plain(quick(), clock), labelled(quick().events(own), clock);
  client_t* upstream_client = &plain;
  auto handler = [&](rhttp::server_request, const resilience::context& ctx)
      -> asio::awaitable<bhttp::response<bhttp::string_body>> {
    const auto r = co_await upstream_client->request(upstream.at(), get(), ctx);
    co_return bhttp::response<bhttp::string_body>{r.has_error() ? bhttp::status::bad_gateway : r->result(), 11};
  };
  rhttp::guarded_handler guarded{handler, rhttp::server_options{}.events(served), clock};
  const auto ask = [&](rhttp::server_request req) {
    completion<bhttp::response<bhttp::string_body>> done;
    spawn(io, guarded(std::move(req)), done);
    BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
    BOOST_REQUIRE(done.value);
    return done.value->result_int();
  };
  BOOST_TEST(ask({bhttp::verb::get, "/quote", 11}) == 200u);
  BOOST_REQUIRE_EQUAL(served.seen.size(), 1u);
  BOOST_TEST((served.seen[0].kind == resilience::event_kind::retry));
  BOOST_TEST(served.seen[0].status == 503u, "the retried response's status");
  BOOST_TEST(served.hosts[0] == upstream.at().key(), "the endpoint the call went to");
  BOOST_TEST(served.seen[0].attempt == 1u);
  BOOST_TEST((served.seen[0].outcome == resilience::call_outcome::error));

  upstream_client = &labelled;
  BOOST_TEST(ask({bhttp::verb::get, "/quote", 11}) == 200u);
  BOOST_TEST(served.seen.size() == 1u, "the client's own sink wins");
  BOOST_REQUIRE_EQUAL(own.seen.size(), 1u);
  BOOST_TEST(own.seen[0].status == 503u);

  // The server's own refusal: a deadline header that does not parse.
  rhttp::server_request garbled{bhttp::verb::get, "/quote", 11};
  garbled.set("grpc-timeout", "soon");
  BOOST_TEST(ask(std::move(garbled)) == 400u);
  BOOST_REQUIRE_EQUAL(served.seen.size(), 2u);
  BOOST_TEST((served.seen[1].kind == resilience::event_kind::request_refused));
  BOOST_TEST(served.seen[1].status == 400u);
  BOOST_TEST(!served.seen[1].outcome);
}

// The inbound deadline passes while the handler's upstream call waits: the
// server answers 504 and reports it; the client's attempt, bound by that
// same deadline, leaves the report to the server. One deadline, one event.
BOOST_AUTO_TEST_CASE(an_inbound_deadline_that_cuts_an_upstream_call_is_reported_once) {
  asio::io_context io;
  manual_clock clock;
  server upstream(io);
  upstream.script = [](int) { return step{step::hold}; };
  recorded_events served;
  client_t c(quick(), clock);
  auto handler = [&](rhttp::server_request, const resilience::context& ctx)
      -> asio::awaitable<bhttp::response<bhttp::string_body>> {
    const auto r = co_await c.request(upstream.at(), get(), ctx);
    co_return bhttp::response<bhttp::string_body>{r.has_error() ? bhttp::status::bad_gateway : r->result(), 11};
  };
  rhttp::guarded_handler guarded{handler, rhttp::server_options{}.events(served), clock};
  rhttp::server_request req{bhttp::verb::get, "/quote", 11};
  req.set("grpc-timeout", "200m");
  completion<bhttp::response<bhttp::string_body>> done;
  spawn(io, guarded(std::move(req)), done);
  BOOST_REQUIRE(run_until(io, [&] { return upstream.requests == 1 && clock.pending() >= 1; }));
  clock.advance(200ms);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_REQUIRE(done.value);
  BOOST_TEST(done.value->result_int() == 504u);
  BOOST_REQUIRE_EQUAL(served.seen.size(), 1u);
  BOOST_TEST((served.seen[0].kind == resilience::event_kind::server_deadline_exceeded));
}

namespace {
// Cancels a call from inside the sink, on the event it waits for.
struct cancelling_events final : resilience::event_sink {
  resilience::event_kind on;
  asio::cancellation_signal* signal;
  int seen = 0;
  cancelling_events(resilience::event_kind k, asio::cancellation_signal* s) : on(k), signal(s) {}
  void on_event(const resilience::event& e) noexcept override {
    if (e.kind != on) return;
    ++seen;
    signal->emit(asio::cancellation_type::terminal);
  }
};
}  // namespace

// A refusal stays a refusal (an error in the result, never a throw) when what
// it reported to cancelled the caller, as the breaker stage's does.
BOOST_AUTO_TEST_CASE(a_refusal_whose_event_cancels_the_caller_still_ends_with_the_refusal) {
  asio::io_context io;
  manual_clock clock;
  server failing(io);
  failing.script = [](int) { return step{step::respond, 500, {}, true}; };
  asio::cancellation_signal cancel;
  cancelling_events sink{resilience::event_kind::circuit_rejected, &cancel};
  client_t c(quick()
                 .max_retries(0)
                 .breaker(resilience::breaker_options{}.consecutive_failures(1).open_duration(30s))
                 .events(sink),
             clock);
  completion<result_t> first;
  spawn(io, call(c, failing.at(), get()), first);
  BOOST_REQUIRE(run_until(io, [&] { return first.done(); }));
  completion<result_t> rejected;
  spawn(io, call(c, failing.at(), get()), rejected, &cancel);
  BOOST_REQUIRE(run_until(io, [&] { return rejected.done(); }));
  BOOST_TEST(sink.seen == 1);
  BOOST_TEST(!rejected.exception);
  BOOST_TEST((error_of(rejected) == resilience::error::circuit_open));
}
