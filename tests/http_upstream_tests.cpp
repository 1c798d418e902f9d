// resilience/http/upstream.hpp: the replica set's rules, each on virtual
// time, against the core the client drives (detail/upstream_core.hpp):
// balancing, ejection and its length, its cap, the panic, the decay of the
// count, the warm-up, resolutions adding and removing replicas, retries
// sent elsewhere, probes, success-rate and failure-percentage ejection.
#include "http_client_support.hpp"

#include <resilience/http/detail/upstream_core.hpp>
#include <resilience/http/upstream.hpp>

#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

using resilience::http::detail::replica;
using resilience::http::detail::replica_outcome;
using resilience::http::detail::upstream_core;
using resilience::http::detail::upstream_news;

namespace {

std::vector<rhttp::endpoint> replicas(int n) {
  std::vector<rhttp::endpoint> out;
  for (int i = 0; i < n; ++i) out.push_back(rhttp::endpoint::http("10.0.0." + std::to_string(i + 1), 8080));
  return out;
}

// A set of replicas on virtual time, with seeded draws.
struct replica_set {
  explicit replica_set(rhttp::upstream_options o)
      : core(std::make_shared<upstream_core>(o.random(resilience::random_source::seeded(7)))) {}
  explicit replica_set(int n, rhttp::outlier_detection_options od = {})
      : replica_set(rhttp::upstream_options{}.replicas(replicas(n)).outlier_detection(od)) {}

  std::shared_ptr<upstream_core> core;
  resilience::time_point now = resilience::time_point{} + std::chrono::hours(1);
  std::vector<upstream_news::item> events;  // every step's, in order

  std::shared_ptr<replica> pick(std::vector<std::uint32_t> tried = {}) {
    upstream_news news;
    auto r = core->pick(now, tried, news);
    keep(news);
    return r;
  }
  void finish(replica& r, replica_outcome o, resilience::duration latency = 10ms) {
    upstream_news news;
    core->finished(r, o, latency, now, news);
    keep(news);
  }
  // One call to `key`'s replica (picked until it comes), ended with `o`.
  void call_on(const std::string& key, replica_outcome o, resilience::duration latency = 10ms) {
    for (int i = 0; i < 1000; ++i) {
      auto r = pick();
      const bool hit = r->key == key;
      finish(*r, hit ? o : replica_outcome::success, latency);
      if (hit) return;
    }
    BOOST_FAIL("never picked " << key);
  }
  void keep(upstream_news& news) {
    for (auto& e : news.items) events.push_back(e);
    last_probes = news.probes;
    resolve_asked = resolve_asked || news.resolve;
  }
  std::size_t count(resilience::event_kind k) const {
    return static_cast<std::size_t>(std::count_if(events.begin(), events.end(), [k](auto& e) { return e.kind == k; }));
  }
  // How many of `n` picks (each finished at once, with `latency_of(key)`) went to each replica.
  std::map<std::string, int> spread(int n, const std::function<resilience::duration(const std::string&)>& latency_of) {
    std::map<std::string, int> seen;
    for (int i = 0; i < n; ++i) {
      auto r = pick();
      ++seen[r->key];
      finish(*r, replica_outcome::success, latency_of(r->key));
      now += 1ms;
    }
    return seen;
  }
  // The same with `concurrency` requests in flight: each pick finishes the
  // oldest one past that many, 5 ms apart.
  std::map<std::string, int> busy(int n, int concurrency,
                                  const std::function<resilience::duration(const std::string&)>& latency_of) {
    std::map<std::string, int> seen;
    std::deque<std::shared_ptr<replica>> flying;
    for (int i = 0; i < n; ++i) {
      auto r = pick();
      ++seen[r->key];
      flying.push_back(r);
      if (static_cast<int>(flying.size()) > concurrency) {
        finish(*flying.front(), replica_outcome::success, latency_of(flying.front()->key));
        flying.pop_front();
      }
      now += 5ms;
    }
    for (auto& r : flying) finish(*r, replica_outcome::success, latency_of(r->key));
    return seen;
  }
  std::vector<std::shared_ptr<replica>> last_probes;
  bool resolve_asked = false;
};

const std::string first = "10.0.0.1:8080";

}  // namespace

