// resilience/breaker_registry.hpp — one circuit breaker per key (host, authority, endpoint).
//
//   using namespace std::chrono_literals;
//   resilience::breaker_registry<std::string> breakers{
//       resilience::breaker_options{}.consecutive_failures(5).open_duration(10s),
//       resilience::breaker_registry_options{}.max_breakers(1000).idle_after(10min)};
//   auto body = co_await breakers.stage(host)([&] { return http_get(host, path); });
//   // in a pipeline:  resilience::pipeline(retry_policy, breakers.stage(host), attempt_timeout)
//   // by hand:        std::shared_ptr<resilience::circuit_breaker> b = breakers.breaker_for(host);
//   for (const auto& e : breakers.snapshot()) log(e.key, resilience::to_string(e.metrics.state));
//
// Every breaker is built on first use of its key, from the one breaker_options
// and clock given to the registry. All members are thread-safe.
//
// Handles. breaker_for() returns a std::shared_ptr: the breaker lives while
// anyone holds it, registry or not, so a handle (or a stage, which holds one,
// as does each call made through it) may outlive the registry. A permit from
// try_acquire() refers to the breaker without holding it: keep the handle
// while the permit lives. Looking up a key the registry holds takes its mutex
// and reads the clock; it allocates nothing. The calls themselves take no lock.
//
// Bound. The registry holds at most max_breakers(). To make room for a new
// key it evicts the least recently used breaker that is idle: held by nobody
// else, not looked up for idle_after(), and letting calls through (closed,
// half-open, or open with its break over). One found held or within its break
// counts as used then. A breaker within its break is never evicted: that would
// forget an outage, and every caller would pay for it until it tripped again.
// Nor is one isolated, disabled or metrics_only: a state set by hand. Once the
// break is over, eviction forgets only the opening count and turns the next
// probe into closed-state calls. When none is idle, the new breaker is still
// returned (the bound never fails a call) but not kept: it guards only the
// calls made through that handle, and overflows() counts it. evict_idle()
// trims without waiting for a new key.
#pragma once

#include <resilience/breaker_options.hpp>
#include <resilience/breaker_state.hpp>
#include <resilience/circuit_breaker.hpp>
#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/detail/with_option.hpp>
#include <resilience/stage.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

namespace resilience {

// How many breakers a registry keeps, and when one counts as idle. A value
// type: each setter checks its input and returns a new copy.
class breaker_registry_options {
 public:
  static constexpr std::size_t default_max_breakers = 1024;

  breaker_registry_options() = default;

  breaker_registry_options max_breakers(std::size_t n) const {  // at least 1; 1024 by default
    if (n == 0) throw std::invalid_argument("breaker_registry_options: max_breakers must be at least 1");
    return resilience::detail::with_option(*this, &breaker_registry_options::max_breakers_, n);
  }
  breaker_registry_options idle_after(duration d) const {  // positive; 5 min by default
    if (d <= duration::zero()) throw std::invalid_argument("breaker_registry_options: idle_after must be positive");
    return resilience::detail::with_option(*this, &breaker_registry_options::idle_after_, d);
  }

  constexpr std::size_t max_breakers() const noexcept { return max_breakers_; }
  constexpr duration idle_after() const noexcept { return idle_after_; }

 private:
  std::size_t max_breakers_ = default_max_breakers;
  duration idle_after_ = std::chrono::minutes(5);
};

// A breaker stage that holds its breaker: safe as a temporary, copied by
// value into a pipeline, and the breaker is not evicted while it lives.
template <class Breaker, class Classifier = breaker_any_failure>
class shared_breaker_stage : public run_as_call<shared_breaker_stage<Breaker, Classifier>> {
 public:
  // For pipeline(): this stage never waits past the context's deadline.
  static constexpr bool respects_deadline = true;

  explicit shared_breaker_stage(std::shared_ptr<Breaker> breaker, Classifier c = {})
      : breaker_(std::move(breaker)), classifier_(std::move(c)) {}

