// The HTTP client against small Beast servers on 127.0.0.1. Time is a manual
// clock: a timeout or a Retry-After passes only when a test advances it. The
// io_context is driven until a condition holds, with a cap on iterations; no
// assertion depends on how long anything took, and what must not happen is
// checked once every ready handler has run (run_ready).
#include "http_client_support.hpp"

BOOST_AUTO_TEST_SUITE(http_client)

BOOST_AUTO_TEST_CASE(retries_a_503_then_succeeds) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::respond, 503} : step{}; };
  int retries = 0;
  client_t c(quick().on_retry([&](const rhttp::client_retry_event& e) {
    ++retries;
    BOOST_TEST(e.status == 503u);
  }), clock);
  completion<result_t> done;
  spawn(io, call(c, srv.at(), get()), done);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST(status_of(done) == 200u);
  BOOST_TEST((*done.value)->body() == "reply 2");
  BOOST_TEST(retries == 1);
  BOOST_TEST(srv.accepted == 1);  // the 503's connection was kept and reused
}

BOOST_AUTO_TEST_CASE(honours_retry_after_on_the_manual_clock) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::respond, 503, {{"Retry-After", "3"}}} : step{}; };
  std::vector<resilience::duration> delays;
  client_t c(quick().on_retry([&](const rhttp::client_retry_event& e) { delays.push_back(e.delay); }), clock);
  completion<result_t> done;
  const auto start = clock.now();
  spawn(io, call(c, srv.at(), get()), done);
  // The retry waits on the clock: one timer, due exactly 3 s from now.
  BOOST_REQUIRE(run_until(io, [&] { return srv.requests == 1 && delays.size() == 1 && clock.pending() == 1; }));
  BOOST_TEST((delays[0] == 3s));
  BOOST_TEST((*clock.next_expiry() - clock.now() == 3s));
  clock.advance(3s - 1ms);
  run_ready(io);
  BOOST_TEST(!done.done());  // nothing moves until the time has passed
  BOOST_TEST(srv.requests == 1);
  BOOST_TEST(clock.pending() == 1u);
  clock.advance(1ms);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST(status_of(done) == 200u);
  BOOST_TEST(srv.requests == 2);
  BOOST_TEST((clock.now() - start == 3s));
}

// The default schedule (2 s first) under a 500 ms deadline: scaled to the
// time left, the retry fits; the Polly/Resilience4j rule gives up instead.
BOOST_AUTO_TEST_CASE(a_short_deadline_still_gets_its_retry_unless_fit_to_time_left_is_off) {
  for (const bool fit : {true, false}) {
    asio::io_context io;
    manual_clock clock;
    server srv(io);
    srv.script = [](int n) { return n == 1 ? step{step::respond, 503} : step{}; };
    std::vector<resilience::duration> delays;
    client_t c(rhttp::client_options::standard()
                   .jitter(resilience::jitter::none)
                   .fit_to_time_left(fit)
                   .on_retry([&](const rhttp::client_retry_event& e) { delays.push_back(e.delay); }),
               clock);
    completion<result_t> done;
    spawn(io, call(c, srv.at(), get(), rhttp::request_options{}.deadline(clock.now() + 500ms)), done);
    BOOST_REQUIRE(run_until(io, [&] { return done.done() || (srv.requests == 1 && clock.pending() > 0 && !delays.empty()); }));
    if (!fit) {
      BOOST_TEST(status_of(done) == 503u);  // a 2 s wait would end past the deadline
      BOOST_TEST(delays.empty());
      continue;
    }
    // 500 ms left for 3 retries: a share of at most 125 ms each.
    BOOST_REQUIRE(delays.size() == 1u);
    BOOST_TEST((delays[0] > 0ms && delays[0] <= 125ms));
    clock.advance(delays[0]);
    BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
    BOOST_TEST(status_of(done) == 200u);
    BOOST_TEST(srv.requests == 2);
  }
}

