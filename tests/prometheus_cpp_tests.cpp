// resilience::prometheus (prometheus_cpp.hpp): the same events and HTTP
// observations recorded into the library's own registry and, through the
// sink, into a prometheus::Registry. Both pages (prometheus_text() and
// prometheus-cpp's TextSerializer) are read by Prometheus' own Python parser:
// the same families and samples, with the values recorded.
#include <resilience/http/telemetry.hpp>
#include <resilience/metrics.hpp>
#include <resilience/prometheus.hpp>
#include <resilience/prometheus_cpp.hpp>

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

using namespace std::chrono_literals;
namespace rhttp = resilience::http;
namespace bhttp = boost::beast::http;

namespace {

// One line per family with samples ("# name type help") and per sample
// ("name{label="value",...} value"): labels sorted, le last, numbers (le's
// too) as Python's floats, so that 0.005 and 0.0050000000000000001 read alike.
constexpr const char* prometheus_cpp_parse_script = R"(
import sys
from prometheus_client.parser import text_string_to_metric_families as parse
for family in parse(open(sys.argv[1]).read()):
    if family.samples:
        print('# %s %s %s' % (family.name, family.type, family.documentation))
    for s in family.samples:
        ordered = sorted(s.labels.items(), key=lambda kv: (kv[0] == 'le', kv[0]))
        labels = ','.join('%s="%s"' % (k, repr(float(v)) if k == 'le' else v) for k, v in ordered)
        print('%s{%s} %r' % (s.name, labels, float(s.value)))
)";