BOOST_AUTO_TEST_SUITE(http_upstream)

BOOST_AUTO_TEST_CASE(options_refuse_bad_values_where_they_enter) {
  rhttp::upstream_options o;
  BOOST_CHECK_THROW(o.name(""), std::invalid_argument);
  BOOST_CHECK_THROW(o.resolve("", 80), std::invalid_argument);
  BOOST_CHECK_THROW(o.resolve("a b", 80), std::invalid_argument);
  BOOST_CHECK_THROW(o.resolve_every(0s), std::invalid_argument);
  BOOST_CHECK_THROW(o.ewma_decay(0s), std::invalid_argument);
  BOOST_CHECK_THROW(o.warm_up(-1s), std::invalid_argument);
  BOOST_CHECK_THROW(o.panic_threshold(101), std::invalid_argument);
  BOOST_CHECK_THROW(o.replicas({rhttp::endpoint{"", 80, false, {}}}), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::upstream{o}, std::invalid_argument);  // no replica, no name
  rhttp::outlier_detection_options od;
  BOOST_CHECK_THROW(od.interval(0s), std::invalid_argument);
  BOOST_CHECK_THROW(od.base_ejection_time(0s), std::invalid_argument);
  BOOST_CHECK_THROW(od.max_ejection_time(0s), std::invalid_argument);
  BOOST_CHECK_THROW(od.max_ejection_percent(101), std::invalid_argument);
  BOOST_CHECK_THROW(od.success_rate(-1), std::invalid_argument);
  BOOST_CHECK_THROW(od.failure_percentage(101), std::invalid_argument);
  // Envoy's defaults.
  BOOST_TEST(od.consecutive_5xx() == 5u);
  BOOST_TEST((od.interval() == 10s));
  BOOST_TEST((od.base_ejection_time() == 30s));
  BOOST_TEST((od.max_ejection_time() == 300s));
  BOOST_TEST(od.max_ejection_percent() == 10u);
  BOOST_TEST(!od.success_rate_ejection().has_value());
  BOOST_TEST(!od.failure_percentage_ejection().has_value());
  BOOST_TEST(rhttp::upstream_options{}.panic_threshold() == 50u);
}

BOOST_AUTO_TEST_CASE(peak_ewma_sends_little_to_a_slow_replica_and_tries_it_again_once_its_cost_decays) {
  replica_set set(5);
  const auto latency = [](const std::string& key) { return key == first ? 100ms : 10ms; };
  set.spread(200, latency);  // every replica measured
  const auto seen = set.spread(1000, latency);
  const int slow = seen.count(first) ? seen.at(first) : 0;
  BOOST_TEST(slow < 20, "the replica 10x slower got " << slow << " of 1000");
  // Idle, its estimate decays (10 s): after a minute it is tried again.
  set.now += 60s;
  const auto later = set.spread(200, [](const std::string&) { return 10ms; });
  BOOST_TEST(later.count(first) == 1u, "tried again once its cost decayed");
}

BOOST_AUTO_TEST_CASE(round_robin_takes_each_in_turn) {
  replica_set set(rhttp::upstream_options{}.replicas(replicas(4)).balance(rhttp::balancer::round_robin));
  const auto seen = set.spread(400, [](const std::string&) { return 10ms; });
  for (const auto& [key, n] : seen) BOOST_TEST(n == 100, key);
}

BOOST_AUTO_TEST_CASE(five_failures_in_a_row_eject_a_replica_and_a_success_between_resets_the_count) {
  replica_set set(5);
  for (int i = 0; i < 4; ++i) set.call_on(first, replica_outcome::server_error);
  set.call_on(first, replica_outcome::success);
  for (int i = 0; i < 4; ++i) set.call_on(first, replica_outcome::gateway_error);
  BOOST_TEST(set.count(resilience::event_kind::replica_ejected) == 0u);
  set.call_on(first, replica_outcome::local_origin);  // local-origin errors count as 5xx
  BOOST_REQUIRE(set.count(resilience::event_kind::replica_ejected) == 1u);
  BOOST_TEST(set.events.back().host == first);
  BOOST_TEST((set.events.back().delay == 30s));
  for (int i = 0; i < 200; ++i) {
    auto r = set.pick();
    BOOST_TEST(r->key != first, "an ejected replica is not picked");
    set.finish(*r, replica_outcome::success);
  }
}