BOOST_AUTO_TEST_CASE(measures_an_http_date_retry_after_on_the_wall_clock_it_is_given) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);  // sends no Date header: the wall clock is the reference
  srv.script = [](int n) {
    return n == 1 ? step{step::respond, 503, {{"Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT"}}} : step{};
  };
  std::vector<resilience::duration> delays;
  // 07:27:53 on the day of that date.
  const auto seven_seconds_before = []() noexcept {
    return rhttp::wall_time(std::chrono::sys_days(std::chrono::year(2015) / 10 / 21) + 7h + 27min + 53s);
  };
  client_t c(quick()
                 .retry_after(rhttp::retry_after_delay{}.max_retry_after(10s).wall_clock(seven_seconds_before))
                 .on_retry([&](const rhttp::client_retry_event& e) { delays.push_back(e.delay); }),
             clock);
  completion<result_t> done;
  spawn(io, call(c, srv.at(), get()), done);
  BOOST_REQUIRE(run_until(io, [&] { return delays.size() == 1 && clock.pending() == 1; }));
  BOOST_TEST((delays[0] == 7s));
  clock.advance(7s);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST(status_of(done) == 200u);
  BOOST_TEST((c.options().retry_after().max_retry_after() == 10s));
}

// A budget shared by the client's calls: when most attempts fail, retrying
// stops, and each refusal is reported.
BOOST_AUTO_TEST_CASE(a_retry_budget_stops_retrying_when_most_attempts_fail) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int) { return step{step::respond, 503}; };
  resilience::retry_token_budget throttle{10, 0.1};
  int refusals = 0;
  client_t c(quick().budget(throttle).on_budget_refused([&](const resilience::budget_refusal&) { ++refusals; }),
             clock);
  std::vector<int> requests_per_call;
  for (int call_number = 0; call_number < 3; ++call_number) {
    const int before = srv.requests;
    completion<result_t> done;
    spawn(io, call(c, srv.at(), get()), done);
    BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
    BOOST_TEST(status_of(done) == 503u);
    requests_per_call.push_back(srv.requests - before);
  }
  // 10 tokens, one per failed attempt, retries while above 5: four attempts,
  // then one attempt a call.
  BOOST_TEST(requests_per_call == (std::vector<int>{4, 1, 1}), boost::test_tools::per_element());
  BOOST_TEST(refusals == 2);
  BOOST_TEST(throttle.refusals() == 2u);
}

// Asked for longer than max_retry_after(): the call ends with the server's
// answer at once, instead of coming back sooner than asked.
BOOST_AUTO_TEST_CASE(a_retry_after_past_the_maximum_ends_the_call_with_that_response) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::respond, 429, {{"Retry-After", "35"}}} : step{}; };
  int retries = 0;
  client_t c(rhttp::client_options::standard().on_retry([&](const rhttp::client_retry_event&) { ++retries; }), clock);
  BOOST_TEST((c.options().retry_after().max_retry_after() == 30s));
  BOOST_TEST(c.options().retry_after().is_jittered(), "spread by default");
  completion<result_t> done;
  spawn(io, call(c, srv.at(), get()), done);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST(status_of(done) == 429u);
  BOOST_TEST(srv.requests == 1);
  BOOST_TEST(retries == 0);
  BOOST_TEST(clock.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(a_malformed_retry_after_is_reported_and_the_backoff_waited) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) {
    if (n == 1) return step{step::respond, 503, {{"Retry-After", "soon"}}};
    if (n == 2) return step{step::respond, 503};
    return step{};
  };
  std::vector<rhttp::client_retry_event> events;
  client_t c(quick().on_retry([&](const rhttp::client_retry_event& e) { events.push_back(e); }), clock);
  completion<result_t> done;
  spawn(io, call(c, srv.at(), get()), done);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST(status_of(done) == 200u);
  BOOST_REQUIRE(events.size() == 2u);
  BOOST_TEST((events[0].delay == 0s));  // quick()'s backoff, not a wait the server never asked for
  BOOST_TEST(!events[0].retry_after);
  BOOST_TEST(events[0].retry_after_malformed);
  BOOST_TEST(!events[1].retry_after_malformed);  // no header at all
}

BOOST_AUTO_TEST_CASE(does_not_retry_400_or_404) {
  for (const unsigned status : {400u, 404u}) {
    asio::io_context io;
    manual_clock clock;
    server srv(io);
    srv.script = [status](int) { return step{step::respond, status}; };
    client_t c(quick(), clock);
    completion<result_t> done;
    spawn(io, call(c, srv.at(), get()), done);
    BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
    BOOST_TEST(status_of(done) == status);
    BOOST_TEST(srv.requests == 1);
  }
}

