// resilience/config.hpp — policies from a configuration document (JSON),
// replaced at run time without a restart. Component resilience::config
// (Boost.JSON).
//
//   resilience::config::live_config policies{read_file("policies.json"), "policies.json"};
//   ...
//   auto now = policies.current();  // held for the whole call
//   auto r = co_await (now->breaker("db") | now->timeout("db"))(query, ctx);
//   co_await resilience::co_retry(op, now->retry("pricing"));
//
//   policies.reload(new_text);       // rejected whole, or swapped atomically
//
// The document names policies by kind, then by name:
//
//   { "retry":   { "pricing": { "max_attempts": 4, "backoff": { "shape": "exponential",
//                               "base": "100ms", "cap": "10s" }, "budget": "pricing" } },
//     "retry_budget": { "pricing": { "kind": "ratio", "ratio": 0.2 } },
//     "breaker": { "db": { "failure_ratio": 0.5, "time_window": { "span": "30s" } } },
//     "timeout": { "db": { "limit": "250ms" } } }
//
// Every key is an option of the C++ options (docs/config.md lists them all);
// what a document leaves out keeps the C++ default. Durations are strings:
// "250ms", "2s", "1.5m", "1h" (also "ns", "us"), or "none" where the C++
// option takes duration::max() for "no limit". Numbers must be numbers,
// flags true or false; an unknown key is an error, not ignored.
//
// A document is accepted whole or not at all: config::error says where
// (its JSON path and line:column) and why, with the same checks as the
// C++ setters (`retry.pricing.max_attempts at 3:40: must be at least 1`).
//
// A snapshot is immutable and owns the shared state its policies use
// (breakers, budgets, bulkheads, limiters, throttles, HTTP clients): calls
// that started under one finish under it, however many reloads happen
// meanwhile. A reload
// carries each shared object over to the new snapshot when its kind, name and
// options are unchanged, so an unchanged breaker keeps its window and state;
// one whose options changed starts afresh. The objects run on steady_clock.
#pragma once

#include <resilience/adaptive_throttle.hpp>
#include <resilience/bulkhead.hpp>
#include <resilience/circuit_breaker.hpp>
#include <resilience/clock.hpp>
#include <resilience/event.hpp>
#include <resilience/hedging.hpp>
#include <resilience/rate_limiter.hpp>
#include <resilience/retry.hpp>
#include <resilience/retry_budget.hpp>
#include <resilience/timeout.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

// The HTTP library's types, declared only: this header stays Asio-only. A
// program that asks for an http_client or http_server includes
// <resilience/http/client.hpp>, <resilience/http/server_options.hpp> or
// <resilience/http/upstream.hpp>.
namespace resilience::http {
template <resilience::clock Clock>
class basic_client;
using client = basic_client<steady_clock>;
class client_options;
class server_options;
class upstream;
class upstream_options;
}  // namespace resilience::http

namespace resilience::config {

// A document refused: where, and why. what() is
// "<path> at <line>:<column>: <reason>" (path and position left out when
// the document could not be read as JSON at all, or for the whole document).
class error : public std::invalid_argument {
 public:
  error(std::string path, std::uint32_t line, std::uint32_t column, std::string reason);

  // Dotted: "retry.pricing.backoff.base"; array elements as [i].
  const std::string& path() const noexcept { return path_; }
  // From 1; 0 when unknown.
  std::uint32_t line() const noexcept { return line_; }
  std::uint32_t column() const noexcept { return column_; }
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string path_;
  std::uint32_t line_;
  std::uint32_t column_;
  std::string reason_;
};

// "250ms" -> 250 ms; "none" -> duration::max() only if none_allowed.
// Throws std::invalid_argument saying what a duration looks like.
duration parse_duration(std::string_view text, bool none_allowed = false);
// The shortest exact spelling parse_duration reads back: "250ms", "90s",
// "none" for duration::max().
std::string format_duration(duration d);

// Every key a document may hold, as "section.key" or "section.key.inner"
// ("retry.backoff.base"): docs/config.md documents each.
std::vector<std::string> document_keys();

// A policy's name, looked up once: snapshot.retry(key) is an index into
// the snapshot, not a search by string. The same name gives the same key
// in the whole process, so keys made at start-up serve every reload.
//   static const resilience::config::name_key pricing{"pricing"};
//   co_retry(op, now->retry(pricing));
class name_key {
 public:
  explicit name_key(std::string_view name);
  std::uint32_t index() const noexcept { return index_; }
  const std::string& name() const noexcept { return *name_; }

