// OpenTelemetry's HTTP client and server metrics, recorded into a metrics
// registry.
#include "support.hpp"

#include <resilience/http/telemetry.hpp>
#include <resilience/metrics.hpp>
#include <resilience/prometheus.hpp>

#include <chrono>
#include <string>

using namespace std::chrono_literals;
namespace rhttp = resilience::http;
namespace bhttp = boost::beast::http;
using resilience::test::contains;

BOOST_AUTO_TEST_SUITE(http_telemetry)

BOOST_AUTO_TEST_CASE(a_client_call_is_recorded_with_opentelemetry_attributes) {
  resilience::metrics registry;
  rhttp::client_meter meter{registry};
  const auto to = rhttp::endpoint::https("api.example.com", 8443);
  meter(rhttp::client_call_event{2, {}, 200, bhttp::verb::get, &to, 120ms});
  meter(rhttp::client_call_event{1, {}, 503, bhttp::verb::get, &to, 30ms});
  meter(rhttp::client_call_event{0, resilience::error::circuit_open, 0, bhttp::verb::post, &to, 0ms});
  meter(rhttp::client_call_event{1, boost::asio::error::connection_refused, 0, bhttp::verb::unknown, &to, 1ms});
  const std::string page = resilience::prometheus_text(registry);
  const std::string common = "server_address=\"api.example.com\",server_port=\"8443\",url_scheme=\"https\"";
  BOOST_TEST(contains(page, "# TYPE http_client_request_duration_seconds histogram"), page);
  BOOST_TEST(contains(page, "http_client_request_duration_seconds_count{http_request_method=\"GET\"," + common +
                                ",http_response_status_code=\"200\",error_type=\"\"} 1"),
             page);
  BOOST_TEST(contains(page, "http_client_request_duration_seconds_count{http_request_method=\"GET\"," + common +
                                ",http_response_status_code=\"503\",error_type=\"503\"} 1"),
             page);
  BOOST_TEST(contains(page, "http_client_request_duration_seconds_count{http_request_method=\"POST\"," + common +
                                ",http_response_status_code=\"\",error_type=\"circuit_open\"} 1"),
             page);
  BOOST_TEST(contains(page, "http_request_method=\"_OTHER\""), page);
  BOOST_TEST(contains(page, "error_type=\"system:111\""), page);
  BOOST_TEST(contains(page, "le=\"0.005\""), "OpenTelemetry's buckets");
  BOOST_TEST(rhttp::otel_error_type(boost::asio::error::operation_aborted) == "cancelled");
}

BOOST_AUTO_TEST_CASE(an_attempt_is_recorded_with_the_replica_it_went_to) {
  resilience::metrics registry;
  rhttp::client_meter meter{registry};
  const rhttp::endpoint replica{"pricing.internal", 8080, false, "10.0.1.2"};
  const auto single = rhttp::endpoint::http("10.0.0.9", 8080);
  meter(rhttp::client_attempt_event{1, {}, 503, bhttp::verb::get, &replica, 4ms, "pricing"});
  meter(rhttp::client_attempt_event{2, {}, 200, bhttp::verb::get, &replica, 6ms, "pricing"});
  meter(rhttp::client_attempt_event{1, {}, 200, bhttp::verb::get, &single, 6ms, {}});
  const std::string page = resilience::prometheus_text(registry);
  const std::string at = "server_address=\"pricing.internal\",server_port=\"8080\",url_scheme=\"http\"";
  BOOST_TEST(contains(page, "resilience_http_client_attempt_duration_seconds_count{http_request_method=\"GET\"," + at +
                                ",http_response_status_code=\"503\",error_type=\"503\","
                                "network_peer_address=\"10.0.1.2\"} 1"),
             page);
  BOOST_TEST(contains(page, "http_response_status_code=\"200\",error_type=\"\",network_peer_address=\"10.0.1.2\"} 1"),
             page);
  BOOST_TEST((contains(page, "server_address=\"10.0.0.9\"") && contains(page, "network_peer_address=\"10.0.0.9\"} 1")),
             "an endpoint not resolved to an address is its own peer: " << page);
  BOOST_TEST(!contains(page, "http_client_request_duration_seconds_count"), "attempts are not calls");
}

BOOST_AUTO_TEST_CASE(a_server_request_is_recorded_and_only_5xx_is_an_error) {
  resilience::metrics registry;
  rhttp::server_meter meter{registry};
  meter(rhttp::request_finished{200, 5ms, bhttp::verb::get});
  meter(rhttp::request_finished{200, 7ms, bhttp::verb::get});
  meter(rhttp::request_finished{404, 1ms, bhttp::verb::get});
  meter(rhttp::request_finished{504, 100ms, bhttp::verb::get});
  meter(rhttp::request_finished{431, {}, bhttp::verb::unknown});
  const std::string page = resilience::prometheus_text(registry);
  BOOST_TEST(contains(page, "http_server_request_duration_seconds_count{http_request_method=\"GET\",url_scheme=\"http\","
                            "http_response_status_code=\"200\",error_type=\"\"} 2"),
             page);
  BOOST_TEST(contains(page, "http_response_status_code=\"404\",error_type=\"\"} 1"), page);
  BOOST_TEST(contains(page, "http_response_status_code=\"504\",error_type=\"504\"} 1"), page);
  BOOST_TEST(contains(page, "http_request_method=\"_OTHER\",url_scheme=\"http\",http_response_status_code=\"431\""),
             page);
}

BOOST_AUTO_TEST_CASE(slow_clients_are_counted_by_phase_from_zero) {
  resilience::metrics registry;
  const rhttp::server_meter meter{registry};
  std::string page = resilience::prometheus_text(registry);
  for (const char* phase : {"header", "body", "write"}) {
    BOOST_TEST(contains(page, std::string("resilience_http_server_slow_clients_total{client_phase=\"") + phase + "\"} 0\n"),
               page);
  }
  meter(rhttp::client_phase::body);
  meter(rhttp::client_phase::body);
  meter(rhttp::client_phase::write);
  page = resilience::prometheus_text(registry);
  BOOST_TEST(contains(page, "resilience_http_server_slow_clients_total{client_phase=\"body\"} 2\n"), page);
  BOOST_TEST(contains(page, "resilience_http_server_slow_clients_total{client_phase=\"write\"} 1\n"), page);
  BOOST_TEST(contains(page, "resilience_http_server_slow_clients_total{client_phase=\"header\"} 0\n"), page);
}

BOOST_AUTO_TEST_SUITE_END()
