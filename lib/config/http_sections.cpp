// The HTTP library's sections: "http_client" (an http::client per entry,
// owned by the snapshot and carried over a reload while its options stay),
// "upstream" (an http::upstream per entry, a shared replica set carried over
// likewise) and "http_server" (http::server_options). Compiled into
// resilience::config only when resilience::http is built
// (no_http_sections.cpp otherwise).
#include "shared_objects.hpp"

#include <resilience/http/client.hpp>
#include <resilience/http/server_options.hpp>
#include <resilience/http/upstream.hpp>

#include <array>
#include <climits>
#include <variant>

namespace resilience::config {
namespace detail {
namespace json = boost::json;
using http::client_options;
using http::server_options;
using http::outlier_detection_options;
using http::upstream_options;

struct http_entries {
  std::map<std::string, owned<http::client>, std::less<>> clients;
  std::map<std::string, owned<http::upstream>, std::less<>> upstreams;
  std::map<std::string, server_options, std::less<>> servers;
};

namespace {

// A nested object's keys, from its table: listed once.
template <class O, std::size_t N>
constexpr std::array<std::string_view, N> keys_of(const field<O> (&table)[N]) {
  std::array<std::string_view, N> keys{};
  for (std::size_t i = 0; i < N; ++i) keys[i] = table[i].key;
  return keys;
}

constexpr std::string_view deadline_header_keys[] = {"format", "name"};

// {"format": "grpc-timeout"} or {"format": "milliseconds", "name": "x-timeout-ms"}.
http::deadline_header read_deadline_header(const json::value& v, const std::string& path, const document_reader& r) {
  const auto& o = r.object_at(v, path);
  r.only_keys(o, path, deadline_header_keys);
  const auto* format = o.if_contains("format");
  if (!format) r.fail(path + ".format", "is required: grpc-timeout or milliseconds");
  const std::string_view f = r.string_at(*format, path + ".format");
  const auto* name = o.if_contains("name");
  if (f == "grpc-timeout") {
    if (name) r.fail(path + ".name", "grpc-timeout names its own header");
    return http::deadline_header::grpc_timeout();
  }
  if (f != "milliseconds") r.fail(path + ".format", "must be grpc-timeout or milliseconds");
  if (!name) r.fail(path + ".name", "is required for the format milliseconds");
  const std::string header(r.string_at(*name, path + ".name"));
  try {
    return http::deadline_header::milliseconds(header);
  } catch (const std::invalid_argument& e) {
    r.fail(path + ".name", setter_reason(e, path + ".name"));
  }
}

json::value write_deadline_header(const http::deadline_header& h) {
  if (h.is_grpc_timeout()) return json::object{{"format", "grpc-timeout"}};
  return json::object{{"format", "milliseconds"}, {"name", std::string(h.name())}};
}

// Statuses one by one, so that a wrong one is placed at its element.
http::classifier read_statuses(const json::value& v, const std::string& path, const document_reader& r) {
  if (!v.is_array()) r.fail(path, "must be an array of HTTP statuses (400 to 599)");
  std::vector<unsigned> statuses;
  for (std::size_t i = 0; i < v.get_array().size(); ++i) {
    const std::string at = path + "[" + std::to_string(i) + "]";
    const auto status = static_cast<unsigned>(r.unsigned_at(v.get_array()[i], at, UINT_MAX));
    try {
      const http::classifier one{std::span<const unsigned>(&status, 1)};
    } catch (const std::invalid_argument& e) {
      r.fail(at, setter_reason(e, at));
    }
    statuses.push_back(status);
  }
  return http::classifier(statuses);
}

constexpr field<breaker_registry_options> breaker_limits_fields[] = {
    RESILIENCE_OPTION(breaker_registry_options, "max_breakers", max_breakers(), max_breakers),
    RESILIENCE_OPTION(breaker_registry_options, "idle_after", idle_after(), idle_after),
};
constexpr auto breaker_limits_keys = keys_of(breaker_limits_fields);

constexpr field<http::connection_pool_options> pool_fields[] = {
    RESILIENCE_OPTION(http::connection_pool_options, "max_connections_per_host", max_connections_per_host(),
                      max_connections_per_host),
    RESILIENCE_OPTION(http::connection_pool_options, "idle_timeout", idle_timeout(), idle_timeout),
    RESILIENCE_OPTION(http::connection_pool_options, "resolve_timeout", resolve_timeout(), resolve_timeout),
    RESILIENCE_OPTION(http::connection_pool_options, "wait_for_connection", wait_for_connection(),
                      wait_for_connection),
    RESILIENCE_OPTION(http::connection_pool_options, "verify_peer", verify_peer(), verify_peer),
};
constexpr auto pool_keys = keys_of(pool_fields);

// Each host's own budget: "none", or a retry_budget entry's object
// (ratio by default). Left out, the client's default (a ratio budget).
void read_host_budget(client_options& o, const json::value& v, const std::string& path, const document_reader& r) {
  if (v.is_string()) {
    if (r.string_at(v, path) != "none") r.fail(path, "must be \"none\" or an object (kind ratio or token)");
    o = o.no_retry_budget();
    return;
  }
  const auto& b = r.object_at(v, path);
  const auto* kind_value = b.if_contains("kind");
  const std::string_view kind = kind_value ? r.string_at(*kind_value, path + ".kind") : "ratio";
  if (kind == "ratio") {
    const auto* now = std::get_if<retry_ratio_budget_options>(&o.budget_per_host());
    retry_ratio_budget_options ratio = now ? *now : retry_ratio_budget_options{};
    read_fields(ratio, b, path, ratio_budget_table(), r, budget_kind_key);
    o = o.budget_per_host(ratio);
  } else if (kind == "token") {
    const auto* now = std::get_if<http::retry_token_budget_settings>(&o.budget_per_host());
    const http::retry_token_budget_settings start = now ? *now : http::retry_token_budget_settings{};
    token_budget_settings s{start.max_tokens, start.token_ratio};
    read_fields(s, b, path, token_budget_table(), r, budget_kind_key);
    o = o.budget_per_host(http::retry_token_budget_settings{s.max_tokens, s.token_ratio});
  } else {
    r.fail(path + ".kind", "must be ratio or token");
  }
}

json::value write_host_budget(const client_options& o) {
  json::object out;
  if (const auto* t = std::get_if<http::retry_token_budget_settings>(&o.budget_per_host())) {
    out = write_fields(token_budget_settings{t->max_tokens, t->token_ratio}, token_budget_table());
    out["kind"] = "token";
  } else if (const auto* ratio = std::get_if<retry_ratio_budget_options>(&o.budget_per_host())) {
    out = write_fields(*ratio, ratio_budget_table());
    out["kind"] = "ratio";
  } else {
    return json::value("none");
  }
  return out;
}

// A nested options object read over the client's current one, so that what
// it leaves out keeps the client's default (not the type's).
template <class N, class Get, class Set>
void read_nested(client_options& o, const json::value& v, const std::string& path, const document_reader& r,
                 field_table<N> table, Get get, Set set) {
  N nested = get(o);
  read_fields(nested, r.object_at(v, path), path, table, r);
  o = set(o, nested);
}

const field<client_options> client_fields[] = {
    RESILIENCE_OPTION(client_options, "total_timeout", total_timeout(), total_timeout),
    RESILIENCE_OPTION(client_options, "attempt_timeout", attempt_timeout(), attempt_timeout),
    RESILIENCE_OPTION(client_options, "max_retries", max_retries(), max_retries),
    // Before jitter: a backoff brings its own.
    custom<client_options>(
        "backoff",
        [](client_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          o = o.backoff(read_backoff(v, path, r));
        },
        [](const client_options& o) { return write_backoff(o.backoff()); }, backoff_keys),
    custom<client_options>(
        "jitter",
        [](client_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          o = o.jitter(jitter_named(r.string_at(v, path)));
        },
        [](const client_options& o) { return json::value(to_string(o.backoff().jitter_kind())); }),
    RESILIENCE_OPTION(client_options, "fit_to_time_left", fit_to_time_left(), fit_to_time_left),
    RESILIENCE_OPTION(client_options, "max_retry_after", retry_after().max_retry_after(), max_retry_after),
    RESILIENCE_OPTION(client_options, "jitter_retry_after", retry_after().is_jittered(), jitter_retry_after),
    RESILIENCE_OPTION(client_options, "max_host_hold", max_host_hold(), max_host_hold),
    custom<client_options>(
        "retry_statuses",
        [](client_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          o = o.retry_classifier(read_statuses(v, path, r));
        },
        [](const client_options& o) {
          json::array out;
          for (const unsigned s : o.retry_classifier().retryable_statuses()) out.emplace_back(s);
          return json::value(std::move(out));
        }),
    // The host's breakers are made on demand: one made here checks the options now.
    custom<client_options>(
        "breaker",
        [](client_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          read_nested<breaker_options>(
              o, v, path, r, breaker_table(), [](const client_options& c) { return c.breaker(); },
              [](const client_options& c, const breaker_options& b) { return c.breaker(b); });
          const circuit_breaker check(o.breaker());
        },
        [](const client_options& o) { return json::value(write_fields(o.breaker(), breaker_table())); }),
    custom<client_options>(
        "breaker_limits",
        [](client_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          read_nested<breaker_registry_options>(
              o, v, path, r, breaker_limits_fields, [](const client_options& c) { return c.breaker_limits(); },
              [](const client_options& c, const breaker_registry_options& l) { return c.breaker_limits(l); });
        },
        [](const client_options& o) { return json::value(write_fields(o.breaker_limits(), breaker_limits_fields)); },
        breaker_limits_keys),
    // null, as left out: none.
    custom<client_options>(
        "adaptive_throttle",
        [](client_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          if (v.is_null()) return;
          read_nested<adaptive_throttle_options>(
              o, v, path, r, throttle_table(),
              [](const client_options& c) { return c.adaptive_throttle().value_or(adaptive_throttle_options{}); },
              [](const client_options& c, const adaptive_throttle_options& t) { return c.adaptive_throttle(t); });
        },
        [](const client_options& o) {
          return o.adaptive_throttle() ? json::value(write_fields(*o.adaptive_throttle(), throttle_table()))
                                       : json::value();
        }),
    custom<client_options>(
        "deadline_header",
        [](client_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          if (!v.is_null()) o = o.deadline_header(read_deadline_header(v, path, r));
        },
        [](const client_options& o) {
          return o.deadline_header() ? write_deadline_header(*o.deadline_header()) : json::value();
        },
        deadline_header_keys),
    // Written only when given: a margin given is checked against
    // attempt_timeout even without a deadline header.
    custom<client_options>(
        "deadline_margin",
        [](client_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          o = o.deadline_margin(r.duration_at(v, path));
        },
        [](const client_options& o) {
          return o.deadline_margin_given() ? json::value(format_duration(o.deadline_margin())) : json::value();
        }),
    RESILIENCE_OPTION(client_options, "max_response_body", max_response_body(), max_response_body),
    RESILIENCE_OPTION(client_options, "max_response_header", max_response_header(), max_response_header),
    custom<client_options>(
        "pool",
        [](client_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          read_nested<http::connection_pool_options>(
              o, v, path, r, pool_fields, [](const client_options& c) { return c.pool(); },
              [](const client_options& c, const http::connection_pool_options& p) { return c.pool(p); });
        },
        [](const client_options& o) { return json::value(write_fields(o.pool(), pool_fields)); }, pool_keys),
    custom<client_options>(
        "retry_budget_per_host",
        [](client_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          read_host_budget(o, v, path, r);
        },
        [](const client_options& o) { return write_host_budget(o); }),
};

const field<server_options> server_fields[] = {
    RESILIENCE_OPTION(server_options, "max_concurrent", max_concurrent(), max_concurrent),
    custom<server_options>(
        "retry_after",
        [](server_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          const duration d = r.duration_at(v, path);
          if (d == duration::max() || d % std::chrono::seconds(1) != duration::zero())
            r.fail(path, "must be whole seconds, such as \"1s\" (a Retry-After header's unit)");
          o = o.retry_after(std::chrono::duration_cast<std::chrono::seconds>(d));
        },
        [](const server_options& o) { return json::value(format_duration(o.retry_after())); }),
    RESILIENCE_OPTION(server_options, "problem_details", problem_details(), problem_details),
    custom<server_options>(
        "inbound_deadline",
        [](server_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          o = o.inbound_deadline(read_deadline_header(v, path, r));
        },
        [](const server_options& o) { return write_deadline_header(o.inbound_deadline()); }, deadline_header_keys),
    RESILIENCE_OPTION(server_options, "max_deadline", max_deadline(), max_deadline),
    RESILIENCE_OPTION(server_options, "header_read_timeout", header_read_timeout(), header_read_timeout),
    RESILIENCE_OPTION(server_options, "body_read_timeout", body_read_timeout(), body_read_timeout),
    RESILIENCE_OPTION(server_options, "write_timeout", write_timeout(), write_timeout),
    RESILIENCE_OPTION(server_options, "idle_timeout", idle_timeout(), idle_timeout),
    RESILIENCE_OPTION(server_options, "max_header_bytes", max_header_bytes(), max_header_bytes),
    RESILIENCE_OPTION(server_options, "max_body_bytes", max_body_bytes(), max_body_bytes),
    RESILIENCE_OPTION(server_options, "max_connections", max_connections(), max_connections),
    RESILIENCE_OPTION(server_options, "drain_grace", drain_grace(), drain_grace),
};

// -- upstream --

// A setter's "x::y: host must ..." is said of path.host when its first word
// is one of `keys` (the object's), else of path.
[[noreturn]] void fail_at_named(const std::invalid_argument& e, const std::string& path, key_list keys,
                                const document_reader& r) {
  std::string_view what = e.what();
  if (const std::size_t colon = what.find(": "); colon != std::string_view::npos) what.remove_prefix(colon + 2);
  const std::string_view word = what.substr(0, what.find(' '));
  for (const auto k : keys)
    if (k == word) {
      const std::string at = path + "." + std::string(k);
      r.fail(at, setter_reason(e, at));
    }
  r.fail(path, setter_reason(e, path));
}

constexpr std::string_view endpoint_keys[] = {"host", "port", "tls", "address"};
constexpr std::string_view resolve_keys[] = {"host", "port", "tls"};

// {"host": ..., "port": ..., "tls": ..., "address": ...}: port left out is
// the scheme's, as endpoint::http and endpoint::https have it.
http::endpoint read_endpoint(const json::value& v, const std::string& path, const document_reader& r, key_list keys) {
  const auto& o = r.object_at(v, path);
  r.only_keys(o, path, keys);
  const auto* host = o.if_contains("host");
  if (!host) r.fail(path + ".host", "is required");
  const std::string name(r.string_at(*host, path + ".host"));
  const auto* tls = o.if_contains("tls");
  const bool secure = tls && r.bool_at(*tls, path + ".tls");
  const auto* port_value = o.if_contains("port");
  const auto port = port_value ? r.unsigned_at(*port_value, path + ".port", UINT16_MAX) : 0;
  const auto* address = o.if_contains("address");
  const std::string at(address ? r.string_at(*address, path + ".address") : "");
  http::endpoint e;
  try {
    e = secure ? http::endpoint::https(name) : http::endpoint::http(name);
    if (port_value) e.port = static_cast<std::uint16_t>(port);
    e.address = at;
    e.validate();
  } catch (const std::invalid_argument& error) {
    fail_at_named(error, path, keys, r);
  }
  return e;
}

json::value write_endpoint(const http::endpoint& e) {
  json::object out{{"host", e.host}, {"port", e.port}, {"tls", e.tls}};
  if (!e.address.empty()) out["address"] = e.address;
  return out;
}

constexpr std::string_view success_rate_keys[] = {"stdev_factor", "minimum_hosts", "request_volume"};
constexpr std::string_view failure_percentage_keys[] = {"threshold", "minimum_hosts", "request_volume"};

// A rule's numbers: what the object leaves out keeps the setter's default.
// null, as left out: off.
void read_success_rate(outlier_detection_options& o, const json::value& v, const std::string& path,
                       const document_reader& r) {
  if (v.is_null()) return;
  const auto& obj = r.object_at(v, path);
  r.only_keys(obj, path, success_rate_keys);
  auto rule = *outlier_detection_options{}.success_rate().success_rate_ejection();
  if (const auto* x = obj.if_contains("stdev_factor")) rule.stdev_factor = r.number_at(*x, path + ".stdev_factor");
  if (const auto* x = obj.if_contains("minimum_hosts"))
    rule.minimum_hosts = static_cast<std::uint32_t>(r.unsigned_at(*x, path + ".minimum_hosts", UINT32_MAX));
  if (const auto* x = obj.if_contains("request_volume"))
    rule.request_volume = static_cast<std::uint32_t>(r.unsigned_at(*x, path + ".request_volume", UINT32_MAX));
  try {
    o = o.success_rate(rule.stdev_factor, rule.minimum_hosts, rule.request_volume);
  } catch (const std::invalid_argument& e) {
    fail_at_named(e, path, success_rate_keys, r);
  }
}

void read_failure_percentage(outlier_detection_options& o, const json::value& v, const std::string& path,
                             const document_reader& r) {
  if (v.is_null()) return;
  const auto& obj = r.object_at(v, path);
  r.only_keys(obj, path, failure_percentage_keys);
  auto rule = *outlier_detection_options{}.failure_percentage().failure_percentage_ejection();
  if (const auto* x = obj.if_contains("threshold"))
    rule.threshold = static_cast<std::uint32_t>(r.unsigned_at(*x, path + ".threshold", UINT32_MAX));
  if (const auto* x = obj.if_contains("minimum_hosts"))
    rule.minimum_hosts = static_cast<std::uint32_t>(r.unsigned_at(*x, path + ".minimum_hosts", UINT32_MAX));
  if (const auto* x = obj.if_contains("request_volume"))
    rule.request_volume = static_cast<std::uint32_t>(r.unsigned_at(*x, path + ".request_volume", UINT32_MAX));
  try {
    o = o.failure_percentage(rule.threshold, rule.minimum_hosts, rule.request_volume);
  } catch (const std::invalid_argument& e) {
    fail_at_named(e, path, failure_percentage_keys, r);
  }
}

constexpr field<outlier_detection_options> outlier_fields[] = {
    RESILIENCE_OPTION(outlier_detection_options, "consecutive_5xx", consecutive_5xx(), consecutive_5xx),
    RESILIENCE_OPTION(outlier_detection_options, "consecutive_gateway_failure", consecutive_gateway_failure(),
                      consecutive_gateway_failure),
    RESILIENCE_OPTION(outlier_detection_options, "interval", interval(), interval),
    RESILIENCE_OPTION(outlier_detection_options, "base_ejection_time", base_ejection_time(), base_ejection_time),
    RESILIENCE_OPTION(outlier_detection_options, "max_ejection_time", max_ejection_time(), max_ejection_time),
    RESILIENCE_OPTION(outlier_detection_options, "max_ejection_percent", max_ejection_percent(), max_ejection_percent),
    custom<outlier_detection_options>(
        "success_rate",
        [](outlier_detection_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          read_success_rate(o, v, path, r);
        },
        [](const outlier_detection_options& o) {
          const auto& rule = o.success_rate_ejection();
          if (!rule) return json::value();
          return json::value(json::object{{"stdev_factor", rule->stdev_factor},
                                          {"minimum_hosts", rule->minimum_hosts},
                                          {"request_volume", rule->request_volume}});
        },
        success_rate_keys),
    custom<outlier_detection_options>(
        "failure_percentage",
        [](outlier_detection_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          read_failure_percentage(o, v, path, r);
        },
        [](const outlier_detection_options& o) {
          const auto& rule = o.failure_percentage_ejection();
          if (!rule) return json::value();
          return json::value(json::object{{"threshold", rule->threshold},
                                          {"minimum_hosts", rule->minimum_hosts},
                                          {"request_volume", rule->request_volume}});
        },
        failure_percentage_keys),
    RESILIENCE_OPTION(outlier_detection_options, "probe_ejected", probe_ejected(), probe_ejected),
};
constexpr auto outlier_keys = keys_of(outlier_fields);

// The name is the entry's; meter and random are code.
const field<upstream_options> upstream_fields[] = {
    custom<upstream_options>(
        "replicas",
        [](upstream_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          if (!v.is_array()) r.fail(path, "must be an array of endpoints ({\"host\", \"port\", \"tls\", \"address\"})");
          std::vector<http::endpoint> list;
          for (std::size_t i = 0; i < v.get_array().size(); ++i)
            list.push_back(read_endpoint(v.get_array()[i], path + "[" + std::to_string(i) + "]", r, endpoint_keys));
          o = o.replicas(std::move(list));
        },
        [](const upstream_options& o) {
          json::array out;
          for (const auto& e : o.replicas()) out.push_back(write_endpoint(e));
          return json::value(std::move(out));
        },
        endpoint_keys),
    custom<upstream_options>(
        "resolve",
        [](upstream_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          http::endpoint e = read_endpoint(v, path, r, resolve_keys);
          o = o.resolve(std::move(e.host), e.port, e.tls);
        },
        [](const upstream_options& o) {
          return o.resolved_name() ? write_endpoint(*o.resolved_name()) : json::value();
        },
        resolve_keys),
    RESILIENCE_OPTION(upstream_options, "resolve_every", resolve_every(), resolve_every),
    custom<upstream_options>(
        "balance",
        [](upstream_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          const std::string_view b = r.string_at(v, path);
          if (b == "peak_ewma") o = o.balance(http::balancer::peak_ewma);
          else if (b == "round_robin") o = o.balance(http::balancer::round_robin);
          else r.fail(path, "must be peak_ewma or round_robin");
        },
        [](const upstream_options& o) {
          return json::value(o.balance() == http::balancer::round_robin ? "round_robin" : "peak_ewma");
        }),
    RESILIENCE_OPTION(upstream_options, "ewma_decay", ewma_decay(), ewma_decay),
    RESILIENCE_OPTION(upstream_options, "warm_up", warm_up(), warm_up),
    RESILIENCE_OPTION(upstream_options, "panic_threshold", panic_threshold(), panic_threshold),
    custom<upstream_options>(
        "outlier_detection",
        [](upstream_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          outlier_detection_options d = o.outlier_detection();
          read_fields(d, r.object_at(v, path), path, outlier_fields, r);
          o = o.outlier_detection(std::move(d));
        },
        [](const upstream_options& o) { return json::value(write_fields(o.outlier_detection(), outlier_fields)); },
        outlier_keys),
};

constexpr std::string_view section_names[] = {"http_client", "http_server", "upstream"};

}  // namespace

key_list http_section_names() { return section_names; }

void add_http_keys(std::vector<std::string>& out) {
  add_keys(out, "http_client", client_fields);
  add_keys(out, "http_server", server_fields);
  add_keys(out, "upstream", upstream_fields);
}

void read_http_sections(const json::object& doc, const document_reader& r, const shared_objects* previous,
                        shared_objects& out) {
  auto entries = std::make_shared<http_entries>();
  const http_entries* before = previous ? previous->http.get() : nullptr;

  json::object clients;
  for_each_entry(doc, "http_client", r, [&](std::string name, const json::object& entry, const std::string& path) {
    client_options o = client_options::standard();
    read_fields(o, entry, path, client_fields, r);
    json::value written = write_fields(o, client_fields);
    std::shared_ptr<http::client> client;
    if (before)
      if (const auto kept = before->clients.find(name); kept != before->clients.end() && kept->second.options == written)
        client = kept->second.object;
    if (!client) {
      try {
        if (r.hooks && r.hooks->http_client) o = r.hooks->http_client(name, std::move(o));
        client = std::make_shared<http::client>(std::move(o));  // its cross-field checks
      } catch (const std::invalid_argument& e) {
        // "http::client_options::deadline_margin: must be ..." is said of
        // http_client.<name>.deadline_margin (placed at the entry if left out).
        constexpr std::string_view prefix = "http::client_options::";
        const std::string_view what = e.what();
        std::string at = path;
        if (what.starts_with(prefix))
          at += "." + std::string(what.substr(prefix.size(), what.find(':', prefix.size()) - prefix.size()));
        r.fail(at, setter_reason(e, at));
      }
    }
    clients[name] = written;
    entries->clients.emplace(std::move(name), owned<http::client>{std::move(client), std::move(written)});
  });
  if (!clients.empty()) out.document["http_client"] = std::move(clients);

  // As a client: kept while its options are written the same, so that its
  // replicas keep their latency, ejections and resolution.
  json::object upstreams;
  for_each_entry(doc, "upstream", r, [&](std::string name, const json::object& entry, const std::string& path) {
    upstream_options o;
    try {
      o = o.name(name);
    } catch (const std::invalid_argument& e) {
      r.fail(path, setter_reason(e, path));
    }
    read_fields(o, entry, path, upstream_fields, r);
    json::value written = write_fields(o, upstream_fields);
    std::shared_ptr<http::upstream> kept;
    if (before)
      if (const auto old = before->upstreams.find(name); old != before->upstreams.end() && old->second.options == written)
        kept = old->second.object;
    if (!kept) {
      try {
        if (r.hooks && r.hooks->upstream) o = r.hooks->upstream(name, std::move(o));
        kept = std::make_shared<http::upstream>(std::move(o));  // neither replicas nor a name: refused
      } catch (const std::invalid_argument& e) {
        r.fail(path, setter_reason(e, path));
      }
    }
    upstreams[name] = written;
    entries->upstreams.emplace(std::move(name), owned<http::upstream>{std::move(kept), std::move(written)});
  });
  if (!upstreams.empty()) out.document["upstream"] = std::move(upstreams);

  json::object servers;
  for_each_entry(doc, "http_server", r, [&](std::string name, const json::object& entry, const std::string& path) {
    server_options o;
    read_fields(o, entry, path, server_fields, r);
    servers[name] = write_fields(o, server_fields);
    entries->servers.emplace(std::move(name), std::move(o));
  });
  if (!servers.empty()) out.document["http_server"] = std::move(servers);

  out.http = std::move(entries);
}

void add_http_slots(const shared_objects& objects, const slot_adder& add) {
  if (!objects.http) return;
  for (const auto& [name, entry] : objects.http->clients) add(entry_kind::http_client, name, entry.object.get());
  for (const auto& [name, options] : objects.http->servers) add(entry_kind::http_server, name, &options);
  for (const auto& [name, entry] : objects.http->upstreams) add(entry_kind::upstream, name, entry.object.get());
}

void add_http_status(const shared_objects& objects, json::object& out) {
  if (!objects.http) return;
  json::object upstreams;
  for (const auto& [name, entry] : objects.http->upstreams) {
    const http::upstream_status st = entry.object->status();
    json::array replicas;
    for (const auto& r : st.replicas)
      replicas.push_back(json::object{{"key", r.key},
                                      {"ejected", r.ejected},
                                      {"warming_up", r.warming_up},
                                      {"ejections", r.ejections},
                                      {"in_flight", r.in_flight},
                                      {"latency_estimate", format_duration(r.latency_estimate)},
                                      {"requests", r.requests},
                                      {"failures", r.failures}});
    upstreams[name] = json::object{
        {"panic", st.panic}, {"ejected", st.ejected()}, {"replicas", std::move(replicas)}, {"options", entry.options}};
  }
  out["upstreams"] = std::move(upstreams);
}

}  // namespace detail

http::upstream& snapshot::upstream(std::string_view name) const {
  if (const auto* h = objects_->http.get())
    if (const auto found = h->upstreams.find(name); found != h->upstreams.end()) return *found->second.object;
  throw std::out_of_range("config: no upstream named \"" + std::string(name) + "\"");
}

http::client& snapshot::http_client(std::string_view name) const {
  if (const auto* h = objects_->http.get())
    if (const auto found = h->clients.find(name); found != h->clients.end()) return *found->second.object;
  throw std::out_of_range("config: no http_client named \"" + std::string(name) + "\"");
}

const http::server_options& snapshot::http_server(std::string_view name) const {
  if (const auto* h = objects_->http.get())
    if (const auto found = h->servers.find(name); found != h->servers.end()) return found->second;
  throw std::out_of_range("config: no http_server named \"" + std::string(name) + "\"");
}

}  // namespace resilience::config