 private:
  std::uint32_t index_;
  const std::string* name_;  // interned: lives as long as the process
};

namespace detail {
struct shared_objects;
// What a name_key finds in a snapshot: for each kind, the entries by key
// (null where the key names none of that kind).
enum class entry_kind : std::uint8_t {
  retry, timeout, hedging, breaker, bulkhead, rate_limiter, adaptive_throttle, budget, http_client, http_server, upstream, count
};
using entry_slots = std::array<std::vector<const void*>, static_cast<std::size_t>(entry_kind::count)>;
}  // namespace detail

// One accepted document: its policies, by kind and name. Immutable; the
// shared state it owns (breakers, budgets, ...) is thread-safe.
class snapshot {
 public:
  ~snapshot();
  snapshot(const snapshot&) = delete;
  snapshot& operator=(const snapshot&) = delete;

  // Each throws std::out_of_range naming the kind and name when the document
  // has no such policy.
  const retry_policy& retry(std::string_view name) const;
  const basic_timeout<>& timeout(std::string_view name) const;
  const hedging_policy& hedging(std::string_view name) const;
  circuit_breaker& breaker(std::string_view name) const;
  resilience::bulkhead& bulkhead(std::string_view name) const;
  resilience::rate_limiter& rate_limiter(std::string_view name) const;
  resilience::adaptive_throttle& adaptive_throttle(std::string_view name) const;
  // A retry_budget section's entry, as a retry or hedging policy (or the
  // HTTP client) takes it: budget(snapshot.budget("x")).
  const resilience::detail::budget_ref& budget(std::string_view name) const;
  // The HTTP library's sections (built only with it): an http_client entry's
  // client, owned by the snapshot, an http_server entry's options, and an
  // upstream entry's replica set (a handle: a copy shares its state).
  http::client& http_client(std::string_view name) const;
  const http::server_options& http_server(std::string_view name) const;
  http::upstream& upstream(std::string_view name) const;

  // The same, by key: an index, no search (what a call path should use).
  const retry_policy& retry(const name_key& k) const { return find<const retry_policy>(k, kind::retry); }
  const basic_timeout<>& timeout(const name_key& k) const { return find<const basic_timeout<>>(k, kind::timeout); }
  const hedging_policy& hedging(const name_key& k) const { return find<const hedging_policy>(k, kind::hedging); }
  circuit_breaker& breaker(const name_key& k) const { return find<circuit_breaker>(k, kind::breaker); }
  resilience::bulkhead& bulkhead(const name_key& k) const { return find<resilience::bulkhead>(k, kind::bulkhead); }
  resilience::rate_limiter& rate_limiter(const name_key& k) const {
    return find<resilience::rate_limiter>(k, kind::rate_limiter);
  }
  resilience::adaptive_throttle& adaptive_throttle(const name_key& k) const {
    return find<resilience::adaptive_throttle>(k, kind::adaptive_throttle);
  }
  const resilience::detail::budget_ref& budget(const name_key& k) const {
    return find<const resilience::detail::budget_ref>(k, kind::budget);
  }
  http::client& http_client(const name_key& k) const { return find<http::client>(k, kind::http_client); }
  const http::server_options& http_server(const name_key& k) const {
    return find<const http::server_options>(k, kind::http_server);
  }
  http::upstream& upstream(const name_key& k) const { return find<http::upstream>(k, kind::upstream); }

  // 1 for the first document a live_config accepted, one more per reload.
  std::uint64_t version() const noexcept { return version_; }
  // Where the document came from, as the caller named it (a file's path).
  const std::string& source() const noexcept { return source_; }
  // The document as accepted, every option written out (defaults included):
  // parse(document_text()) gives the same policies.
  std::string document_text() const;

 private:
  friend struct snapshot_access;
  using kind = detail::entry_kind;
  snapshot() = default;

  template <class T>
  T& find(const name_key& k, kind which) const {
    const auto& of_kind = slots_[static_cast<std::size_t>(which)];
    if (k.index() < of_kind.size())
      if (const void* p = of_kind[k.index()]) return *static_cast<T*>(const_cast<void*>(p));
    missing(which, k.name());
  }
  [[noreturn]] static void missing(kind which, const std::string& name);

