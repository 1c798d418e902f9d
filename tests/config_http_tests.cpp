// The HTTP library's sections of a configuration document (config.hpp,
// built with resilience::http): every key of http_client, http_server and
// upstream read through its setter and written back, refusals placed at
// their line and column, and a client or an upstream carried over a reload
// while its options stay.
#include "support.hpp"

#include <resilience/config.hpp>
#include <resilience/http/client.hpp>
#include <resilience/http/server_options.hpp>
#include <resilience/http/upstream.hpp>

#include <string>
#include <variant>
#include <vector>

using namespace std::chrono_literals;
namespace config = resilience::config;

namespace {

// Every key of both sections, none at its default.
const char* const config_http_every_key = R"({
  "http_client": {
    "api": { "total_timeout": "20s", "attempt_timeout": "2s", "max_retries": 5,
             "backoff": { "shape": "exponential", "base": "100ms", "factor": 3, "cap": "5s" }, "jitter": "equal",
             "fit_to_time_left": false, "max_retry_after": "10s", "jitter_retry_after": false,
             "max_host_hold": "3s", "retry_statuses": [503, 429],
             "breaker": { "failure_ratio": 0.25, "minimum_calls": 8, "count_window": 40, "open_duration": "9s" },
             "breaker_limits": { "max_breakers": 64, "idle_after": "2m" },
             "adaptive_throttle": { "k": 2, "window": "1m" },
             "deadline_header": { "format": "milliseconds", "name": "x-timeout-ms" }, "deadline_margin": "20ms",
             "max_response_body": 1048576, "max_response_header": 4096,
             "pool": { "max_connections_per_host": 16, "idle_timeout": "30s", "resolve_timeout": "1s",
                       "wait_for_connection": false, "verify_peer": false },
             "retry_budget_per_host": { "kind": "token", "max_tokens": 20, "token_ratio": 0.5 } },
    "grpc": { "deadline_header": { "format": "grpc-timeout" }, "retry_budget_per_host": "none" },
    "ratio": { "retry_budget_per_host": { "ratio": 0.3 } }
  },
  "http_server": {
    "front": { "max_concurrent": 50, "retry_after": "3s", "problem_details": true,
               "inbound_deadline": { "format": "milliseconds", "name": "x-deadline-ms" }, "max_deadline": "5s",
               "header_read_timeout": "2s", "body_read_timeout": "4s", "write_timeout": "6s", "idle_timeout": "7s",
               "max_header_bytes": 16384, "max_body_bytes": 0, "max_connections": 500, "drain_grace": "1s" }
  }
})";

// Every key of the upstream section, none at its default.
const char* const config_upstream_every_key = R"({
  "upstream": {
    "pricing": { "replicas": [ { "host": "10.0.0.7", "port": 8080 },
                               { "host": "pricing.internal", "port": 8443, "tls": true, "address": "10.0.0.8" } ],
                 "resolve": { "host": "pricing.svc", "port": 9090, "tls": true }, "resolve_every": "5s",
                 "balance": "round_robin", "ewma_decay": "3s", "warm_up": "0s", "panic_threshold": 30,
                 "outlier_detection": { "consecutive_5xx": 7, "consecutive_gateway_failure": 3, "interval": "2s",
                                        "base_ejection_time": "15s", "max_ejection_time": "2m",
                                        "max_ejection_percent": 40,
                                        "success_rate": { "stdev_factor": 2.5, "minimum_hosts": 3, "request_volume": 20 },
                                        "failure_percentage": { "threshold": 60, "minimum_hosts": 4, "request_volume": 10 },
                                        "probe_ejected": false } },
    "dns": { "resolve": { "host": "dns.svc" } },
    "rules": { "replicas": [ { "host": "a", "tls": true } ],
               "outlier_detection": { "success_rate": { "minimum_hosts": 2 }, "failure_percentage": {} } }
  }
})";