std::set<std::string> prometheus_cpp_parsed(const std::string& page, const char* name) {
  const auto dir = std::filesystem::temp_directory_path() / ("resilience-prometheus-cpp-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "parse.py") << prometheus_cpp_parse_script;
  std::ofstream(dir / name) << page;
  const std::string command = std::string(RESILIENCE_TEST_PYTHON3) + " " + (dir / "parse.py").string() + " " +
                              (dir / name).string();
  FILE* out = ::popen(command.c_str(), "r");
  if (!out) throw std::runtime_error("cannot run " + command);
  std::set<std::string> lines;
  std::string line;
  for (int c; (c = std::fgetc(out)) != EOF;) {
    if (c != '\n') {
      line += static_cast<char>(c);
    } else {
      lines.insert(line);
      line.clear();
    }
  }
  const int status = ::pclose(out);
  std::filesystem::remove_all(dir);
  if (status != 0) throw std::runtime_error(command + " failed: the parser refused the page\n" + page);
  return lines;
}

std::string prometheus_cpp_missing(const std::set<std::string>& from, const std::set<std::string>& in) {
  std::string missing;
  for (const auto& line : from)
    if (!in.contains(line)) missing += line + '\n';
  return missing;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(prometheus_cpp)

BOOST_AUTO_TEST_CASE(the_sink_records_what_the_own_registry_records_under_the_same_names) {
  resilience::metrics own;
  prometheus::Registry registry;
  resilience::prometheus_cpp::registry_sink sink{registry};

  const auto to = rhttp::endpoint::https("api.example.com", 8443);
  auto replica = to;
  replica.address = "10.0.0.7";
  // Each observation, into both.
  const auto record = [&](auto&& each) {
    each(own.events("backend"), rhttp::client_meter{own}, rhttp::server_meter{own});
    each(sink.events("backend"), resilience::prometheus_cpp::client_meter{sink},
         resilience::prometheus_cpp::server_meter{sink});
  };
  record([&](resilience::event_sink& events, auto client, auto server) {
    resilience::event retried{resilience::event_kind::retry};
    retried.outcome = resilience::call_outcome::error;
    events.on_event(retried);
    events.on_event(retried);
    events.on_event(resilience::event{resilience::event_kind::circuit_opened});  // outcome none
    resilience::event refused{resilience::event_kind::request_refused};  // a status: labelled with it
    refused.status = 431;
    events.on_event(refused);
    client(rhttp::client_call_event{1, {}, 200, bhttp::verb::get, &to, 250ms});
    client(rhttp::client_call_event{2, {}, 503, bhttp::verb::get, &to, 500ms});
    client(rhttp::client_call_event{0, resilience::error::circuit_open, 0, bhttp::verb::post, &to, 0ms});
    client(rhttp::client_attempt_event{1, {}, 200, bhttp::verb::get, &replica, 125ms});
    server(rhttp::request_finished{200, 250ms, bhttp::verb::get});
    server(rhttp::request_finished{503, 2s, bhttp::verb::post});
    server(rhttp::client_phase::write);
  });

  std::ostringstream text;
  prometheus::TextSerializer{}.Serialize(text, registry.Collect());
  const auto cpp = prometheus_cpp_parsed(text.str(), "prometheus-cpp.txt");
  const auto ours = prometheus_cpp_parsed(resilience::prometheus_text(own), "own.txt");
  // (On failure, the lines one has and the other lacks.)
  BOOST_TEST(prometheus_cpp_missing(ours, cpp) == "", "in the own page only");
  BOOST_TEST(prometheus_cpp_missing(cpp, ours) == "", "in prometheus-cpp's page only");

  // The values themselves, as Prometheus reads prometheus-cpp's page.
  const auto has = [&](const std::string& line) {
    BOOST_TEST(cpp.contains(line), line);
  };
  has("# resilience_strategy_events counter Events reported by resilience strategies.");
  has("resilience_strategy_events_total{event_name=\"on_retry\",outcome=\"error\",pipeline_name=\"backend\","
      "strategy_name=\"retry\"} 2.0");
  has("resilience_strategy_events_total{event_name=\"on_circuit_opened\",outcome=\"none\",pipeline_name=\"backend\","
      "strategy_name=\"circuit_breaker\"} 1.0");
  has("resilience_strategy_events_total{event_name=\"on_request_refused\",http_response_status_code=\"431\","
      "outcome=\"none\",pipeline_name=\"backend\",strategy_name=\"http_server\"} 1.0");
  const std::string ok = "error_type=\"\",http_request_method=\"GET\",http_response_status_code=\"200\","
                         "server_address=\"api.example.com\",server_port=\"8443\",url_scheme=\"https\"";
  has("# http_client_request_duration_seconds histogram Duration of HTTP client requests.");
  has("http_client_request_duration_seconds_bucket{" + ok + ",le=\"0.1\"} 0.0");
  has("http_client_request_duration_seconds_bucket{" + ok + ",le=\"0.25\"} 1.0");  // bounds are inclusive
  has("http_client_request_duration_seconds_sum{" + ok + "} 0.25");
  has("http_client_request_duration_seconds_count{" + ok + "} 1.0");
  has("http_client_request_duration_seconds_count{error_type=\"503\",http_request_method=\"GET\","
      "http_response_status_code=\"503\",server_address=\"api.example.com\",server_port=\"8443\",url_scheme=\"https\"} 1.0");
  has("http_client_request_duration_seconds_count{error_type=\"circuit_open\",http_request_method=\"POST\","
      "http_response_status_code=\"\",server_address=\"api.example.com\",server_port=\"8443\",url_scheme=\"https\"} 1.0");
  has("resilience_http_client_attempt_duration_seconds_sum{error_type=\"\",http_request_method=\"GET\","
      "http_response_status_code=\"200\",network_peer_address=\"10.0.0.7\",server_address=\"api.example.com\","
      "server_port=\"8443\",url_scheme=\"https\"} 0.125");
  has("http_server_request_duration_seconds_bucket{error_type=\"503\",http_request_method=\"POST\","
      "http_response_status_code=\"503\",url_scheme=\"http\",le=\"inf\"} 1.0");
  has("http_server_request_duration_seconds_bucket{error_type=\"503\",http_request_method=\"POST\","
      "http_response_status_code=\"503\",url_scheme=\"http\",le=\"1.0\"} 0.0");
  has("resilience_http_server_slow_clients_total{client_phase=\"write\"} 1.0");
  has("resilience_http_server_slow_clients_total{client_phase=\"header\"} 0.0");
}

BOOST_AUTO_TEST_CASE(a_pipeline_name_must_not_be_empty) {
  prometheus::Registry registry;
  resilience::prometheus_cpp::registry_sink sink{registry};
  BOOST_CHECK_THROW(sink.events(""), std::invalid_argument);
  // The same name, the same sink.
  BOOST_TEST(&sink.events("a") == &sink.events("a"));
  BOOST_TEST(&sink.events("a") != &sink.events("b"));
}

BOOST_AUTO_TEST_SUITE_END()