  std::uint64_t version_ = 0;
  std::string source_;
  std::unique_ptr<detail::shared_objects> objects_;
  detail::entry_slots slots_;  // of each kind, by name_key index
};

// What a document cannot say, added by the program to each object as a
// snapshot builds it: hooks, event sinks, meters. Each runs once per object
// built (not for one a reload carries over), on the parsing thread; its
// name is the entry's.
struct code_hooks {
  std::function<breaker_options(std::string_view name, breaker_options)> breaker;
  std::function<http::client_options(std::string_view name, http::client_options)> http_client;
  std::function<http::upstream_options(std::string_view name, http::upstream_options)> upstream;  // a meter
};

// Reads a document. `previous` (optional) lends its shared objects to the
// new snapshot where kind, name and options are unchanged. Throws
// config::error.
std::shared_ptr<const snapshot> parse(std::string_view text, std::string_view source = "document",
                                      const snapshot* previous = nullptr, std::uint64_t version = 1,
                                      const code_hooks& hooks = {});

// The live state of a snapshot's shared objects, for an operator's status
// page (served like /metrics, from the service's own server): version and
// source; each breaker's state, window counts and options; each budget's
// tokens or refusals; each bulkhead's calls in flight and queued; each
// limiter's and throttle's options. JSON, or a small HTML page of the same.
// Nothing secret is in a document today; what will be (a Redis password, TLS
// key paths) is never written here.
std::string status_json(const snapshot& s);
std::string status_html(const snapshot& s);

// An operator's action on a snapshot's breaker: "isolate" (held open),
// "reset" (closed, window cleared), "disable" (every call goes through). An
// admin endpoint must be opted into: nothing calls this unless the service
// routes a request to it. Throws std::out_of_range for an unknown breaker,
// std::invalid_argument for an unknown action.
void breaker_action(const snapshot& s, std::string_view breaker, std::string_view action);

// What became of a reload.
struct reload_event {
  bool accepted = false;
  std::uint64_t version = 0;  // the running snapshot's, after the reload
  std::string source;
  std::string reason;  // a refusal's error().what(); empty when accepted
};

// The running configuration: a snapshot swapped atomically by reload().
// current() is a copy under a lock held for that copy alone (libstdc++'s
// atomic<shared_ptr> locks too, in a way ThreadSanitizer cannot follow) and
// a reference count; a call holds what it
// got for as long as it runs.
class live_config {
 public:
  // The first document; throws config::error if it is refused (a service
  // should not start without its policies).
  explicit live_config(std::string_view text, std::string_view source = "document", code_hooks hooks = {});

  std::shared_ptr<const snapshot> current() const noexcept {
    const std::lock_guard lock(swapping_);
    return current_;
  }

  // A new document: on acceptance the next current() returns it; on refusal
  // the running one stays. Either way on_reload runs (on the reloading
  // thread) and the counters move. Reloads are serialised; safe from any
  // thread, concurrently with current().
  reload_event reload(std::string_view text, std::string_view source = "document");
  // A reload that failed before there was a document (a file gone or
  // unreadable): counted and reported as a refusal, the running one kept.
  reload_event refuse(std::string_view source, std::string reason);

  // Runs after every reload(), accepted or not.
  void on_reload(std::function<void(const reload_event&)> f);
  // Reports config_reloaded or config_rejected (strategy "config") to
  // `sink`, which must outlive this object: metrics count them.
  void events(event_sink& sink);
  void events(event_sink&&) = delete;

  std::uint64_t reloads_accepted() const noexcept { return accepted_.load(std::memory_order_relaxed); }
  std::uint64_t reloads_rejected() const noexcept { return rejected_.load(std::memory_order_relaxed); }

 private:
  void report(const reload_event& e);  // under reloading_

  code_hooks hooks_;  // before current_, which the first parse makes with them
  mutable std::mutex swapping_;  // guards current_ only
  std::shared_ptr<const snapshot> current_;
  std::mutex reloading_;
  std::function<void(const reload_event&)> on_reload_;
  event_sink* events_ = nullptr;
  std::atomic<std::uint64_t> accepted_{0};
  std::atomic<std::uint64_t> rejected_{0};
};

}  // namespace resilience::config