std::string config_http_refusal(std::string_view text) {
  try {
    config::parse(text);
  } catch (const config::error& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(config_document)

BOOST_AUTO_TEST_CASE(every_http_key_reaches_its_option) {
  const auto s = config::parse(config_http_every_key);
  const auto& c = s->http_client("api").options();
  BOOST_TEST((c.total_timeout() == 20s));
  BOOST_TEST((c.attempt_timeout() == 2s));
  BOOST_TEST(c.max_retries() == 5u);
  BOOST_TEST((c.backoff().first() == 100ms));
  BOOST_TEST(c.backoff().factor() == 3.0);
  BOOST_TEST((c.backoff().cap() == 5s));
  BOOST_TEST((c.backoff().jitter_kind() == resilience::jitter::equal));
  BOOST_TEST(!c.fit_to_time_left());
  BOOST_TEST((c.retry_after().max_retry_after() == 10s));
  BOOST_TEST(!c.retry_after().is_jittered());
  BOOST_TEST((c.max_host_hold() == 3s));
  BOOST_TEST((c.retry_classifier().retryable_statuses() == std::vector<unsigned>{429, 503}));
  BOOST_TEST(!c.retry_classifier().retryable_status(500));
  BOOST_TEST(*c.breaker().failure_ratio() == 0.25);
  BOOST_TEST(c.breaker().minimum_calls() == 8u);
  BOOST_TEST(c.breaker().count_window() == 40u);
  BOOST_TEST((c.breaker().fixed_open_duration() == 9s));
  BOOST_TEST(c.breaker_limits().max_breakers() == 64u);
  BOOST_TEST((c.breaker_limits().idle_after() == 2min));
  BOOST_TEST(c.adaptive_throttle()->k() == 2.0);
  BOOST_TEST((c.adaptive_throttle()->window() == 1min));
  BOOST_TEST(c.deadline_header()->name() == "x-timeout-ms");
  BOOST_TEST(!c.deadline_header()->is_grpc_timeout());
  BOOST_TEST((c.deadline_margin() == 20ms));
  BOOST_TEST(c.max_response_body() == 1048576u);
  BOOST_TEST(c.max_response_header() == 4096u);
  BOOST_TEST(c.pool().max_connections_per_host() == 16u);
  BOOST_TEST((c.pool().idle_timeout() == 30s));
  BOOST_TEST((c.pool().resolve_timeout() == 1s));
  BOOST_TEST(!c.pool().wait_for_connection());
  BOOST_TEST(!c.pool().verify_peer());
  const auto& tokens = std::get<resilience::http::retry_token_budget_settings>(c.budget_per_host());
  BOOST_TEST(tokens.max_tokens == 20u);
  BOOST_TEST(tokens.token_ratio == 0.5);

  const auto& grpc = s->http_client("grpc").options();
  BOOST_TEST(grpc.deadline_header()->is_grpc_timeout());
  BOOST_TEST(grpc.budget_per_host().index() == 0u, "none");
  BOOST_TEST(std::get<resilience::retry_ratio_budget_options>(s->http_client("ratio").options().budget_per_host())
                 .ratio() == 0.3);

  const auto& front = s->http_server("front");
  BOOST_TEST(front.max_concurrent() == 50u);
  BOOST_TEST((front.retry_after() == 3s));
  BOOST_TEST(front.problem_details());
  BOOST_TEST(front.inbound_deadline().name() == "x-deadline-ms");
  BOOST_TEST((front.max_deadline() == 5s));
  BOOST_TEST((front.header_read_timeout() == 2s));
  BOOST_TEST((front.body_read_timeout() == 4s));
  BOOST_TEST((front.write_timeout() == 6s));
  BOOST_TEST((front.idle_timeout() == 7s));
  BOOST_TEST(front.max_header_bytes() == 16384u);
  BOOST_TEST(front.max_body_bytes() == 0u);
  BOOST_TEST(front.max_connections() == 500u);
  BOOST_TEST((front.drain_grace() == 1s));
  BOOST_CHECK_THROW(s->http_client("nope"), std::out_of_range);
  BOOST_CHECK_THROW(s->http_server("api"), std::out_of_range);
}

// Written out (defaults included) and read back, to the same text; an empty
// entry is the C++ default, a margin not given stays not given.
BOOST_AUTO_TEST_CASE(http_sections_write_every_option_and_read_it_back) {
  for (const char* document : {config_http_every_key, R"({"http_client": {"a": {}}, "http_server": {"s": {}}})"}) {
    const auto first = config::parse(document);
    const std::string text = first->document_text();
    BOOST_TEST(config::parse(text)->document_text() == text);
  }
  const auto defaults = config::parse(R"({"http_client": {"a": {"attempt_timeout": "40ms"}}, "http_server": {"s": {}}})");
  const auto again = config::parse(defaults->document_text());
  const auto& standard = resilience::http::client_options::standard();
  const auto& a = again->http_client("a").options();
  BOOST_TEST(!a.deadline_margin_given());
  BOOST_TEST(a.max_retries() == standard.max_retries());
  BOOST_TEST((a.retry_classifier().retryable_statuses() == standard.retry_classifier().retryable_statuses()));
  BOOST_TEST((a.breaker().time_window() == standard.breaker().time_window()));
  BOOST_TEST(a.budget_per_host().index() == standard.budget_per_host().index());
  BOOST_TEST(!a.adaptive_throttle());
  BOOST_TEST(!a.deadline_header());
  BOOST_TEST(again->http_server("s").inbound_deadline().is_grpc_timeout());
  BOOST_TEST((again->http_server("s").retry_after() == resilience::http::server_options{}.retry_after()));
}

BOOST_AUTO_TEST_CASE(refused_http_documents_say_where_and_why) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"http_client": {"a": {"attempt_timeout": "40s"}}})",
       "http_client.a.attempt_timeout at 1:43: must not be longer than total_timeout (it could never fire)"},
      {R"({"http_client": {"a": {"total_timeout": "1s"}}})",
       "http_client.a.attempt_timeout at 1:23: must not be longer than total_timeout"},
      {R"({"http_client": {"a": {"deadline_margin": "10s"}}})",
       "http_client.a.deadline_margin at 1:43: must be shorter than attempt_timeout"},
      {R"({"http_client": {"a": {"retry_statuses": [503, 200]}}})",
       "http_client.a.retry_statuses[1] at 1:48: a retryable status must be 400 to 599, not 200"},
      {R"({"http_client": {"a": {"retry_statuses": 503}}})",
       "http_client.a.retry_statuses at 1:42: must be an array of HTTP statuses (400 to 599)"},
      {R"({"http_client": {"a": {"max_retries": 101}}})", "http_client.a.max_retries at 1:39: must be at most 100"},
      {R"({"http_client": {"a": {"deadline_header": {"format": "seconds"}}}})",
       "http_client.a.deadline_header.format at 1:54: must be grpc-timeout or milliseconds"},
      {R"({"http_client": {"a": {"deadline_header": {"format": "milliseconds"}}}})",
       "http_client.a.deadline_header.name at 1:43: is required for the format milliseconds"},
      {R"({"http_client": {"a": {"deadline_header": {"format": "milliseconds", "name": "x y"}}}})",
       "http_client.a.deadline_header.name at 1:78: \"x y\" is not a valid header name"},
      {R"({"http_client": {"a": {"pool": {"max_connections_per_host": 0}}}})",
       "http_client.a.pool.max_connections_per_host at 1:61: must be in [1, 65535]"},
      {R"({"http_client": {"a": {"pool": {"max_conn": 1}}}})",
       "http_client.a.pool.max_conn at 1:45: unknown key (known: max_connections_per_host, idle_timeout, "
       "resolve_timeout, wait_for_connection, verify_peer)"},
      {R"({"http_client": {"a": {"breaker": {"count_window": 10}}}})",
       "http_client.a.breaker at 1:35: minimum_calls (20) must not exceed count_window (10)"},
      {R"({"http_client": {"a": {"retry_budget_per_host": "off"}}})",
       "http_client.a.retry_budget_per_host at 1:49: must be \"none\" or an object (kind ratio or token)"},
      {R"({"http_client": {"a": {"retry_budget_per_host": {"kind": "leaky"}}}})",
       "http_client.a.retry_budget_per_host.kind at 1:58: must be ratio or token"},
      {R"({"http_client": {"a": {"max_retry": 3}}})", "http_client.a.max_retry at 1:37: unknown key (known: total_timeout,"},
      {R"({"http_server": {"s": {"retry_after": "1500ms"}}})",
       "http_server.s.retry_after at 1:39: must be whole seconds, such as \"1s\""},
      {R"({"http_server": {"s": {"inbound_deadline": null}}})", "http_server.s.inbound_deadline at 1:44: must be an object"},
      {R"({"http_server": {"s": {"max_header_bytes": 4294967296}}})",
       "http_server.s.max_header_bytes at 1:44: must be at most 4294967295"},
      {R"({"http_server": {"s": {"max_connections": 0}}})", "http_server.s.max_connections at 1:43: must be at least 1"},
      {R"({"http_servers": {}})", "http_servers at 1:18: unknown section (known: retry_budget, breaker, bulkhead, "
                                  "rate_limiter, adaptive_throttle, timeout, retry, hedging, http_client, http_server, "
                                  "upstream)"},
  };
  for (const auto& [document, expected] : cases) {
    const std::string what = config_http_refusal(document);
    BOOST_TEST(what.find(expected) == 0u, document << "\n  gave: " << what << "\n  want: " << expected);
  }
}