BOOST_AUTO_TEST_CASE(a_response_header_over_the_limit_ends_the_call_unretried_and_the_limit_can_be_raised) {
  // A 12 KiB cookie: past Beast's 8 KiB default, within a raised limit.
  for (const std::uint32_t limit : {0u, 16u << 10}) {
    asio::io_context io;
    manual_clock clock;
    server srv(io);
    srv.script = [](int) { return step{step::respond, 200, {{"Set-Cookie", std::string(12 << 10, 'c')}}}; };
    client_t c(limit ? quick().max_response_header(limit) : quick(), clock);
    BOOST_TEST(rhttp::client_options{}.max_response_header() == 8u << 10);
    completion<result_t> done;
    spawn(io, call(c, srv.at(), get()), done);
    BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
    if (limit) {
      BOOST_TEST(status_of(done) == 200u);
    } else {
      BOOST_TEST((error_of(done) == bhttp::error::header_limit));
    }
    BOOST_TEST(srv.requests == 1, "a header over the limit is not retried");
  }
}

BOOST_AUTO_TEST_CASE(a_response_body_over_the_limit_ends_the_call_unretried) {
  // The server's bodies are "reply 1", "reply 2"...: 7 bytes.
  for (const std::uint64_t limit : {6u, 7u}) {
    asio::io_context io;
    manual_clock clock;
    server srv(io);
    client_t c(quick().max_response_body(limit), clock);
    completion<result_t> done;
    spawn(io, call(c, srv.at(), get()), done);
    BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
    if (limit < 7u) {
      BOOST_TEST((error_of(done) == bhttp::error::body_limit));
    } else {
      BOOST_TEST(status_of(done) == 200u);
    }
    BOOST_TEST(srv.requests == 1, "a body over the limit is not retried");
  }
  BOOST_TEST(rhttp::client_options{}.max_response_body() == 8u << 20);
}

// The classifier decides which statuses are retried: here a 418 (never, by
// default) and not a 503 (always, by default).
BOOST_AUTO_TEST_CASE(the_retry_classifier_names_the_statuses_that_are_retried) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::respond, 418} : n == 2 ? step{step::respond, 503} : step{}; };
  client_t c(quick().retry_classifier(rhttp::classifier{418}), clock);
  completion<result_t> done;
  spawn(io, call(c, srv.at(), get()), done);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST(status_of(done) == 503u, "the 503 was retried, or the 418 was not");
  BOOST_TEST(srv.requests == 2);
}

// breaker_limits bounds the client's breakers, one per endpoint: with room
// for one, a second host's breaker is not kept while the first is in use,
// and replaces it once the first has been idle for idle_after().
BOOST_AUTO_TEST_CASE(breaker_limits_bound_the_breakers_kept_per_endpoint) {
  asio::io_context io;
  manual_clock clock;
  server a(io), b(io);
  client_t c(quick().breaker_limits(resilience::breaker_registry_options{}.max_breakers(1).idle_after(1min)), clock);
  const auto get_from = [&](const server& s) {
    completion<result_t> done;
    spawn(io, call(c, s.at(), get()), done);
    BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
    BOOST_TEST(status_of(done) == 200u);
  };
  get_from(a);
  get_from(b);
  BOOST_TEST(c.breakers().size() == 1u);
  BOOST_TEST(c.breakers().overflows() == 1u, "b's breaker was kept while a's was in use");
  BOOST_TEST(static_cast<bool>(c.breakers().find(a.at().key())));
  clock.advance(1min);
  get_from(b);
  BOOST_TEST(c.breakers().size() == 1u);
  BOOST_TEST(!c.breakers().find(a.at().key()), "a's idle breaker was not evicted");
  BOOST_TEST(static_cast<bool>(c.breakers().find(b.at().key())));
}