BOOST_AUTO_TEST_CASE(an_ejection_lasts_the_base_times_its_count_up_to_the_most_and_the_count_decays) {
  replica_set set(5, rhttp::outlier_detection_options{}.base_ejection_time(30s).max_ejection_time(100s));
  const auto eject = [&] {
    for (int i = 0; i < 5; ++i) set.call_on(first, replica_outcome::server_error);
    return set.events.back().delay;
  };
  BOOST_TEST((eject() == 30s));
  set.now += 30s;  // served
  BOOST_TEST((eject() == 60s));
  set.now += 60s;
  BOOST_TEST((eject() == 90s));
  set.now += 90s;
  BOOST_TEST((eject() == 100s), "capped at max_ejection_time");
  BOOST_TEST(set.count(resilience::event_kind::replica_returned) == 3u);
  // In for a while: its count decays by one an interval (gRFC A50).
  set.now += 100s;
  set.pick();  // returns it
  for (int i = 0; i < 4; ++i) {
    set.now += 10s;
    set.spread(1, [](const std::string&) { return 10ms; });
  }
  BOOST_TEST((eject() == 30s), "four intervals in: the count is back to zero");
}

BOOST_AUTO_TEST_CASE(at_most_max_ejection_percent_is_ejected_and_one_at_least) {
  replica_set set(5);  // 10% of 5 is none: one all the same
  for (const auto* key : {"10.0.0.1:8080", "10.0.0.2:8080"})
    for (int i = 0; i < 5; ++i) set.call_on(key, replica_outcome::server_error);
  BOOST_TEST(set.count(resilience::event_kind::replica_ejected) == 1u);
  BOOST_TEST(set.core->status(set.now).ejected() == 1u);

  replica_set twenty(rhttp::upstream_options{}.replicas(replicas(20)));
  for (int r = 1; r <= 5; ++r)
    for (int i = 0; i < 5; ++i) twenty.call_on("10.0.0." + std::to_string(r) + ":8080", replica_outcome::server_error);
  BOOST_TEST(twenty.count(resilience::event_kind::replica_ejected) == 2u, "10% of 20");
}

BOOST_AUTO_TEST_CASE(below_the_panic_threshold_every_replica_is_used) {
  replica_set set(rhttp::upstream_options{}.replicas(replicas(4)).outlier_detection(
      rhttp::outlier_detection_options{}.max_ejection_percent(100)));
  for (int r = 1; r <= 2; ++r)
    for (int i = 0; i < 5; ++i) set.call_on("10.0.0." + std::to_string(r) + ":8080", replica_outcome::server_error);
  BOOST_TEST(set.core->status(set.now).ejected() == 2u);
  BOOST_TEST(!set.core->status(set.now).panic, "half in: not below the threshold");
  for (const auto& [key, n] : set.spread(200, [](const std::string&) { return 10ms; }))
    BOOST_TEST((key != first && key != "10.0.0.2:8080"), "ejected, not used: " << key);
  for (int i = 0; i < 5; ++i) set.call_on("10.0.0.3:8080", replica_outcome::server_error);
  BOOST_TEST(set.core->status(set.now).ejected() == 3u);
  BOOST_TEST(set.core->status(set.now).panic, "one in four: below half");
  const auto seen = set.spread(400, [](const std::string&) { return 10ms; });
  BOOST_TEST(seen.size() == 4u, "in a panic every replica is used, ejected or not");
}

BOOST_AUTO_TEST_CASE(a_retry_goes_to_a_replica_the_call_has_not_tried) {
  replica_set set(3);
  std::vector<std::uint32_t> tried;
  std::set<std::string> keys;
  for (int i = 0; i < 3; ++i) {
    auto r = set.pick(tried);
    tried.push_back(r->id);
    keys.insert(r->key);
    set.finish(*r, replica_outcome::server_error);
  }
  BOOST_TEST(keys.size() == 3u, "three attempts, three replicas");
  auto fourth = set.pick(tried);  // every one tried: any of them
  BOOST_TEST(fourth != nullptr);
}