BOOST_AUTO_TEST_CASE(every_upstream_key_reaches_its_option) {
  namespace rhttp = resilience::http;
  const auto s = config::parse(config_upstream_every_key);
  const auto& u = s->upstream("pricing").options();
  BOOST_TEST(s->upstream("pricing").name() == "pricing", "the entry's name");
  BOOST_TEST(u.replicas().size() == 2u);
  BOOST_TEST(u.replicas()[0].host == "10.0.0.7");
  BOOST_TEST(u.replicas()[0].port == 8080u);
  BOOST_TEST(!u.replicas()[0].tls);
  BOOST_TEST(u.replicas()[0].address.empty());
  BOOST_TEST(u.replicas()[1].host == "pricing.internal");
  BOOST_TEST(u.replicas()[1].port == 8443u);
  BOOST_TEST(u.replicas()[1].tls);
  BOOST_TEST(u.replicas()[1].address == "10.0.0.8");
  BOOST_TEST(u.resolved_name()->host == "pricing.svc");
  BOOST_TEST(u.resolved_name()->port == 9090u);
  BOOST_TEST(u.resolved_name()->tls);
  BOOST_TEST((u.resolve_every() == 5s));
  BOOST_TEST((u.balance() == rhttp::balancer::round_robin));
  BOOST_TEST((u.ewma_decay() == 3s));
  BOOST_TEST((u.warm_up() == 0s));
  BOOST_TEST(u.panic_threshold() == 30u);
  const auto& d = u.outlier_detection();
  BOOST_TEST(d.consecutive_5xx() == 7u);
  BOOST_TEST(d.consecutive_gateway_failure() == 3u);
  BOOST_TEST((d.interval() == 2s));
  BOOST_TEST((d.base_ejection_time() == 15s));
  BOOST_TEST((d.max_ejection_time() == 2min));
  BOOST_TEST(d.max_ejection_percent() == 40u);
  BOOST_TEST(d.success_rate_ejection()->stdev_factor == 2.5);
  BOOST_TEST(d.success_rate_ejection()->minimum_hosts == 3u);
  BOOST_TEST(d.success_rate_ejection()->request_volume == 20u);
  BOOST_TEST(d.failure_percentage_ejection()->threshold == 60u);
  BOOST_TEST(d.failure_percentage_ejection()->minimum_hosts == 4u);
  BOOST_TEST(d.failure_percentage_ejection()->request_volume == 10u);
  BOOST_TEST(!d.probe_ejected());

  // Left out: the C++ defaults (a port the scheme's, a rule's numbers the setter's).
  const rhttp::upstream_options defaults;
  const auto& dns = s->upstream("dns").options();
  BOOST_TEST(dns.replicas().empty());
  BOOST_TEST(dns.resolved_name()->port == rhttp::endpoint::http("x").port);
  BOOST_TEST(!dns.resolved_name()->tls);
  BOOST_TEST((dns.resolve_every() == defaults.resolve_every()));
  BOOST_TEST((dns.balance() == defaults.balance()));
  BOOST_TEST(!dns.outlier_detection().success_rate_ejection());
  BOOST_TEST(!dns.outlier_detection().failure_percentage_ejection());
  BOOST_TEST(dns.outlier_detection().probe_ejected());
  const auto& rules = s->upstream("rules").options();
  BOOST_TEST(rules.replicas()[0].port == rhttp::endpoint::https("x").port);
  const auto standard = rhttp::outlier_detection_options{}.success_rate().failure_percentage();
  BOOST_TEST(rules.outlier_detection().success_rate_ejection()->minimum_hosts == 2u);
  BOOST_TEST(rules.outlier_detection().success_rate_ejection()->stdev_factor ==
             standard.success_rate_ejection()->stdev_factor);
  BOOST_TEST(rules.outlier_detection().failure_percentage_ejection()->threshold ==
             standard.failure_percentage_ejection()->threshold);

  static const config::name_key pricing{"pricing"};
  BOOST_TEST(&s->upstream(pricing) == &s->upstream("pricing"));
  BOOST_CHECK_THROW(s->upstream("nope"), std::out_of_range);
  BOOST_CHECK_THROW(s->upstream(config::name_key{"api"}), std::out_of_range);
}