  // The call's frame holds a handle of its own: the breaker lives until the
  // call ends, whatever becomes of this stage meanwhile. A temporary stage
  // hands its handle over rather than copy it.
  template <awaitable_op Op>
  auto run(Op op, const context& parent = {}) const& {
    return detail::run_owning(holder{breaker_, breaker_->stage(classifier_)}, std::move(op), parent);
  }
  template <awaitable_op Op>
  auto run(Op op, const context& parent = {}) && {
    auto stage = breaker_->stage(std::move(classifier_));
    return detail::run_owning(holder{std::move(breaker_), std::move(stage)}, std::move(op), parent);
  }
  const std::shared_ptr<Breaker>& breaker() const noexcept { return breaker_; }
  // The breaker's clock: a pipeline checks that its stages agree on one.
  const auto& clock() const noexcept { return breaker_->clock(); }

 private:
  struct holder {
    std::shared_ptr<Breaker> keep;
    breaker_stage<Classifier, typename Breaker::clock_type> stage;
    template <awaitable_op Op>
    auto run(Op op, const context& c) const {
      return stage.run(std::move(op), c);
    }
  };

  std::shared_ptr<Breaker> breaker_;
  [[no_unique_address]] Classifier classifier_;
};

template <class Key, resilience::clock Clock = steady_clock, class Hash = std::hash<Key>,
          class KeyEqual = std::equal_to<Key>>
class basic_breaker_registry {
 public:
  using key_type = Key;
  using breaker_type = basic_circuit_breaker<Clock>;
  using handle = std::shared_ptr<breaker_type>;
  // Told every transition of every breaker, with its key; like the options'
  // own on_state_change (which runs first), on the thread that made it.
  using state_change_handler = std::function<void(const Key&, const state_change&)>;

  struct entry {
    Key key;
    breaker_metrics metrics;  // metrics.state: the breaker's state
  };

  // Contradictory breaker options throw std::invalid_argument here, not on
  // the first call: one breaker is built from them to check.
  explicit basic_breaker_registry(breaker_options options = {}, breaker_registry_options limits = {},
                                  Clock clock = {}, state_change_handler on_state_change = {})
      : options_(std::move(options)),
        limits_(limits),
        clock_(std::move(clock)),
        on_state_change_(std::move(on_state_change)) {
    breaker_type check(options_, clock_);
  }

  basic_breaker_registry(const basic_breaker_registry&) = delete;
  basic_breaker_registry& operator=(const basic_breaker_registry&) = delete;

  // The breaker of `key`, built on first use. Counts as a use of it.
  handle breaker_for(const Key& key) { return breaker_for(key, clock_.now()); }
  // The same, as of `now`, a time the caller has just read from clock().
  handle breaker_for(const Key& key, time_point now) {
    std::lock_guard lock(mutex_);
    if (auto it = map_.find(key); it != map_.end()) {
      unlink(it->second);
      push_newest(it->second, now);
      return it->second.breaker;
    }
    auto breaker = std::make_shared<breaker_type>(options_for(key), clock_);
    if (map_.size() >= limits_.max_breakers() && !evict_one(now)) {
      ++overflows_;
      return breaker;
    }
    auto it = map_.try_emplace(key).first;
    it->second.breaker = breaker;
    it->second.key = &it->first;
    push_newest(it->second, now);
    return breaker;
  }

  // A stage calling through the breaker of `key`; see shared_breaker_stage.
  template <class C = breaker_any_failure>
  shared_breaker_stage<breaker_type, C> stage(const Key& key, C classifier = {}) {
    return shared_breaker_stage<breaker_type, C>(breaker_for(key), std::move(classifier));
  }

  // The breaker of `key` if the registry holds one. Neither builds one nor
  // counts as a use.
  handle find(const Key& key) const {
    std::lock_guard lock(mutex_);
    const auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second.breaker;
  }