BOOST_AUTO_TEST_CASE(a_resolution_adds_and_removes_replicas_and_a_new_one_warms_up) {
  replica_set set(rhttp::upstream_options{}.resolve("pricing.internal", 8080).warm_up(10s));
  BOOST_TEST(set.pick() == nullptr, "nothing before the name is resolved");
  BOOST_TEST(set.resolve_asked);
  set.core->resolved({"10.0.1.1", "10.0.1.2", "10.0.1.3"}, set.now);
  set.now += 20s;  // past their warm-up
  auto on_old = set.pick();
  BOOST_TEST(set.count(resilience::event_kind::replica_added) == 3u);
  BOOST_TEST(on_old->to.host == "pricing.internal", "Host and SNI keep the name");
  BOOST_TEST(!on_old->to.address.empty());
  set.busy(300, 9, [](const std::string&) { return 10ms; });
  // One address goes, one comes; the call on the gone one finishes.
  const std::string gone = on_old->to.address;
  std::vector<std::string> next;
  for (const auto* a : {"10.0.1.1", "10.0.1.2", "10.0.1.3"})
    if (a != gone) next.push_back(a);
  next.push_back("10.0.1.4");
  set.core->resolved(next, set.now);
  const auto seen = set.busy(600, 9, [](const std::string&) { return 10ms; });  // 3 s of load
  BOOST_TEST(set.count(resilience::event_kind::replica_removed) == 1u);
  BOOST_TEST(set.count(resilience::event_kind::replica_added) == 4u);
  for (const auto& [key, n] : seen) BOOST_TEST(key.find(gone) == std::string::npos, "no new call to " << key);
  set.finish(*on_old, replica_outcome::success);  // finishes all the same
  const std::string fresh = "pricing.internal:8080@10.0.1.4";
  const int warming = seen.count(fresh) ? seen.at(fresh) : 0;
  BOOST_TEST(warming < 150, "warming up: " << warming << " of 600, where 200 is a full share");
  set.now += 10s;
  const auto warm = set.busy(600, 9, [](const std::string&) { return 10ms; });
  BOOST_TEST(warm.at(fresh) > 150, "warm: " << warm.at(fresh) << " of 600");
  // A failed resolution changes nothing.
  set.core->resolved({}, set.now);
  BOOST_TEST(set.core->status(set.now).replicas.size() == 3u);
}

BOOST_AUTO_TEST_CASE(a_replica_ejected_for_refused_connections_is_probed_and_returns_when_it_connects) {
  replica_set set(5, rhttp::outlier_detection_options{}.base_ejection_time(300s));  // probes, not time, bring it back
  for (int i = 0; i < 5; ++i) set.call_on(first, replica_outcome::local_origin);
  BOOST_REQUIRE(set.count(resilience::event_kind::replica_ejected) == 1u);
  set.pick();
  BOOST_TEST(set.last_probes.empty(), "not at once");
  // Probed 1 s after its ejection, then 2, 4, 8 s after each refused probe,
  // and every interval (10 s) after that.
  std::vector<int> waits;
  for (int i = 0, since = 0; waits.size() < 6 && i < 600; ++i) {
    set.now += 100ms;
    since += 100;
    set.pick();
    if (set.last_probes.empty()) continue;
    BOOST_REQUIRE(set.last_probes.size() == 1u);
    BOOST_TEST(set.last_probes.front()->key == first);
    waits.push_back(since);
    since = 0;
    set.core->probed(*set.last_probes.front(), false, set.now);  // still refused
  }
  BOOST_TEST(waits == (std::vector<int>{1000, 2000, 4000, 8000, 10000, 10000}), boost::test_tools::per_element());
  set.now += 10s;
  set.pick();
  BOOST_REQUIRE(set.last_probes.size() == 1u);
  set.core->probed(*set.last_probes.front(), true, set.now);
  set.pick();  // the return is the next pick's to tell
  BOOST_TEST(set.count(resilience::event_kind::replica_returned) == 1u, "back as soon as it connects, not at 30 s");
  // A replica ejected for 5xx answers connections all along: not probed.
  replica_set answering(5);
  for (int i = 0; i < 5; ++i) answering.call_on(first, replica_outcome::server_error);
  answering.now += 10s;
  answering.pick();
  BOOST_TEST(answering.last_probes.empty());
}