BOOST_AUTO_TEST_CASE(the_upstream_section_writes_every_option_and_reads_it_back) {
  for (const char* document : {config_upstream_every_key, R"({"upstream": {"u": {"resolve": {"host": "u.svc"}}}})"}) {
    const auto first = config::parse(document);
    const std::string text = first->document_text();
    BOOST_TEST(config::parse(text)->document_text() == text);
  }
  const auto again = config::parse(config::parse(config_upstream_every_key)->document_text());
  BOOST_TEST(again->upstream("pricing").options().replicas()[1].address == "10.0.0.8");
  BOOST_TEST(again->upstream("pricing").options().outlier_detection().success_rate_ejection()->stdev_factor == 2.5);
  BOOST_TEST(!again->upstream("dns").options().outlier_detection().success_rate_ejection());
}

BOOST_AUTO_TEST_CASE(refused_upstreams_say_where_and_why) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"upstream": {"u": {}}})", "upstream.u at 1:20: the options name no replica and no name to resolve"},
      {R"({"upstream": {"u": {"replicas": []}}})",
       "upstream.u at 1:20: the options name no replica and no name to resolve"},
      {R"({"upstream": {"u": {"replicas": [{"host": "a"}, {"host": "b c"}]}}})",
       "upstream.u.replicas[1].host at 1:58: must be a name or an address"},
      {R"({"upstream": {"u": {"replicas": [{"host": "a", "port": 0}]}}})",
       "upstream.u.replicas[0].port at 1:56: must not be 0"},
      {R"({"upstream": {"u": {"replicas": [{"host": "a", "port": 65536}]}}})",
       "upstream.u.replicas[0].port at 1:56: must be at most 65535"},
      {R"({"upstream": {"u": {"replicas": [{"port": 80}]}}})", "upstream.u.replicas[0].host at 1:34: is required"},
      {R"({"upstream": {"u": {"replicas": {"host": "a"}}}})",
       "upstream.u.replicas at 1:33: must be an array of endpoints"},
      {R"({"upstream": {"u": {"resolve": {"host": "a", "address": "10.0.0.1"}}}})",
       "upstream.u.resolve.address at 1:57: unknown key (known: host, port, tls)"},
      {R"({"upstream": {"u": {"resolve": {"host": "a"}, "balance": "random"}}})",
       "upstream.u.balance at 1:58: must be peak_ewma or round_robin"},
      {R"({"upstream": {"u": {"resolve": {"host": "a"}, "panic_threshold": 101}}})",
       "upstream.u.panic_threshold at 1:66: must be at most 100"},
      {R"({"upstream": {"u": {"resolve": {"host": "a"}, "resolve_every": "0s"}}})",
       "upstream.u.resolve_every at 1:64: must be positive"},
      {R"({"upstream": {"u": {"resolve": {"host": "a"}, "outlier_detection": {"interval": "0s"}}}})",
       "upstream.u.outlier_detection.interval at 1:81: must be positive"},
      {R"({"upstream": {"u": {"resolve": {"host": "a"}, "outlier_detection": {"max_ejection_percent": 101}}}})",
       "upstream.u.outlier_detection.max_ejection_percent at 1:93: must be at most 100"},
      {R"({"upstream": {"u": {"resolve": {"host": "a"}, "outlier_detection": {"success_rate": {"minimum_hosts": 0}}}}})",
       "upstream.u.outlier_detection.success_rate.minimum_hosts at 1:103: must be at least 1"},
      {R"({"upstream": {"u": {"resolve": {"host": "a"}, "outlier_detection": {"failure_percentage": {"threshold": 101}}}}})",
       "upstream.u.outlier_detection.failure_percentage.threshold at 1:105: must be at most 100"},
      {R"({"upstream": {"u": {"resolve": {"host": "a"}, "name": "b"}}})",
       "upstream.u.name at 1:55: unknown key (known: replicas, resolve,"},
  };
  for (const auto& [document, expected] : cases) {
    const std::string what = config_http_refusal(document);
    BOOST_TEST(what.find(expected) == 0u, document << "\n  gave: " << what << "\n  want: " << expected);
  }
  const std::string long_name(201, 'n');
  BOOST_TEST(config_http_refusal(R"({"upstream": {")" + long_name + R"(": {"resolve": {"host": "a"}}}})")
                 .find("upstream." + long_name + " at 1:") == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(config_reload)

// A client whose options are written the same (a default spelt out
// included) is the same client after a reload, with its pool and breakers;
// one whose options changed is a new client, and a call holding the old
// snapshot keeps the old one.
BOOST_AUTO_TEST_CASE(an_http_client_survives_a_reload_where_its_options_stay) {
  config::live_config live{R"({"http_client": {"a": {"max_retries": 2}, "b": {"max_retries": 2}}})"};
  const auto before = live.current();
  resilience::http::client* const a = &before->http_client("a");
  resilience::http::client* const b = &before->http_client("b");
  BOOST_TEST(live.reload(R"({"http_client": {"a": {"max_retries": 2, "total_timeout": "30s"}, "b": {"max_retries": 4}},
                             "http_server": {"s": {"max_concurrent": 8}}})")
                 .accepted);
  const auto after = live.current();
  BOOST_TEST(&after->http_client("a") == a, "unchanged: kept");
  BOOST_TEST(&after->http_client("b") != b, "changed: a new client");
  BOOST_TEST(after->http_client("b").options().max_retries() == 4u);
  BOOST_TEST(before->http_client("b").options().max_retries() == 2u, "the old snapshot keeps its client");
  BOOST_TEST(after->http_server("s").max_concurrent() == 8u);

  const auto refused = live.reload(R"({"http_client": {"a": {"max_retries": 2, "attempt_timeout": "1m"}}})");
  BOOST_TEST(!refused.accepted);
  BOOST_TEST(refused.reason.find("http_client.a.attempt_timeout at 1:61: must not be longer") == 0u, refused.reason);
  BOOST_TEST(live.current() == after, "the running snapshot stays");
}