// jitter_retry_after: the backoff's jittered delay on top of a Retry-After
// (the default), or the Retry-After exactly.
BOOST_AUTO_TEST_CASE(jitter_retry_after_adds_the_jittered_backoff_or_waits_the_retry_after_exactly) {
  for (const bool jittered : {true, false}) {
    asio::io_context io;
    manual_clock clock;
    server srv(io);
    srv.script = [](int n) { return n == 1 ? step{step::respond, 503, {{"Retry-After", "3"}}} : step{}; };
    std::vector<resilience::duration> delays;
    auto options = quick()
                       .backoff(resilience::backoff::constant(1s).with_jitter(resilience::jitter::full))
                       .on_retry([&](const rhttp::client_retry_event& e) { delays.push_back(e.delay); });
    if (!jittered) options = options.jitter_retry_after(false);
    client_t c(options, clock);
    completion<result_t> done;
    spawn(io, call(c, srv.at(), get()), done);
    BOOST_REQUIRE(run_until(io, [&] { return delays.size() == 1 && clock.pending() == 1; }));
    if (jittered) {
      BOOST_TEST((delays[0] >= 3s && delays[0] <= 4500ms), "not the Retry-After, and at most the wider of the backoff "
                                                          "and half the Retry-After more");
    } else {
      BOOST_TEST((delays[0] == 3s), "the backoff was added");
    }
    BOOST_TEST((*clock.next_expiry() - clock.now() == delays[0]));
    clock.advance(delays[0]);
    BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
    BOOST_TEST(status_of(done) == 200u);
  }
}

// total_timeout bounds the whole call, retries included: the second
// attempt's bound is what is left of it, not its own 2 s, and the call ends
// with deadline_exceeded.
BOOST_AUTO_TEST_CASE(total_timeout_ends_the_call_across_its_attempts) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int) { return step{step::hang}; };
  client_t c(quick().total_timeout(3s).attempt_timeout(2s), clock);
  const auto start = clock.now();
  completion<result_t> done;
  spawn(io, call(c, srv.at(), get()), done);
  BOOST_REQUIRE(run_until(io, [&] { return srv.requests == 1 && clock.pending() == 1; }));
  BOOST_TEST((*clock.next_expiry() == start + 2s));
  clock.advance(2s);  // the first attempt's bound
  BOOST_REQUIRE(run_until(io, [&] { return srv.requests == 2 && clock.pending() == 1; }));
  BOOST_TEST((*clock.next_expiry() == start + 3s), "the second attempt is not bounded by the total");
  clock.advance(1s);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST((error_of(done) == resilience::error::deadline_exceeded));
  BOOST_TEST(srv.requests == 2);
  BOOST_TEST(clock.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(does_not_retry_a_post_without_idempotency_key_once_sent) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int) { return step{step::reset}; };  // reads the request, then resets
  client_t c(quick(), clock);
  completion<result_t> done;
  spawn(io, call(c, srv.at(), post("{}")), done);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST(error_of(done).failed());
  BOOST_TEST(srv.requests == 1);

  // With a key it is idempotent: retried, on a new connection each time.
  completion<result_t> keyed;
  auto req = post("{}");
  req.set("Idempotency-Key", "order-42");
  spawn(io, call(c, srv.at(), req), keyed);
  BOOST_REQUIRE(run_until(io, [&] { return keyed.done(); }));
  BOOST_TEST(error_of(keyed).failed());
  BOOST_TEST(srv.requests == 1 + 4);  // the first attempt and 3 retries
  BOOST_TEST(srv.accepted == 1 + 4);
}

BOOST_AUTO_TEST_CASE(retries_a_post_refused_before_sending) {
  asio::io_context io;
  manual_clock clock;
  // A port nobody listens on until the first retry.
  std::uint16_t port;
  {
    tcp::acceptor probe(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    port = probe.local_endpoint().port();
  }
  std::optional<server> late;
  std::vector<error_code> failures;
  client_t c(quick().on_retry([&](const rhttp::client_retry_event& e) {
    failures.push_back(e.error);
    if (!late) late.emplace(io, port);
  }), clock);
  completion<result_t> done;
  spawn(io, call(c, rhttp::endpoint::http("127.0.0.1", port), post("{}")), done);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_REQUIRE(failures.size() == 1u);
  BOOST_TEST((failures[0] == asio::error::connection_refused));
  BOOST_TEST(status_of(done) == 200u);
  BOOST_TEST(late->requests == 1);
  BOOST_TEST(late->seen[0].body() == "{}");
}

BOOST_AUTO_TEST_CASE(reconnects_after_a_reset) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::reset} : step{}; };
  client_t c(quick(), clock);
  completion<result_t> done;
  spawn(io, call(c, srv.at(), get()), done);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST(status_of(done) == 200u);
  BOOST_TEST(srv.accepted == 2);
  BOOST_TEST(c.pool().open_connections(srv.at()) == 1u);  // the reset one was closed, not kept
}

