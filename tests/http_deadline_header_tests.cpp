// A deadline header read from and written to Beast's fields.
#include "support.hpp"

#include <resilience/http/deadline_header.hpp>

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>

#include <chrono>
#include <stdexcept>

using namespace std::chrono_literals;
namespace bhttp = boost::beast::http;
namespace rhttp = resilience::http;
using resilience::time_point;

BOOST_AUTO_TEST_SUITE(deadline_header)

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