  // -- introspection and control --

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return map_.size();
  }
  // Breakers handed out unkept because the registry was full of breakers
  // that could not be evicted: if it grows, raise max_breakers().
  std::uint64_t overflows() const {
    std::lock_guard lock(mutex_);
    return overflows_;
  }
  // Every breaker held, in no particular order.
  std::vector<entry> snapshot() const {
    std::lock_guard lock(mutex_);
    std::vector<entry> out;
    out.reserve(map_.size());
    for (const auto& [key, n] : map_) out.push_back(entry{key, n.breaker->metrics()});
    return out;
  }
  // Evicts every idle breaker now (rather than when room is needed), as from
  // a periodic timer. Returns how many.
  std::size_t evict_idle() {
    std::lock_guard lock(mutex_);
    const time_point now = clock_.now();
    std::size_t n = 0;
    while (evict_one(now)) ++n;
    return n;
  }
  // Closes every breaker held. Callbacks run outside the registry's lock (so
  // they may use the registry); what one throws is rethrown once every
  // breaker is reset.
  void reset_all() {
    std::vector<handle> all;
    {
      std::lock_guard lock(mutex_);
      all.reserve(map_.size());
      for (const auto& kv : map_) all.push_back(kv.second.breaker);
    }
    std::exception_ptr first;
    for (const auto& b : all) {
      try {
        b->reset();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

  const breaker_options& options() const noexcept { return options_; }
  const breaker_registry_options& limits() const noexcept { return limits_; }
  const Clock& clock() const noexcept { return clock_; }

 private:
  // A map node, threaded on a list from the most to the least recently used.
  // Nodes of an unordered_map stay put until erased, so pointers to them (and
  // to their keys) are stable.
  struct node {
    handle breaker;
    time_point last_used{};
    node* newer = nullptr;
    node* older = nullptr;
    const Key* key = nullptr;
  };

  breaker_options options_for(const Key& key) const {
    if (!on_state_change_) return options_;
    return options_.on_state_change([own = options_.on_state_change(), keyed = on_state_change_,
                                     key](const state_change& e) {
      if (own) own(e);
      keyed(key, e);
    });
  }

  void unlink(node& n) noexcept {
    (n.newer ? n.newer->older : newest_) = n.older;
    (n.older ? n.older->newer : oldest_) = n.newer;
    n.newer = n.older = nullptr;
  }
  void push_newest(node& n, time_point now) noexcept {
    // A time read before the lock may be older than the newest node's: the
    // list stays in time order, which evict_one relies on.
    n.last_used = newest_ ? std::max(now, newest_->last_used) : now;
    n.older = newest_;
    (newest_ ? newest_->newer : oldest_) = &n;
    newest_ = &n;
  }

  static bool lets_calls_through(const breaker_type& b) noexcept {
    const circuit_state s = b.state();
    return s == circuit_state::closed ||
           ((s == circuit_state::open || s == circuit_state::half_open) && b.time_until_probe() == duration::zero());
  }

  // Evicts the least recently used idle breaker, if any. One found held or
  // within its break counts as used now and moves to the newest end, so the
  // walk sees each breaker once and stops at the first used within
  // idle_after(): everything newer is too.
  bool evict_one(time_point now) {
    while (node* n = oldest_) {
      if (detail::clamped_since(n->last_used, now) < limits_.idle_after()) return false;
      unlink(*n);
      // Only the map holds it: no one can take a copy without our lock.
      if (n->breaker.use_count() == 1 && lets_calls_through(*n->breaker)) {
        map_.erase(map_.find(*n->key));
        return true;
      }
      push_newest(*n, now);
    }
    return false;
  }

  const breaker_options options_;
  const breaker_registry_options limits_;
  const Clock clock_;
  const state_change_handler on_state_change_;

  mutable std::mutex mutex_;  // guards everything below
  std::unordered_map<Key, node, Hash, KeyEqual> map_;
  node* newest_ = nullptr;
  node* oldest_ = nullptr;
  std::uint64_t overflows_ = 0;
};

template <class Key>
using breaker_registry = basic_breaker_registry<Key>;

}  // namespace resilience
