// retry_after_delay: a server's Retry-After drives co_retry's waits, bounded
// and jittered as asked, read against a wall clock.
#include "support_http.hpp"

#include <resilience/http/classifier.hpp>
#include <resilience/http/retry_after.hpp>
#include <resilience/http/retry_after_delay.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
namespace rhttp = resilience::http;
using resilience::context;
using resilience::duration;
using resilience::time_point;
using resilience::testing::manual_clock;
using resilience::test::at;
using resilience::test::completion;
using resilience::test::make;
using resilience::test::response;
using resilience::test::rfc_example;
using resilience::test::spawn;

namespace {

// A server scripted response by response, on virtual time.
struct scripted_server {
  asio::io_context io;
  manual_clock clock;
  std::vector<response> script;
  std::vector<time_point> calls;
  std::vector<duration> waits;
  // A GET: idempotent, so a response (which proves the request was sent)
  // may still be retried.
  resilience::properties props;
  scripted_server() { props.set(rhttp::idempotent, true); }
  context ctx() { return context{}.with(props); }

  auto op() {
    return [this]() -> asio::awaitable<response> {
      const std::size_t i = calls.size();
      calls.push_back(clock.now());
      co_return script.at(std::min(i, script.size() - 1));
    };
  }
  // Waits the Retry-After exactly, so that a test reads the server's value.
  static rhttp::retry_after_delay exact() { return rhttp::retry_after_delay{}.jittered(false); }

  auto policy(rhttp::retry_after_delay delay = exact()) {
    return resilience::retry_policy{}
        .max_attempts(5)
        .backoff(resilience::backoff::constant(100ms))
        .jitter(resilience::jitter::none)
        .clock(clock)
        .retry_if(rhttp::classifier{})
        .delay_generator(delay)
        .on_retry([this](const auto& e) { waits.push_back(e.delay); });
  }
};

rhttp::wall_time fixed_wall_clock() noexcept { return at(1994, 11, 6, 8, 49, 0); }

}  // namespace

BOOST_FIXTURE_TEST_SUITE(retry_after_drives_co_retry, scripted_server)

BOOST_AUTO_TEST_CASE(retry_after_on_429_and_503_else_backoff) {
  script = {make(429, "3"), make(503, "7"), make(502, "60"), make(500), make(200)};
  completion<response> done;
  spawn(io, resilience::co_retry(op(), policy(), ctx()), done);
  clock.run(io);
  BOOST_REQUIRE(done.value);
  BOOST_TEST(done.value->result_int() == 200u);
  // 502 and 500: the backoff (a Retry-After on a 502 is not honoured).
  BOOST_TEST((waits == std::vector<duration>{3s, 7s, 100ms, 100ms}));
  BOOST_TEST((clock.now() == time_point(10200ms)));
}

BOOST_AUTO_TEST_CASE(a_malformed_retry_after_falls_back_to_the_backoff) {
  script = {make(503, "soon"), make(429, "-1"), make(503, "Mon, 30 Feb 2026 00:00:00 GMT"), make(204)};
  completion<response> done;
  spawn(io, resilience::co_retry(op(), policy(), ctx()), done);
  clock.run(io);
  BOOST_TEST(done.value->result_int() == 204u);
  BOOST_TEST((waits == std::vector<duration>{100ms, 100ms, 100ms}));
}

BOOST_AUTO_TEST_CASE(an_http_date_against_the_wall_clock_or_the_date_header) {
  response dated = make(503, "Sun, 06 Nov 1994 08:49:37 GMT");
  response with_server_date = dated;
  with_server_date.set(bhttp::field::date, "Sun, 06 Nov 1994 08:49:27 GMT");  // the server says 10 s ahead
  response bad_server_date = dated;
  bad_server_date.set(bhttp::field::date, "yesterday");
  script = {dated, with_server_date, bad_server_date, make(200)};
  completion<response> done;
  spawn(io, resilience::co_retry(op(), policy(exact().wall_clock(&fixed_wall_clock)), ctx()), done);
  clock.run(io);
  BOOST_TEST(done.value->result_int() == 200u);
  BOOST_TEST((waits == std::vector<duration>{37s, 10s, 37s}));
}

