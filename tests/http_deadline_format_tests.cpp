// Deadlines in headers, without Beast: grpc-timeout and a milliseconds
// header parsed and formatted, and deadlines made from them.
#include "support.hpp"

#include <resilience/http/deadline_format.hpp>

#include <chrono>
#include <string>

using namespace std::chrono_literals;
namespace rhttp = resilience::http;
using resilience::duration;
using resilience::time_point;

BOOST_AUTO_TEST_SUITE(deadline_format)

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

BOOST_AUTO_TEST_SUITE_END()
