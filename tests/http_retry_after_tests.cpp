// Retry-After: HTTP dates in RFC 9110's three formats, and a header's value
// (delay-seconds or a date) read as a delay.
#include "support.hpp"

#include <resilience/http/retry_after.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

using namespace std::chrono_literals;
namespace rhttp = resilience::http;
using resilience::duration;
using resilience::test::at;
using resilience::test::rfc_example;

namespace {

using sys_seconds = std::chrono::sys_seconds;

// A "now" to read dates against.
const rhttp::wall_time now_2026 = at(2026, 11, 23, 12, 0, 0);

std::optional<sys_seconds> date(std::string_view v, rhttp::wall_time now = now_2026) {
  return rhttp::parse_http_date(v, now);
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