BOOST_AUTO_TEST_CASE(a_date_header_beyond_the_wall_clock_range_is_ignored) {
  // Found by fuzz_classify: a Date in year 498 overflowed the conversion to
  // system_clock's nanoseconds. It is ignored; the wall clock is used.
  response far_past = make(429, "Sun, 06 Nov 1994 08:49:37 GMT");
  far_past.set(bhttp::field::date, "Sun, 06 Apr 0498 08:49:27 GMT");
  response far_future = make(503, "Sun, 06 Nov 1994 08:49:37 GMT");
  far_future.set(bhttp::field::date, "Fri, 31 Dec 9999 23:59:59 GMT");
  script = {far_past, far_future, make(200)};
  completion<response> done;
  spawn(io, resilience::co_retry(op(), policy(exact().wall_clock(&fixed_wall_clock)), ctx()), done);
  clock.run(io);
  BOOST_TEST(done.value->result_int() == 200u);
  BOOST_TEST((waits == std::vector<duration>{37s, 37s}));
  BOOST_TEST(!rhttp::to_wall_time(at(498, 4, 6, 8, 49, 27)));
  BOOST_TEST(!rhttp::to_wall_time(at(9999, 12, 31, 23, 59, 59)));
  BOOST_TEST((rhttp::to_wall_time(rfc_example) == rhttp::wall_time(rfc_example)));
}

// Never sooner than the server asked: a Retry-After past the maximum is not
// cut to it and retried early; the call ends with that response.
BOOST_AUTO_TEST_CASE(a_retry_after_above_the_maximum_ends_the_call_with_that_response) {
  for (const bool jittered : {false, true}) {
    calls.clear();
    waits.clear();
    script = {make(503, "35"), make(200)};
    completion<response> done;
    spawn(io, resilience::co_retry(op(), policy(rhttp::retry_after_delay{}.jittered(jittered).max_retry_after(30s)), ctx()),
          done);
    clock.run(io);
    BOOST_TEST_CONTEXT("jittered: " << jittered) {
      BOOST_REQUIRE(done.value);
      BOOST_TEST(done.value->result_int() == 503u);
      BOOST_TEST(calls.size() == 1u);
      BOOST_TEST(waits.empty());
    }
  }
  // At the maximum itself it is honoured.
  calls.clear();
  script = {make(429, "30"), make(200)};
  completion<response> done;
  spawn(io, resilience::co_retry(op(), policy(exact().max_retry_after(30s)), ctx()), done);
  clock.run(io);
  BOOST_TEST(done.value->result_int() == 200u);
  BOOST_TEST((waits == std::vector<duration>{30s}));
  // The default cap is a minute.
  BOOST_TEST((rhttp::retry_after_delay{}.max_retry_after() == duration(1min)));
  BOOST_CHECK_THROW(rhttp::retry_after_delay{}.max_retry_after(0s), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::retry_after_delay{}.max_retry_after(-1s), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_retry_after_past_the_deadline_ends_the_call_at_once) {
  script = {make(503, "30"), make(200)};
  context bounded = ctx();
  bounded.deadline = time_point(10s);
  completion<response> done;
  spawn(io, resilience::co_retry(op(), policy(), bounded), done);
  clock.run(io);
  BOOST_REQUIRE(done.value);
  BOOST_TEST(done.value->result_int() == 503u);  // the server's answer, not a wait
  BOOST_TEST(calls.size() == 1u);
  BOOST_TEST(waits.empty());
  BOOST_TEST((clock.now() == time_point{}));
}

// The default: clients one burst of 503s turned away must not come back in
// lockstep, and none sooner than asked.
BOOST_AUTO_TEST_CASE(by_default_a_retry_after_is_never_shorter_and_spread_by_the_backoff_on_top) {
  BOOST_TEST(rhttp::retry_after_delay{}.is_jittered());
  script = {make(503, "10"), make(503, "10"), make(503, "10"), make(503, "10"), make(200)};
  completion<response> done;
  auto p = policy(rhttp::retry_after_delay{})
               .backoff(resilience::backoff::constant(2s))
               .jitter(resilience::jitter::full)
               .random(resilience::random_source::seeded(7));
  spawn(io, resilience::co_retry(op(), p, ctx()), done);
  clock.run(io);
  BOOST_REQUIRE(waits.size() == 4u);
  // The 2 s backoff on top, widened to half the Retry-After: up to 5 s.
  for (const duration w : waits) BOOST_TEST((w >= 10s && w <= 15s), "the server's 10 s, then up to 5 s more");
  BOOST_TEST(std::count(waits.begin(), waits.end(), waits.front()) < 4, "spread, not all alike");
}

BOOST_AUTO_TEST_CASE(a_post_is_not_repeated_after_a_503_but_a_get_is) {
  for (const bool get : {true, false}) {
    asio::io_context io2;
    calls.clear();
    script = {make(503, "1"), make(200)};
    props.set(rhttp::idempotent,
              rhttp::is_idempotent(bhttp::request<bhttp::empty_body>{get ? bhttp::verb::get : bhttp::verb::post, "/", 11}));
    completion<response> done;
    spawn(io2, resilience::co_retry(op(), policy(), context{}.with(props)), done);
    clock.run(io2);
    BOOST_TEST_CONTEXT((get ? "GET" : "POST")) {
      BOOST_TEST(done.value->result_int() == (get ? 200u : 503u));
      BOOST_TEST(calls.size() == (get ? 2u : 1u));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