// An upstream written the same is the same replica set after a reload (its
// ejections, latencies and resolution kept); one whose options changed is new.
BOOST_AUTO_TEST_CASE(an_upstream_survives_a_reload_where_its_options_stay) {
  config::live_config live{R"({"upstream": {"a": {"resolve": {"host": "a.svc"}},
                                             "b": {"replicas": [{"host": "10.0.0.1"}]}}})"};
  const auto before = live.current();
  const auto a = before->upstream("a").core();
  const auto b = before->upstream("b").core();
  BOOST_TEST(live.reload(R"({"upstream": {"a": {"resolve": {"host": "a.svc", "port": 80}, "warm_up": "10s"},
                                          "b": {"replicas": [{"host": "10.0.0.2"}]}}})")
                 .accepted);
  const auto after = live.current();
  BOOST_TEST(after->upstream("a").core() == a, "unchanged (a default spelt out): kept");
  BOOST_TEST(after->upstream("b").core() != b, "changed: a new replica set");
  BOOST_TEST(after->upstream("b").options().replicas()[0].host == "10.0.0.2");
  BOOST_TEST(before->upstream("b").options().replicas()[0].host == "10.0.0.1", "the old snapshot keeps its own");

  const auto refused = live.reload(R"({"upstream": {"a": {}}})");
  BOOST_TEST(!refused.accepted);
  BOOST_TEST(refused.reason.find("upstream.a at 1:20: the options name no replica") == 0u, refused.reason);
  BOOST_TEST(live.current() == after, "the running snapshot stays");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(config_status)

// The status page shows each upstream's replicas; the upstream hook adds
// what the document cannot say to each upstream built.
BOOST_AUTO_TEST_CASE(the_status_page_shows_an_upstream_s_replicas) {
  int built = 0;
  config::code_hooks hooks;
  hooks.upstream = [&](std::string_view name, resilience::http::upstream_options o) {
    ++built;
    BOOST_TEST(name == "pricing");
    return o;
  };
  config::live_config live{R"({"upstream": {"pricing": {"replicas": [{"host": "10.0.0.1", "port": 8080},
                                                                      {"host": "10.0.0.2", "port": 8080}]}}})",
                           "status.json", hooks};
  BOOST_TEST(built == 1);
  const std::string json = config::status_json(*live.current());
  for (const char* part : {"\"upstreams\":{\"pricing\":{\"panic\":false,\"ejected\":0", "\"key\":\"10.0.0.1:8080\"",
                           "\"key\":\"10.0.0.2:8080\"", "\"ejected\":false"})
    BOOST_TEST(json.find(part) != std::string::npos, part << " in " << json);
}

BOOST_AUTO_TEST_SUITE_END()