BOOST_AUTO_TEST_CASE(success_rate_and_failure_percentage_ejection_judge_each_interval) {
  const auto run_interval = [](replica_set& set, double first_failure_share) {
    for (int i = 0; i < 1000; ++i) {
      auto r = set.pick();
      const bool fails = r->key == first && (i % 100) < first_failure_share * 100;
      set.finish(*r, fails ? replica_outcome::server_error : replica_outcome::success);
    }
    set.now += 10s;
    set.finish(*set.pick(), replica_outcome::success);  // the sweep
  };
  const auto lenient = rhttp::outlier_detection_options{}.consecutive_5xx(0);  // the interval rules alone
  replica_set by_rate(5, lenient.success_rate());
  run_interval(by_rate, 0);  // the first sweep starts the intervals
  run_interval(by_rate, 0.5);
  BOOST_TEST(by_rate.count(resilience::event_kind::replica_ejected) == 1u);

  replica_set by_failures(5, lenient.failure_percentage(50, 5, 50));
  run_interval(by_failures, 0);
  run_interval(by_failures, 0.3);
  BOOST_TEST(by_failures.count(resilience::event_kind::replica_ejected) == 0u, "30% is below 50%");
  run_interval(by_failures, 0.6);
  BOOST_TEST(by_failures.count(resilience::event_kind::replica_ejected) == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

// Against real replicas: http::server instances on 127.0.0.1, one answering
// 503, one ten times slower (on virtual time), one killed and restarted,
// behind one upstream; every call made by the client on the manual clock.
namespace {

using replica_response = bhttp::response<bhttp::string_body>;

struct replica_server {
  enum class mode { ok, unavailable, slow };
  struct handler {
    replica_server* self;
    asio::awaitable<replica_response> operator()(rhttp::server_request req, const resilience::context&) const {
      ++self->requests;
      if (self->behaviour == mode::slow) {
        auto timer = self->clock.make_timer(co_await asio::this_coro::executor);
        timer.expires_after(100ms);
        co_await timer.async_wait(asio::use_awaitable);
      } else {
        auto timer = self->clock.make_timer(co_await asio::this_coro::executor);
        timer.expires_after(10ms);
        co_await timer.async_wait(asio::use_awaitable);
      }
      replica_response res{self->behaviour == mode::unavailable ? bhttp::status::service_unavailable
                                                                 : bhttp::status::ok,
                           req.version()};
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      co_return res;
    }
  };

  replica_server(asio::io_context& io, manual_clock clock, mode m) : io(io), clock(clock), behaviour(m) { start(0); }
  ~replica_server() { stop(); }

  void start(std::uint16_t port) {
    acceptor.emplace(io);
    const tcp::endpoint at(asio::ip::make_address("127.0.0.1"), port);
    acceptor->open(at.protocol());
    acceptor->set_option(tcp::acceptor::reuse_address(true));
    acceptor->bind(at);
    acceptor->listen();
    this->port = acceptor->local_endpoint().port();
    served.emplace(handler{this}, rhttp::server_options{}, clock);
    asio::co_spawn(io, served->run(*acceptor), asio::bind_cancellation_slot(stop_signal.slot(), asio::detached));
  }
  // Killed: its connections and acceptor closed; connecting is refused.
  void stop() {
    if (!served) return;
    stop_signal.emit(asio::cancellation_type::terminal);
    stop_signal.emit(asio::cancellation_type::terminal);  // the second ends the drain's grace
    run_ready(io);
    if (acceptor) acceptor->close();
    run_ready(io);
  }
  rhttp::endpoint at() const { return rhttp::endpoint::http("127.0.0.1", port); }

  asio::io_context& io;
  manual_clock clock;
  mode behaviour;
  int requests = 0;
  std::uint16_t port = 0;
  asio::cancellation_signal stop_signal;
  std::optional<tcp::acceptor> acceptor;
  std::optional<rhttp::server<handler, manual_clock>> served;
};

// Runs one call to its end: the sockets' handlers, and virtual time moved
// to the next timer whenever nothing else is ready.
template <class T>
void finish(asio::io_context& io, manual_clock& clock, completion<T>& done) {
  for (int turns = 0; !done.done(); ++turns) {
    BOOST_REQUIRE_MESSAGE(turns < 20000, "the call did not end");
    run_ready(io);
    if (done.done()) break;
    if (io.run_one_for(std::chrono::milliseconds(1)) == 0 && clock.next_expiry()) clock.advance_to(*clock.next_expiry());
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(http_upstream_calls)

BOOST_AUTO_TEST_CASE(a_failing_replica_is_ejected_a_slow_one_avoided_and_a_killed_one_comes_back) {
  asio::io_context io;
  manual_clock clock;
  replica_server fine1(io, clock, replica_server::mode::ok), fine2(io, clock, replica_server::mode::ok),
      failing(io, clock, replica_server::mode::unavailable), slow(io, clock, replica_server::mode::slow),
      killed(io, clock, replica_server::mode::ok);
  // Two of five may be out at once: the failing one and the killed one.
  const rhttp::upstream backend{
      rhttp::upstream_options{}
          .name("backend")
          .replicas({fine1.at(), fine2.at(), failing.at(), slow.at(), killed.at()})
          .outlier_detection(rhttp::outlier_detection_options{}.max_ejection_percent(40))};
  std::vector<resilience::event> seen;
  struct sink final : resilience::event_sink {
    std::vector<resilience::event>* seen;
    std::vector<std::string> hosts;
    void on_event(const resilience::event& e) noexcept override {
      seen->push_back(e);
      hosts.emplace_back(e.host);
    }
  } events;
  events.seen = &seen;
  std::map<std::uint16_t, int> attempts_at;  // by the port of the replica each attempt went to
  client_t c(quick().events(events).on_attempt_finished([&](const rhttp::client_attempt_event& e) {
    BOOST_TEST(e.upstream == "backend");
    ++attempts_at[e.to->port];
  }), clock);
  int succeeded = 0;
  const auto calls = [&](int n) {
    for (int i = 0; i < n; ++i) {
      completion<result_t> done;
      spawn(io, c.request(backend, get()), done);
      finish(io, clock, done);
      if (done.value && done.value->has_value() && (*done.value)->result_int() == 200u) ++succeeded;
      clock.advance(50ms);
    }
  };
  calls(200);
  BOOST_TEST(succeeded == 200, "a 503 is retried on another replica: " << succeeded << " of 200");
  BOOST_TEST(failing.requests <= 6, "ejected after its fifth 503 in a row: " << failing.requests);
  BOOST_TEST(slow.requests < 20, "ten times slower, sent little: " << slow.requests);
  const auto ejections = std::count_if(seen.begin(), seen.end(), [](auto& e) {
    return e.kind == resilience::event_kind::replica_ejected;
  });
  BOOST_TEST(ejections == 1);
  BOOST_TEST(std::count(events.hosts.begin(), events.hosts.end(), failing.at().key()) >= 1);
  for (const auto* r : {&fine1, &fine2, &failing, &slow, &killed})
    BOOST_TEST(attempts_at[r->port] == r->requests, "each attempt reported with the replica that served it");

  // Killed: its calls are retried elsewhere; refused five times, it is
  // ejected too.
  const int before = killed.requests;
  killed.stop();
  succeeded = 0;
  calls(100);
  BOOST_TEST(succeeded == 100);
  BOOST_TEST(killed.requests == before);
  BOOST_TEST(backend.status(clock.now()).ejected() == 2u);
  // Restarted on its port: the next probe connects, and it is back within
  // an interval, well inside base_ejection_time.
  killed.start(killed.port);
  const auto restarted_at = clock.now();
  for (int i = 0; i < 40 && killed.requests == before; ++i) calls(5);
  BOOST_TEST(killed.requests > before, "back in service");
  BOOST_TEST((clock.now() - restarted_at < 30s), "within base_ejection_time of answering again");
}

BOOST_AUTO_TEST_SUITE_END()