BOOST_AUTO_TEST_CASE(a_deadline_passing_mid_exchange_on_a_kept_connection_ends_it) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 2 ? step{step::hang} : step{}; };
  client_t c(quick().attempt_timeout(2s), clock);
  completion<result_t> first;
  spawn(io, call(c, srv.at(), get()), first);
  BOOST_REQUIRE(run_until(io, [&] { return first.done(); }));
  BOOST_TEST(status_of(first) == 200u);
  BOOST_REQUIRE(c.pool().idle_connections(srv.at()) == 1u);

  // The call's deadline (1 s) comes before the attempt's own bound (2 s).
  completion<result_t> second;
  spawn(io, call(c, srv.at(), get(), rhttp::request_options{}.deadline(clock.now() + 1s)), second);
  BOOST_REQUIRE(run_until(io, [&] { return srv.requests == 2 && clock.pending() == 1; }));
  clock.advance(999ms);
  run_ready(io);
  BOOST_TEST(!second.done());
  BOOST_TEST(clock.pending() == 1u, "the call's deadline is no longer armed");
  clock.advance(1ms);
  BOOST_REQUIRE(run_until(io, [&] { return second.done(); }));
  BOOST_TEST((error_of(second) == resilience::error::deadline_exceeded));
  BOOST_TEST(srv.accepted == 1);  // sent on the kept connection
  BOOST_TEST(srv.requests == 2);  // and not retried: no time is left
  BOOST_TEST(c.pool().open_connections(srv.at()) == 0u);  // closed, never reused
  BOOST_TEST(clock.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(times_out_a_hung_server_and_never_reuses_that_connection) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::hang} : step{}; };
  client_t c(quick().max_retries(0).attempt_timeout(2s), clock);
  completion<result_t> done;
  spawn(io, call(c, srv.at(), get()), done);
  BOOST_REQUIRE(run_until(io, [&] { return srv.requests == 1 && clock.pending() == 1; }));
  clock.advance(2s - 1ms);
  run_ready(io);
  BOOST_TEST(!done.done());  // hung, until the attempt's time is up
  BOOST_TEST(clock.pending() == 1u);
  clock.advance(1ms);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST((error_of(done) == resilience::error::timeout));
  BOOST_TEST(c.pool().open_connections(srv.at()) == 0u);

  completion<result_t> next;
  spawn(io, call(c, srv.at(), get()), next);
  BOOST_REQUIRE(run_until(io, [&] { return next.done(); }));
  BOOST_TEST(status_of(next) == 200u);
  BOOST_TEST(srv.accepted == 2);
}

BOOST_AUTO_TEST_CASE(sends_the_time_left_in_the_deadline_header) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::respond, 503, {{"Retry-After", "4"}}} : step{}; };
  int retries = 0;
  client_t c(quick()
                 .on_retry([&](const rhttp::client_retry_event&) { ++retries; })
                 .total_timeout(30s)
                 .attempt_timeout(10s)
                 .deadline_header(rhttp::deadline_header::milliseconds("x-timeout-ms"))
                 .deadline_margin(50ms),
             clock);
  completion<result_t> done;
  spawn(io, call(c, srv.at(), get()), done);
  BOOST_REQUIRE(run_until(io, [&] { return retries == 1 && clock.pending() == 1; }));
  clock.advance(4s);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_REQUIRE(srv.seen.size() == 2u);
  // Each attempt's own bound (10 s) less the margin.
  BOOST_TEST(srv.seen[0]["x-timeout-ms"] == "9950");
  BOOST_TEST(srv.seen[1]["x-timeout-ms"] == "9950");

  // With less left of the total than an attempt's timeout, the total's rest.
  completion<result_t> late;
  spawn(io, call(c, srv.at(), get(), rhttp::request_options{}.deadline(clock.now() + 3s)), late);
  BOOST_REQUIRE(run_until(io, [&] { return late.done(); }));
  BOOST_TEST(srv.seen.back()["x-timeout-ms"] == "2950");
}

