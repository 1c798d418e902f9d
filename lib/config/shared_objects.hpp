// What a snapshot owns, shared by the files of lib/config/ (the core
// sections' reader, the HTTP sections', the status page).
#pragma once

#include "config_fields.hpp"

#include <map>
#include <memory>
#include <string>

namespace resilience::config {
namespace detail {

template <class T>
struct owned {
  std::shared_ptr<T> object;
  boost::json::value options;  // as written: what decides whether a reload may keep the object
};

struct budget_entry {
  std::shared_ptr<void> object;  // a retry_ratio_budget or a retry_token_budget
  resilience::detail::budget_ref ref;
  boost::json::value options;
};

// The HTTP sections' entries (http_sections.cpp): opaque here, so that the
// core sections compile without the HTTP library.
struct http_entries;

struct shared_objects {
  std::map<std::string, retry_policy, std::less<>> retries;
  std::map<std::string, basic_timeout<>, std::less<>> timeouts;
  std::map<std::string, hedging_policy, std::less<>> hedgings;
  std::map<std::string, owned<circuit_breaker>, std::less<>> breakers;
  std::map<std::string, owned<resilience::bulkhead>, std::less<>> bulkheads;
  std::map<std::string, owned<resilience::rate_limiter>, std::less<>> rate_limiters;
  std::map<std::string, owned<resilience::adaptive_throttle>, std::less<>> throttles;
  std::map<std::string, budget_entry, std::less<>> budgets;
  std::shared_ptr<const http_entries> http;  // null without HTTP sections
  boost::json::object document;              // every option written out
};

}  // namespace detail

struct snapshot_access {
  static std::shared_ptr<snapshot> make() { return std::shared_ptr<snapshot>(new snapshot()); }
  static const detail::shared_objects& objects(const snapshot& s) { return *s.objects_; }
  static void fill(snapshot& s, std::uint64_t version, std::string source, std::unique_ptr<detail::shared_objects> o,
                   detail::entry_slots slots) {
    s.version_ = version;
    s.source_ = std::move(source);
    s.objects_ = std::move(o);
    s.slots_ = std::move(slots);
  }
};

}  // namespace resilience::config
