#include "support.hpp"

#include <resilience/error.hpp>
#include <resilience/http/http.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace rhttp = resilience::http;
using boost::system::error_code;
using resilience::context;
using resilience::duration;
using resilience::outcome;
using resilience::time_point;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::spawn;

namespace {

using response = bhttp::response<bhttp::string_body>;
using sys_seconds = std::chrono::sys_seconds;

constexpr auto ymd(int y, unsigned m, unsigned d) {
  return std::chrono::sys_days{std::chrono::year{y} / std::chrono::month{m} / std::chrono::day{d}};
}
sys_seconds at(int y, unsigned m, unsigned d, int hh, int mm, int ss) {
  return sys_seconds{ymd(y, m, d)} + std::chrono::hours{hh} + std::chrono::minutes{mm} + std::chrono::seconds{ss};
}

// RFC 9110's example date, and a "now" to read dates against.
const sys_seconds rfc_example = at(1994, 11, 6, 8, 49, 37);
const rhttp::wall_time now_2026 = at(2026, 11, 23, 12, 0, 0);

std::optional<sys_seconds> date(std::string_view v, rhttp::wall_time now = now_2026) {
  return rhttp::parse_http_date(v, now);
}

response make(unsigned status, std::string retry_after = {}) {
  response r{static_cast<bhttp::status>(status), 11};
  if (!retry_after.empty()) r.set(bhttp::field::retry_after, retry_after);
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(http_dates)

BOOST_AUTO_TEST_CASE(the_rfc_examples_in_all_three_formats) {
  BOOST_TEST((date("Sun, 06 Nov 1994 08:49:37 GMT") == rfc_example));
  BOOST_TEST((date("Sunday, 06-Nov-94 08:49:37 GMT") == rfc_example));
  BOOST_TEST((date("Sun Nov  6 08:49:37 1994") == rfc_example));
  BOOST_TEST((date("Thu Nov 26 12:00:00 2026") == at(2026, 11, 26, 12, 0, 0)));
  BOOST_TEST((date("Fri, 29 Feb 2008 23:59:59 GMT") == at(2008, 2, 29, 23, 59, 59)));
  // A leap second reads as the next minute's first second.
  BOOST_TEST((date("Sat, 31 Dec 2016 23:59:60 GMT") == at(2017, 1, 1, 0, 0, 0)));
}

BOOST_AUTO_TEST_CASE(rfc850_two_digit_years_follow_the_fifty_year_rule) {
  // now: 2026-11-23 12:00:00. Exactly 50 years ahead is still the future...
  BOOST_TEST((date("Monday, 23-Nov-76 12:00:00 GMT") == at(2076, 11, 23, 12, 0, 0)));
  // ...one second more is "more than 50 years in the future": the past century.
  BOOST_TEST((date("Tuesday, 23-Nov-76 12:00:01 GMT") == at(1976, 11, 23, 12, 0, 1)));
  BOOST_TEST((date("Wednesday, 24-Nov-76 00:00:00 GMT") == at(1976, 11, 24, 0, 0, 0)));
  BOOST_TEST((date("Thursday, 26-Nov-26 12:00:00 GMT") == at(2026, 11, 26, 12, 0, 0)));
  BOOST_TEST((date("Friday, 31-Dec-99 23:59:59 GMT") == at(1999, 12, 31, 23, 59, 59)));
  BOOST_TEST((date("Saturday, 01-Jan-00 00:00:00 GMT") == at(2000, 1, 1, 0, 0, 0)));
  // In 2090, "10" is 2110 (20 years ahead), not 2010.
  BOOST_TEST((date("Sunday, 02-Mar-10 00:00:00 GMT", at(2090, 1, 1, 0, 0, 0)) == at(2110, 3, 2, 0, 0, 0)));
}

BOOST_AUTO_TEST_CASE(the_weekday_must_match_the_date) {
  BOOST_TEST(!date("Mon, 06 Nov 1994 08:49:37 GMT"));
  BOOST_TEST(!date("Monday, 06-Nov-94 08:49:37 GMT"));
  BOOST_TEST(!date("Mon Nov  6 08:49:37 1994"));
  // Monday in 2076, Monday in 1976? 23-Nov-1976 was a Tuesday: the century
  // is decided first, then the weekday is checked against it.
  BOOST_TEST(!date("Monday, 23-Nov-76 12:00:01 GMT"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(retry_after_values)

BOOST_AUTO_TEST_CASE(delay_seconds) {
  BOOST_TEST((rhttp::parse_retry_after("0", now_2026) == duration::zero()));
  BOOST_TEST((rhttp::parse_retry_after("120", now_2026) == duration(120s)));
  BOOST_TEST((rhttp::parse_retry_after("007", now_2026) == duration(7s)));
  BOOST_TEST((rhttp::parse_retry_after(" \t5 ", now_2026) == duration(5s)));  // OWS around the value
  // Longer than duration can hold: saturates, never wraps.
  BOOST_TEST((rhttp::parse_retry_after("9223372036", now_2026) == duration(9223372036s)));
  BOOST_TEST((rhttp::parse_retry_after("9223372037", now_2026) == duration::max()));
  BOOST_TEST((rhttp::parse_retry_after("99999999999999999999999999999999999999", now_2026) == duration::max()));
  BOOST_TEST((rhttp::parse_retry_after(std::string(100000, '9'), now_2026) == duration::max()));
}

BOOST_AUTO_TEST_CASE(dates_are_measured_from_now_and_the_past_is_zero) {
  const rhttp::wall_time now = at(1994, 11, 6, 8, 49, 0);
  BOOST_TEST((rhttp::parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now) == duration(37s)));
  BOOST_TEST((rhttp::parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", now) == duration(37s)));
  BOOST_TEST((rhttp::parse_retry_after("Sun Nov  6 08:49:37 1994", now) == duration(37s)));
  // Sub-second now: the delay is exact to the nanosecond.
  BOOST_TEST((rhttp::parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now + 250ms) == duration(36750ms)));
  BOOST_TEST((rhttp::parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now_2026) == duration::zero()));
  BOOST_TEST((rhttp::parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", rfc_example) == duration::zero()));
  // Year 9999 is beyond what nanoseconds hold: saturates.
  BOOST_TEST((rhttp::parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", now_2026) == duration::max()));
}

BOOST_AUTO_TEST_CASE(malformed_values_are_nullopt) {
  const char* const malformed[] = {
      "",
      "   ",
      "-1",
      "+5",
      "1.5",
      "1 0",
      "5s",
      "0x10",
      "Sun, 06 Nov 1994 08:49:37",          // missing GMT
      "Sun, 06 Nov 1994 08:49:37 UTC",      // only GMT
      "Sun, 06 Nov 1994 08:49:37 GMT junk", // trailing junk
      "Sun, 06 Nov 1994 08:49:37 GMTx",
      "Sun, 06 Nov 1994 08:49:37 gmt",      // case-sensitive
      "sun, 06 Nov 1994 08:49:37 GMT",
      "Sun, 06 Noe 1994 08:49:37 GMT",      // wrong month
      "Sun, 6 Nov 1994 08:49:37 GMT",       // one-digit day in IMF-fixdate
      "Sun, 06 Nov 94 08:49:37 GMT",        // two-digit year in IMF-fixdate
      "Mon, 30 Feb 2026 08:49:37 GMT",      // Feb 30
      "Sun, 29 Feb 2023 00:00:00 GMT",      // not a leap year
      "Sun, 00 Nov 1994 08:49:37 GMT",      // day 0
      "Thu, 31 Nov 1994 08:49:37 GMT",      // 31 November
      "Sun, 06 Nov 1994 24:00:00 GMT",      // hour 24
      "Sun, 06 Nov 1994 08:60:37 GMT",      // minute 60
      "Sun, 06 Nov 1994 08:49:61 GMT",      // second 61
      "Sun, 06 Nov 1994 8:49:37 GMT",       // one-digit hour
      "Sun,  06 Nov 1994 08:49:37 GMT",     // double space
      "Sunday, 06 Nov 1994 08:49:37 GMT",   // long day name in IMF-fixdate
      "Sun, 06-Nov-94 08:49:37 GMT",        // short day name in RFC 850
      "Sunday, 06-Nov-1994 08:49:37 GMT",   // four-digit year in RFC 850
      "Sunday, 06-Nov-94 08:49:37",
      "Sun Nov 6 08:49:37 1994",            // asctime day needs two characters
      "Sun Nov  6 08:49:37 94",
      "Sun Nov  6 08:49:37 1994 GMT",
      "Sun Nov 06 08:49:37 1994x",
      "Sux, 06 Nov 1994 08:49:37 GMT",      // not a day name
      "Sun",
      "Sun,",
  };
  BOOST_TEST(std::size(malformed) >= 20u);
  for (const char* v : malformed) {
    BOOST_TEST_CONTEXT("value: \"" << v << '"') { BOOST_TEST(!rhttp::parse_retry_after(v, now_2026)); }
  }
  BOOST_TEST(!rhttp::parse_retry_after(std::string_view("5\0", 2), now_2026));  // an embedded NUL
  BOOST_TEST(!rhttp::parse_retry_after("\xff\xfe", now_2026));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(deadline_headers)

BOOST_AUTO_TEST_CASE(grpc_timeout_parses_every_unit) {
  BOOST_TEST((rhttp::parse_grpc_timeout("1H") == duration(1h)));
  BOOST_TEST((rhttp::parse_grpc_timeout("2M") == duration(2min)));
  BOOST_TEST((rhttp::parse_grpc_timeout("3S") == duration(3s)));
  BOOST_TEST((rhttp::parse_grpc_timeout("4m") == duration(4ms)));
  BOOST_TEST((rhttp::parse_grpc_timeout("5u") == duration(5us)));
  BOOST_TEST((rhttp::parse_grpc_timeout("99999999n") == duration(99999999ns)));
  BOOST_TEST((rhttp::parse_grpc_timeout("0n") == duration::zero()));
  BOOST_TEST((rhttp::parse_grpc_timeout("00000100m") == duration(100ms)));
  // 99999999 hours overflow nanoseconds: saturates.
  BOOST_TEST((rhttp::parse_grpc_timeout("99999999H") == duration::max()));
}

BOOST_AUTO_TEST_CASE(grpc_timeout_rejects) {
  for (const char* v : {"", "S", "m", "123456789S", "1", "12", "1s", "1h", "1x", " 1S", "1S ", "1 S", "-1S",
                        "+1S", "1.5S", "1SS", "１S"}) {
    BOOST_TEST_CONTEXT("value: \"" << v << '"') { BOOST_TEST(!rhttp::parse_grpc_timeout(v)); }
  }
}

BOOST_AUTO_TEST_CASE(grpc_timeout_format_picks_the_finest_unit_and_rounds_up) {
  BOOST_TEST(rhttp::format_grpc_timeout(1ns) == "1n");
  BOOST_TEST(rhttp::format_grpc_timeout(99999999ns) == "99999999n");
  BOOST_TEST(rhttp::format_grpc_timeout(100000000ns) == "100000u");
  BOOST_TEST(rhttp::format_grpc_timeout(100000001ns) == "100001u");  // rounded up, never down
  BOOST_TEST(rhttp::format_grpc_timeout(123456789ns) == "123457u");
  BOOST_TEST(rhttp::format_grpc_timeout(250ms) == "250000u");
  BOOST_TEST(rhttp::format_grpc_timeout(2min) == "120000m");
  BOOST_TEST(rhttp::format_grpc_timeout(100000s) == "100000S");
  BOOST_TEST(rhttp::format_grpc_timeout(100000000s) == "1666667M");
  BOOST_TEST(rhttp::format_grpc_timeout(duration::max()) == "2562048H");
  // The deadline has passed: the grammar has no zero, and 1n says "no time left".
  BOOST_TEST(rhttp::format_grpc_timeout(duration::zero()) == "1n");
  BOOST_TEST(rhttp::format_grpc_timeout(-5s) == "1n");
}

BOOST_AUTO_TEST_CASE(grpc_timeout_round_trips_never_shrink) {
  for (const duration d : {duration(1ns), duration(999ns), duration(1001ns), duration(123456789ns), duration(1s),
                           duration(1s + 1ns), duration(37min), duration(49h), duration(123456789123456789ns),
                           duration::max()}) {
    const std::string text = rhttp::format_grpc_timeout(d);
    BOOST_TEST_CONTEXT(d.count() << "ns -> " << text) {
      BOOST_TEST(text.size() <= 9u);
      const auto back = rhttp::parse_grpc_timeout(text);
      BOOST_REQUIRE(back.has_value());
      BOOST_TEST((*back >= d));
      // Less than one unit of the chosen scale more. A coarser unit is chosen
      // only when the count in the finer one has over 8 digits, so that unit
      // is at most 1/100000 of d (units are at most 1000 apart).
      BOOST_TEST(((*back - d) <= d / 100'000 + 1ns || *back == duration::max()));
      BOOST_TEST(rhttp::format_grpc_timeout(*back) == text);
    }
  }
}

BOOST_AUTO_TEST_CASE(milliseconds_header) {
  BOOST_TEST((rhttp::parse_timeout_ms("0") == duration::zero()));
  BOOST_TEST((rhttp::parse_timeout_ms("1500") == duration(1500ms)));
  BOOST_TEST((rhttp::parse_timeout_ms("99999999999999999999999") == duration::max()));
  for (const char* v : {"", " ", "-1", "1.5", "1 ", "1e3", "ms"}) BOOST_TEST(!rhttp::parse_timeout_ms(v));
  BOOST_TEST(rhttp::format_timeout_ms(1500ms) == "1500");
  BOOST_TEST(rhttp::format_timeout_ms(1ns) == "1");
  BOOST_TEST(rhttp::format_timeout_ms(1500001us) == "1501");
  BOOST_TEST(rhttp::format_timeout_ms(duration::zero()) == "0");
  BOOST_TEST(rhttp::format_timeout_ms(-1s) == "0");
}

BOOST_AUTO_TEST_CASE(deadlines_from_headers) {
  const time_point now{10s};
  BOOST_TEST((rhttp::grpc_timeout_deadline("250m", now) == time_point(10250ms)));
  BOOST_TEST((rhttp::timeout_ms_deadline("250", now) == time_point(10250ms)));
  BOOST_TEST(!rhttp::grpc_timeout_deadline("250", now));
  BOOST_TEST(!rhttp::timeout_ms_deadline("250m", now));
  BOOST_TEST((rhttp::grpc_timeout_deadline("99999999H", now) == time_point::max()));  // no deadline
  BOOST_TEST((rhttp::grpc_timeout_deadline("0n", now) == now));
  BOOST_TEST((rhttp::deadline_after(-1s, now) == now));
  BOOST_TEST((rhttp::time_until(time_point(10250ms), now) == duration(250ms)));
  BOOST_TEST((rhttp::time_until(time_point(9s), now) == duration::zero()));
  BOOST_TEST((rhttp::time_until(time_point::max(), now) == duration::max()));
  BOOST_TEST(rhttp::format_grpc_timeout(rhttp::time_until(time_point(10250ms), now)) == "250000u");
}

BOOST_AUTO_TEST_CASE(deadlines_in_beast_fields) {
  const time_point now{10s};
  const auto grpc = rhttp::deadline_header::grpc_timeout();
  const auto ms = rhttp::deadline_header::milliseconds("X-Request-Timeout-Ms");
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, "/", 11};
  BOOST_TEST(!grpc.read(req, now));  // absent
  grpc.write(req, time_point(10250ms), now);
  ms.write(req, time_point(10250ms) + 1ns, now);
  BOOST_TEST(req["grpc-timeout"] == "250000u");
  BOOST_TEST(req["x-request-timeout-ms"] == "251");  // rounded up
  BOOST_TEST((grpc.read(req, now) == time_point(10250ms)));
  BOOST_TEST((ms.read(req, now + 1s) == time_point(11251ms)));
  // Passed: the least value. None: the header goes.
  grpc.write(req, time_point(9s), now);
  ms.write(req, time_point(9s), now);
  BOOST_TEST(req["grpc-timeout"] == "1n");
  BOOST_TEST(req["x-request-timeout-ms"] == "0");
  grpc.write(req, time_point::max(), now);
  BOOST_TEST((req.find("grpc-timeout") == req.end()));
  // Malformed: no deadline.
  req.set("grpc-timeout", "soon");
  BOOST_TEST(!grpc.read(req, now));
  for (const char* bad : {"", "x timeout", "x:timeout", "x\r\n"})
    BOOST_CHECK_THROW(rhttp::deadline_header::milliseconds(bad), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(http_classification)

namespace {
const rhttp::classifier retry_if{};

// TLS errors are recognised by their category's name, so that the classifier
// needs no OpenSSL headers; these tests need none either. Asio's categories
// are named "asio.ssl" (OpenSSL's codes) and "asio.ssl.stream" (its own).
struct named_category : boost::system::error_category {
  const char* n;
  explicit named_category(const char* name) : n(name) {}
  const char* name() const noexcept override { return n; }
  std::string message(int) const override { return n; }
};
const named_category ssl_category{"asio.ssl"};
const named_category ssl_stream_category{"asio.ssl.stream"};
const rhttp::breaker_classifier breaker_counts{};

bool transient(unsigned status) { return retry_if(outcome<response>::from_value(make(status))); }
bool transient(const error_code& ec) { return retry_if(outcome<error_code>::from_value(ec)); }
bool counts(unsigned status) { return breaker_counts(outcome<response>::from_value(make(status))); }
bool counts(const error_code& ec) { return breaker_counts(outcome<error_code>::from_value(ec)); }
}  // namespace

BOOST_AUTO_TEST_CASE(statuses) {
  for (const unsigned s : {408u, 429u, 500u, 502u, 503u, 504u}) BOOST_TEST_CONTEXT(s) { BOOST_TEST(transient(s)); }
  for (const unsigned s : {200u, 201u, 204u, 301u, 304u, 400u, 401u, 403u, 404u, 409u, 413u, 422u, 501u, 505u, 599u})
    BOOST_TEST_CONTEXT(s) { BOOST_TEST(!transient(s)); }
}

BOOST_AUTO_TEST_CASE(the_set_of_retryable_statuses_is_an_option_and_validated) {
  const rhttp::classifier only_503{503};
  BOOST_TEST(only_503(outcome<response>::from_value(make(503))));
  BOOST_TEST(!only_503(outcome<response>::from_value(make(502))));
  const rhttp::classifier none{};
  BOOST_TEST(none.retryable_status(503));
  const rhttp::classifier empty(std::initializer_list<unsigned>{});
  BOOST_TEST(!empty.retryable_status(503));
  BOOST_TEST(empty(outcome<error_code>::from_value(asio::error::connection_refused)));
  BOOST_CHECK_THROW(rhttp::classifier({200}), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::classifier({302}), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::classifier({600}), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::classifier({0}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(network_errors) {
  for (const error_code ec : {error_code(asio::error::connection_refused), error_code(asio::error::connection_reset),
                              error_code(asio::error::connection_aborted), error_code(asio::error::broken_pipe),
                              error_code(asio::error::timed_out), error_code(resilience::error::timeout),
                              error_code(beast::error::timeout), error_code(bhttp::error::end_of_stream),
                              error_code(asio::error::eof), error_code(asio::error::host_not_found_try_again),
                              error_code(bhttp::error::partial_message),  // the stream ended mid-response
                              error_code(1, ssl_stream_category)}) {      // stream_truncated: no close_notify
    BOOST_TEST_CONTEXT(ec.message()) {
      BOOST_TEST(transient(ec));
      BOOST_TEST(counts(ec));
    }
  }
}

BOOST_AUTO_TEST_CASE(tls_and_parse_errors_are_permanent) {
  for (const error_code ec :
       {error_code(2, ssl_stream_category),            // unspecified_system_error
        error_code(336151570, ssl_category),           // an OpenSSL handshake error
        error_code(bhttp::error::bad_version), error_code(bhttp::error::bad_status),
        error_code(bhttp::error::body_limit),
        error_code(asio::error::host_not_found), error_code(asio::error::access_denied),
        error_code(resilience::error::circuit_open)}) {
    BOOST_TEST_CONTEXT(ec.category().name() << ": " << ec.message()) { BOOST_TEST(!transient(ec)); }
  }
}

BOOST_AUTO_TEST_CASE(cancellation_is_never_transient_nor_a_breaker_failure) {
  for (const error_code ec : {error_code(asio::error::operation_aborted),
                              error_code(boost::system::errc::make_error_code(boost::system::errc::operation_canceled))}) {
    BOOST_TEST(!transient(ec));
    BOOST_TEST(!counts(ec));
    BOOST_TEST(!retry_if(outcome<error_code>::from_value(ec), context{}));
  }
}

BOOST_AUTO_TEST_CASE(outcomes_of_every_shape) {
  // A thrown system_error is judged by its code; another exception is permanent.
  const auto thrown = outcome<response>::from_error(asio::error::connection_reset);
  BOOST_TEST(retry_if(thrown));
  try {
    throw std::runtime_error("boom");
  } catch (...) {
    BOOST_TEST(!retry_if(outcome<response>::from_current_exception()));
  }
  // boost::system::result<response> and as_tuple's (error_code, response).
  using result = boost::system::result<response>;
  BOOST_TEST(retry_if(outcome<result>::from_value(result(make(503)))));
  BOOST_TEST(!retry_if(outcome<result>::from_value(result(make(404)))));
  BOOST_TEST(retry_if(outcome<result>::from_value(result(error_code(asio::error::eof)))));
  using tuple = std::tuple<error_code, response>;
  BOOST_TEST(retry_if(outcome<tuple>::from_value(tuple{error_code{}, make(504)})));
  BOOST_TEST(!retry_if(outcome<tuple>::from_value(tuple{error_code{}, make(200)})));
  BOOST_TEST(retry_if(outcome<tuple>::from_value(tuple{asio::error::connection_reset, make(200)})));
}

BOOST_AUTO_TEST_CASE(the_breaker_counts_5xx_and_errors_not_4xx) {
  for (const unsigned s : {500u, 501u, 502u, 503u, 504u, 599u}) BOOST_TEST_CONTEXT(s) { BOOST_TEST(counts(s)); }
  for (const unsigned s : {200u, 302u, 400u, 404u, 408u, 429u}) BOOST_TEST_CONTEXT(s) { BOOST_TEST(!counts(s)); }
  BOOST_TEST(counts(bhttp::error::bad_version));
  BOOST_TEST(counts(error_code(1, ssl_stream_category)));
}

BOOST_AUTO_TEST_CASE(idempotent_methods) {
  for (const auto v : {bhttp::verb::get, bhttp::verb::head, bhttp::verb::options, bhttp::verb::put,
                       bhttp::verb::delete_, bhttp::verb::trace})
    BOOST_TEST(rhttp::is_idempotent(bhttp::request<bhttp::empty_body>{v, "/", 11}));
  for (const auto v : {bhttp::verb::post, bhttp::verb::patch, bhttp::verb::connect})
    BOOST_TEST(!rhttp::is_idempotent(bhttp::request<bhttp::empty_body>{v, "/", 11}));
  bhttp::request<bhttp::string_body> keyed{bhttp::verb::post, "/orders", 11};
  keyed.set("Idempotency-Key", "8e03978e-40d5-43e8-bc93-6894a57f9324");
  BOOST_TEST(rhttp::is_idempotent(keyed));
  keyed.erase("Idempotency-Key");
  keyed.set("idempotency-key", "abc");  // field names are case-insensitive
  BOOST_TEST(rhttp::is_idempotent(keyed));
}

BOOST_AUTO_TEST_CASE(idempotency_rules) {
  const auto reset = outcome<response>::from_error(asio::error::connection_reset);
  const auto refused = outcome<response>::from_error(asio::error::connection_refused);
  const auto unavailable = outcome<response>::from_value(make(503));

  const auto decide = [&](const outcome<response>& o, std::optional<bool> idempotent, std::optional<bool> sent) {
    resilience::properties props;
    if (idempotent) props.set(rhttp::idempotent, *idempotent);
    if (sent) props.set(rhttp::request_may_have_been_sent, *sent);
    return retry_if(o, context{}.with(props));
  };
  // GET: retried after it may have been sent, and on a 503.
  BOOST_TEST(decide(reset, true, true));
  BOOST_TEST(decide(unavailable, true, true));
  BOOST_TEST(decide(unavailable, true, std::nullopt));
  // POST: not once it may have been sent...
  BOOST_TEST(!decide(reset, false, true));
  BOOST_TEST(!decide(reset, std::nullopt, true));
  // ...and a response proves it was sent, whatever the op said.
  BOOST_TEST(!decide(unavailable, false, false));
  BOOST_TEST(!decide(unavailable, std::nullopt, std::nullopt));
  // POST certainly not sent: retried.
  BOOST_TEST(decide(refused, false, false));
  BOOST_TEST(decide(refused, std::nullopt, std::nullopt));
  BOOST_TEST(retry_if(refused, context{}));  // no properties attached at all
  // With none attached, the outcome alone decides: a 503 is retried.
  BOOST_TEST(retry_if(unavailable, context{}));
  // POST with an Idempotency-Key: idempotent, retried.
  bhttp::request<bhttp::string_body> post{bhttp::verb::post, "/orders", 11};
  post.set("Idempotency-Key", "k-1");
  BOOST_TEST(decide(reset, rhttp::is_idempotent(post), true));
  // Permanent stays permanent, idempotent or not.
  BOOST_TEST(!decide(outcome<response>::from_value(make(404)), true, true));
}

BOOST_AUTO_TEST_SUITE_END()

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
  for (const duration w : waits) BOOST_TEST((w >= 10s && w <= 12s), "the server's 10 s, then up to the 2 s backoff");
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