BOOST_AUTO_TEST_CASE(a_request_sent_by_reference_is_the_callers_own) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::respond, 503} : step{}; };
  client_t c(quick().deadline_header(rhttp::deadline_header::milliseconds("x-timeout-ms")), clock);
  auto req = post("order 1");
  req.set("Idempotency-Key", "k1");
  completion<result_t> done;
  spawn(io, call_by_reference(c, srv.at(), req), done);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST(status_of(done) == 200u);
  BOOST_REQUIRE(srv.seen.size() == 2u);  // the same request, retried
  BOOST_TEST(srv.seen[1].body() == "order 1");
  // What the call set is on the caller's request: Host, Content-Length and
  // the time sent, the default attempt timeout less the margin.
  BOOST_TEST(req[bhttp::field::host] == srv.at().authority());
  BOOST_TEST(req[bhttp::field::content_length] == "7");
  BOOST_TEST(req["x-timeout-ms"] == "9950");
  BOOST_TEST(req.body() == "order 1");
}

BOOST_AUTO_TEST_CASE(reads_past_interim_responses_to_the_final_one) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) {
    step st;
    if (n == 1)
      st.before = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
                  "HTTP/1.1 100 Continue\r\n\r\n";
    return st;
  };
  client_t c(quick(), clock);
  two_gets_get_their_own_replies(io, c, srv);
  BOOST_TEST(srv.accepted == 1);
}

// An interim response, then nothing: the attempt's time ends the wait for
// the final one, and that connection is closed, not kept.
BOOST_AUTO_TEST_CASE(an_interim_response_then_silence_times_out) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) {
    return n == 1 ? step{.what = step::hang, .before = "HTTP/1.1 100 Continue\r\n\r\n"} : step{};
  };
  client_t c(quick().max_retries(0).attempt_timeout(2s), clock);
  completion<result_t> done;
  spawn(io, call(c, srv.at(), get()), done);
  BOOST_REQUIRE(run_until(io, [&] { return srv.requests == 1 && clock.pending() == 1; }));
  clock.advance(2s - 1ms);
  run_ready(io);
  BOOST_TEST(!done.done());  // past the 100, waiting for the final response
  BOOST_TEST(clock.pending() == 1u);
  clock.advance(1ms);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST((error_of(done) == resilience::error::timeout));
  BOOST_TEST(c.pool().open_connections(srv.at()) == 0u);
  BOOST_TEST(clock.pending() == 0u);
}

// A file body is read from the file as it is sent: a retried PUT sends the
// whole file again (the second attempt used to send nothing and fail).
BOOST_AUTO_TEST_CASE(resolves_a_host_name_and_sets_the_host_header) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  client_t c(quick(), clock);
  completion<result_t> done;
  spawn(io, call(c, rhttp::endpoint::http("localhost", srv.port()), get()), done);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST(status_of(done) == 200u);
  BOOST_REQUIRE(srv.seen.size() == 1u);
  BOOST_TEST(srv.seen[0][bhttp::field::host] == "localhost:" + std::to_string(srv.port()));
}

BOOST_AUTO_TEST_CASE(reads_a_head_response_without_waiting_for_its_declared_body) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{.headers_only_length = 5} : step{}; };
  client_t c(quick().max_retries(0), clock);
  completion<result_t> head;
  spawn(io, call(c, srv.at(), bhttp::request<bhttp::empty_body>{bhttp::verb::head, "/", 11}), head);
  // The clock stands still: an attempt waiting for 5 bytes would never end.
  BOOST_REQUIRE(run_until(io, [&] { return head.done(); }));
  BOOST_TEST(status_of(head) == 200u);
  BOOST_TEST((*head.value)->body().empty());
  BOOST_TEST(srv.seen[0].method() == bhttp::verb::head);
  // The connection is in step: the next request reuses it.
  completion<result_t> next;
  spawn(io, call(c, srv.at(), get()), next);
  BOOST_REQUIRE(run_until(io, [&] { return next.done(); }));
  BOOST_TEST(status_of(next) == 200u);
  BOOST_TEST(srv.accepted == 1);
}

BOOST_AUTO_TEST_CASE(retries_a_get_the_server_dropped_unanswered) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::drop} : step{}; };
  std::vector<error_code> retried;
  client_t c(quick().on_retry([&](const rhttp::client_retry_event& e) { retried.push_back(e.error); }), clock);
  completion<result_t> done;
  spawn(io, call(c, srv.at(), get()), done);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST(status_of(done) == 200u);
  BOOST_TEST(srv.requests == 2);
  BOOST_REQUIRE(retried.size() == 1u);
  BOOST_TEST((retried[0] == bhttp::error::end_of_stream));
}

