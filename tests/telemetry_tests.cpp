// The application's own instruments in a metrics registry, and
// OpenTelemetry's HTTP client and server metrics recorded into it.
#include "support.hpp"

#include <resilience/http/telemetry.hpp>
#include <resilience/metrics.hpp>
#include <resilience/prometheus.hpp>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

using namespace std::chrono_literals;
namespace rhttp = resilience::http;
namespace bhttp = boost::beast::http;
using resilience::metric_kind;
using resilience::metric_labels;

namespace {

const resilience::metric_family* family(const resilience::metrics_snapshot& s, const std::string& name) {
  for (const auto& f : s.families)
    if (f.name == name) return &f;
  return nullptr;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(instruments)

BOOST_AUTO_TEST_CASE(counters_gauges_and_histograms_are_served_from_the_moment_they_are_made) {
  resilience::metrics registry;
  const auto quotes = registry.counter("gateway.quotes", {{"outcome", "ok"}}, "Quotes served.");
  const auto failed = registry.counter("gateway.quotes", {{"outcome", "failed"}});
  const auto in_flight = registry.gauge("gateway.in_flight");
  const auto latency = registry.histogram("gateway.upstream.wait", {}, "Waits.", resilience::http_duration_buckets());
  std::string page = resilience::prometheus_text(registry);
  BOOST_TEST(contains(page, "gateway_quotes_total{outcome=\"failed\"} 0\n"), page);
  BOOST_TEST(contains(page, "gateway_quotes_total{outcome=\"ok\"} 0\n"), page);
  BOOST_TEST(contains(page, "# TYPE gateway_in_flight gauge\ngateway_in_flight 0\n"), page);
  BOOST_TEST(contains(page, "gateway_upstream_wait_seconds_count 0\n"), page);

  quotes.add();
  quotes.add(2);
  registry.counter("gateway.quotes", {{"outcome", "ok"}}).add();  // the same series
  in_flight.add(3);
  in_flight.add(-5);
  latency.record(7ms);
  latency.record(30s);
  BOOST_TEST(quotes.value() == 4u);
  BOOST_TEST(failed.value() == 0u);
  page = resilience::prometheus_text(registry);
  BOOST_TEST(contains(page, "gateway_quotes_total{outcome=\"ok\"} 4\n"), page);
  BOOST_TEST(contains(page, "gateway_in_flight -2\n"), page);
  BOOST_TEST(contains(page, "gateway_upstream_wait_seconds_bucket{le=\"0.005\"} 0\n"), page);
  BOOST_TEST(contains(page, "gateway_upstream_wait_seconds_bucket{le=\"0.01\"} 1\n"), page);
  BOOST_TEST(contains(page, "gateway_upstream_wait_seconds_bucket{le=\"10\"} 1\n"), page);
  BOOST_TEST(contains(page, "gateway_upstream_wait_seconds_bucket{le=\"+Inf\"} 2\n"), page);
  BOOST_TEST(contains(page, "gateway_upstream_wait_seconds_sum 30.007\n"), page);
  BOOST_TEST(contains(page, "# HELP gateway_quotes_total Quotes served.\n"), page);

  const auto snap = registry.snapshot();
  const auto* f = family(snap, "gateway.quotes");
  BOOST_REQUIRE(f);
  BOOST_TEST((f->kind == metric_kind::counter));
  BOOST_TEST(f->samples.size() == 2u);
}

BOOST_AUTO_TEST_CASE(bad_names_and_changed_shapes_are_refused) {
  resilience::metrics registry;
  BOOST_CHECK_THROW(registry.counter(""), std::invalid_argument);
  BOOST_CHECK_THROW(registry.counter("9lives"), std::invalid_argument);
  BOOST_CHECK_THROW(registry.counter("has space"), std::invalid_argument);
  BOOST_CHECK_THROW(registry.counter("ok", {{"bad-label", "x"}}), std::invalid_argument);
  BOOST_CHECK_THROW(registry.counter("resilience.strategy.events"), std::invalid_argument);
  BOOST_CHECK_THROW(registry.counter("resilience_strategy_events"), std::invalid_argument);  // written alike
  registry.counter("app.requests");
  BOOST_CHECK_THROW(registry.counter("app_requests"), std::invalid_argument);
  BOOST_CHECK_THROW(registry.counter("x", {{"a.b", "1"}, {"a_b", "2"}}), std::invalid_argument);
  BOOST_CHECK_THROW(registry.counter("y", {{"__name", "1"}}), std::invalid_argument);
  BOOST_CHECK_THROW(registry.histogram("z", {{"le", "1"}}), std::invalid_argument);
  registry.counter("calls", {{"peer", "a"}});
  BOOST_CHECK_THROW(registry.gauge("calls", {{"peer", "a"}}), std::invalid_argument);  // another kind
  BOOST_CHECK_THROW(registry.counter("calls", {{"host", "a"}}), std::invalid_argument);  // other label names
  registry.histogram("waits", {}, {}, resilience::http_duration_buckets());
  BOOST_CHECK_THROW(registry.histogram("waits"), std::invalid_argument);  // other bounds
  const resilience::duration unordered[] = {2s, 1s};
  BOOST_CHECK_THROW(registry.histogram("other", {}, {}, unordered), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()

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

BOOST_AUTO_TEST_SUITE_END()
