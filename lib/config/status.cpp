// A snapshot's live state for an operator (status_json, status_html), and
// the operator's actions on its breakers.
#include "shared_objects.hpp"

#include <boost/json/serialize.hpp>

#include <stdexcept>

namespace resilience::config {
namespace {
namespace json = boost::json;

json::object status_of(const snapshot& s) {
  const auto& objects = snapshot_access::objects(s);
  json::object out;
  out["version"] = s.version();
  out["source"] = s.source();
  json::object breakers;
  for (const auto& [name, entry] : objects.breakers) {
    const breaker_metrics m = entry.object->metrics();
    breakers[name] = json::object{{"state", to_string(m.state)},
                                  {"calls", m.calls},
                                  {"failures", m.failures},
                                  {"slow_calls", m.slow_calls},
                                  {"rejections", m.rejections},
                                  {"time_until_probe", format_duration(m.time_until_probe)},
                                  {"options", entry.options}};
  }
  out["breakers"] = std::move(breakers);
  json::object budgets;
  for (const auto& [name, entry] : objects.budgets) {
    json::object b{{"options", entry.options}};
    if (entry.options.at("kind") == "token") {
      const auto& tokens = *static_cast<const retry_token_budget*>(entry.object.get());
      b["tokens"] = tokens.tokens();
      b["refusals"] = tokens.refusals();
    } else {
      b["refusals"] = static_cast<const retry_ratio_budget*>(entry.object.get())->refusals();
    }
    budgets[name] = std::move(b);
  }
  out["retry_budgets"] = std::move(budgets);
  json::object bulkheads;
  for (const auto& [name, entry] : objects.bulkheads)
    bulkheads[name] = json::object{
        {"in_flight", entry.object->in_flight()}, {"queued", entry.object->queued()}, {"options", entry.options}};
  out["bulkheads"] = std::move(bulkheads);
  json::object limiters;
  for (const auto& [name, entry] : objects.rate_limiters)
    limiters[name] = json::object{{"queued", entry.object->queued()}, {"options", entry.options}};
  out["rate_limiters"] = std::move(limiters);
  json::object throttles;
  for (const auto& [name, entry] : objects.throttles) throttles[name] = json::object{{"options", entry.options}};
  out["adaptive_throttles"] = std::move(throttles);
  detail::add_http_status(objects, out);
  return out;
}

std::string escaped(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string status_json(const snapshot& s) { return json::serialize(status_of(s)); }

std::string status_html(const snapshot& s) {
  const json::object status = status_of(s);
  std::string page =
      "<!doctype html><html><head><meta charset=\"utf-8\"><title>resilience status</title>"
      "<style>body{font-family:sans-serif}table{border-collapse:collapse;margin-bottom:1em}"
      "td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}</style></head><body>";
  page += "<h1>Configuration " + std::to_string(s.version()) + "</h1><p>from " + escaped(s.source()) + "</p>";
  for (const auto& [kind, entries] : status) {
    if (!entries.is_object()) continue;
    page += "<h2>" + escaped(kind) + "</h2><table><tr><th>name</th><th>state</th></tr>";
    for (const auto& [name, entry] : entries.get_object()) {
      json::object shown = entry.get_object();
      shown.erase("options");
      page += "<tr><td>" + escaped(name) + "</td><td>" + escaped(json::serialize(shown)) + "</td></tr>";
    }
    page += "</table>";
  }
  return page + "</body></html>";
}

void breaker_action(const snapshot& s, std::string_view breaker, std::string_view action) {
  circuit_breaker& b = s.breaker(breaker);
  if (action == "isolate") b.isolate();
  else if (action == "reset") b.reset();
  else if (action == "disable") b.disable();
  else throw std::invalid_argument("config::breaker_action: \"" + std::string(action) + "\" is not isolate, reset or disable");
}

}  // namespace resilience::config