BOOST_AUTO_TEST_CASE(an_endpoint_or_request_it_cannot_send_is_refused_before_anything_starts) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  client_t c(quick(), clock);
  rhttp::endpoint no_host;  // built field by field, skipping the factory's check
  no_host.port = srv.port();
  BOOST_CHECK_THROW((void)c.request(no_host, get()), std::invalid_argument);
  BOOST_CHECK_THROW((void)c.request(rhttp::endpoint{"127.0.0.1", 0, false}, get()), std::invalid_argument);
  bhttp::request<bhttp::empty_body> connect{bhttp::verb::connect, "example.com:443", 11};
  BOOST_CHECK_THROW((void)c.request(srv.at(), connect), std::invalid_argument);
  BOOST_CHECK_THROW((void)c.request(srv.at(), std::ref(connect)), std::invalid_argument);
  io.poll();
  BOOST_TEST(srv.accepted == 0);
  BOOST_CHECK_THROW(rhttp::endpoint::http("example.com", 0), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::endpoint::https("example.com", 0), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(options_are_validated_where_they_enter) {
  BOOST_CHECK_THROW(rhttp::client_options{}.total_timeout(0s), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::client_options{}.attempt_timeout(-1s), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::client_options{}.max_retries(101), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::client_options{}.max_retry_after(0s), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::client_options{}.deadline_margin(-1ms), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::client_options{}.max_response_body(0), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::client_options{}.max_response_header(0), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::connection_pool_options{}.max_connections_per_host(0), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::connection_pool_options{}.idle_timeout(0s), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::connection_pool_options{}.resolve_timeout(0s), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::endpoint::http(""), std::invalid_argument);
  for (const std::string& bad : {std::string("example.com\r\nX-Injected: 1"), std::string("exa\0mple.com", 12),
                                std::string("example.com/path"), std::string("user@example.com"), std::string(" example.com"),
                                std::string("[::1]")})
    BOOST_CHECK_THROW(rhttp::endpoint::http(bad), std::invalid_argument);
  BOOST_CHECK_NO_THROW(rhttp::endpoint::https("api.example-1.com"));
  BOOST_CHECK_NO_THROW(rhttp::endpoint::http("127.0.0.1", 8080));
  BOOST_CHECK_NO_THROW(rhttp::endpoint::http("::1", 8080));
  // Built field by field, it is checked where it enters the pool too.
  rhttp::connection_pool pool;
  BOOST_CHECK_THROW((void)pool.acquire(rhttp::endpoint{"exa\r\nmple.com", 80, false}), std::invalid_argument);
  try {
    client_t c(rhttp::client_options{}.total_timeout(5s).attempt_timeout(10s), manual_clock{});
    BOOST_FAIL("an attempt timeout longer than the total was accepted");
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(std::string(e.what()).find("attempt_timeout") != std::string::npos);
  }
  // A margin that leaves each attempt no time to tell the server.
  const auto header = rhttp::deadline_header::grpc_timeout();
  BOOST_CHECK_THROW(client_t(rhttp::client_options{}.attempt_timeout(1s).deadline_margin(1s).deadline_header(header),
                             manual_clock{}),
                    std::invalid_argument);
  BOOST_CHECK_THROW(client_t(rhttp::client_options{}.attempt_timeout(1s).deadline_margin(1s), manual_clock{}),
                    std::invalid_argument);
  // The default margin (50 ms) matters only when a header is sent.
  BOOST_CHECK_NO_THROW(client_t(rhttp::client_options{}.attempt_timeout(20ms), manual_clock{}));
  BOOST_CHECK_THROW(client_t(rhttp::client_options{}.attempt_timeout(20ms).deadline_header(header), manual_clock{}),
                    std::invalid_argument);
  const auto standard = rhttp::client_options::standard();
  BOOST_TEST((standard.total_timeout() == 30s));
  BOOST_TEST((standard.attempt_timeout() == 10s));
  BOOST_TEST(standard.max_retries() == 3u);
  BOOST_TEST(standard.breaker().failure_ratio().value() == 0.5);
  BOOST_TEST(standard.breaker().minimum_calls() == 20u);
  BOOST_TEST(!standard.deadline_header());
  BOOST_TEST(rhttp::endpoint::https("example.com").key() == "example.com:443:tls");
  BOOST_TEST(rhttp::endpoint::http("example.com", 8080).authority() == "example.com:8080");
}

BOOST_AUTO_TEST_SUITE_END()
