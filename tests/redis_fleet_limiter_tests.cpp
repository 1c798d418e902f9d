// resilience/redis/fleet_limiter.hpp, against a real redis-server started
// by each test.
#include <resilience/metrics.hpp>
#include <resilience/redis/fleet_limiter.hpp>
#include <resilience/testing/manual_clock.hpp>
#include <resilience/testing/redis_server.hpp>

#include "support_redis.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
namespace redis = resilience::redis;
using namespace std::chrono_literals;
using resilience::error_code;
using resilience::testing::redis_server;
using resilience::test::command;
using resilience::test::run_until;

namespace {

// A limiter on the test's manual_clock; with local_time, its bucket runs on
// that clock too (instead of Redis's TIME).
using test_clock_limiter = redis::basic_fleet_limiter<resilience::testing::manual_clock>;
constexpr auto local_time = redis::time_source::local;

asio::awaitable<error_code> succeed() { co_return error_code{}; }

// Starts one call through `limiter`, its events to `sink`; its result lands
// in the returned slot.
template <class Limiter>
std::shared_ptr<std::optional<error_code>> start_call(asio::io_context& io, const Limiter& limiter,
                                                      resilience::event_sink* sink = nullptr) {
  auto result = std::make_shared<std::optional<error_code>>();
  resilience::context ctx;
  ctx.events = sink;
  asio::co_spawn(io, limiter([] { return succeed(); }, ctx), [result](std::exception_ptr e, error_code ec) {
    BOOST_TEST(!e);
    *result = ec;
  });
  return result;
}

template <class Limiter>
error_code call(asio::io_context& io, const Limiter& limiter, resilience::event_sink* sink = nullptr) {
  auto r = start_call(io, limiter, sink);
  run_until(io, [&] { return r->has_value(); });
  return **r;
}

// Calls (the calls drive the breaker's probe) until `done()`.
template <class Limiter>
void call_until(asio::io_context& io, const Limiter& limiter, const std::function<bool()>& done,
                resilience::event_sink* sink = nullptr) {
  run_until(io, [&] {
    if (done()) return true;
    call(io, limiter, sink);
    asio::steady_timer pause{io, 5ms};
    bool paused = false;
    pause.async_wait([&](error_code) { paused = true; });
    run_until(io, [&] { return paused; });
    return done();
  });
}

// Scripting commands Redis turned away before running them (rejected_calls
// in INFO commandstats: an ACL's NOPERM, say): the limiter's round trips and
// probes that reached it and were refused.
std::uint64_t scripts_refused(asio::io_context& io, redis::connection& admin) {
  const std::string info = command(io, admin, {"INFO", "commandstats"}).text;
  std::uint64_t refused = 0;
  std::size_t at = 0;
  while ((at = info.find("cmdstat_", at)) != std::string::npos) {
    const std::size_t end = info.find('\n', at);
    const std::string line = info.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at += line.size();
    if (line.rfind("cmdstat_eval", 0) != 0 && line.rfind("cmdstat_script", 0) != 0) continue;
    const std::size_t field = line.find("rejected_calls=");
    if (field != std::string::npos) refused += std::stoull(line.substr(field + 15));
  }
  return refused;
}

// The events of the calls given it, in order.
struct events final : resilience::event_sink {
  std::vector<resilience::event> seen;
  void on_event(const resilience::event& e) noexcept override { seen.push_back(e); }
  std::size_t count(resilience::event_kind k) const {
    return static_cast<std::size_t>(std::count_if(seen.begin(), seen.end(), [k](auto& e) { return e.kind == k; }));
  }
};
using kind = resilience::event_kind;

}  // namespace

BOOST_AUTO_TEST_SUITE(redis_fleet_limiter)

BOOST_AUTO_TEST_CASE(options_refuse_bad_values_where_they_enter) {
  redis::fleet_limiter_options o;
  BOOST_CHECK_THROW(o.key(""), std::invalid_argument);
  BOOST_CHECK_THROW(o.key("a{b}"), std::invalid_argument);
  BOOST_CHECK_THROW(o.key(std::string(201, 'k')), std::invalid_argument);
  BOOST_CHECK_THROW(o.token_bucket(0, 1s), std::invalid_argument);
  BOOST_CHECK_THROW(o.token_bucket(10, 0s), std::invalid_argument);
  BOOST_CHECK_THROW(o.token_bucket(2'000'000, 1s), std::invalid_argument);  // two a microsecond
  BOOST_CHECK_THROW(o.token_bucket(10, 1s, 0), std::invalid_argument);
  BOOST_CHECK_THROW(o.token_bucket(10, 1s, 5).max_lease(6), std::invalid_argument);
  BOOST_CHECK_THROW(o.max_lease(0), std::invalid_argument);
  BOOST_CHECK_THROW(o.max_wait(-1ms), std::invalid_argument);
  BOOST_CHECK_THROW(o.lease_lifetime(0ms), std::invalid_argument);
  BOOST_CHECK_THROW(o.replicas_hint(0), std::invalid_argument);
  BOOST_CHECK_THROW(o.fallback(static_cast<redis::fallback_mode>(9)), std::invalid_argument);
  asio::io_context io;
  BOOST_CHECK_THROW(redis::fleet_limiter(io.get_executor(), {}, o), std::invalid_argument);  // no key
  BOOST_TEST(o.token_bucket(100, 1s, 50).max_lease() == 5u);  // a tenth of the burst
  BOOST_TEST(o.token_bucket(100, 1s, 5).max_lease() == 1u);
}

BOOST_AUTO_TEST_CASE(a_new_key_starts_full_and_the_burst_then_the_rate_hold_on_virtual_time) {
  redis_server server;
  asio::io_context io;
  resilience::testing::manual_clock clock;
  events ev;
  test_clock_limiter limiter{
      io.get_executor(), server.connection(),
      redis::fleet_limiter_options{}.key("burst").token_bucket(10, 1s, 5).max_lease(1)
          .clock_from(local_time),
      clock};
  for (int i = 0; i < 5; ++i) BOOST_TEST(!call(io, limiter, &ev), "call " << i);
  BOOST_TEST((call(io, limiter, &ev) == resilience::error::rate_limited));
  BOOST_TEST_REQUIRE(ev.count(kind::fleet_rate_limited) == 1u);
  BOOST_TEST((ev.seen.back().delay == 100ms));  // one token every 100 ms
  BOOST_TEST((limiter.time_until_permit() == 100ms));
  // Redis said when: until then a call is turned away without asking again.
  const auto asked = limiter.stats().round_trips;
  BOOST_TEST((call(io, limiter, &ev) == resilience::error::rate_limited));
  BOOST_TEST(limiter.stats().round_trips == asked);
  clock.advance(99ms);
  BOOST_TEST((call(io, limiter, &ev) == resilience::error::rate_limited));
  BOOST_TEST((limiter.time_until_permit() == 1ms));
  clock.advance(1ms);
  BOOST_TEST((limiter.time_until_permit() == 0ms));
  BOOST_TEST(!call(io, limiter, &ev));
  BOOST_TEST((call(io, limiter, &ev) == resilience::error::rate_limited));
  clock.advance(1s);  // 10 tokens, but the bucket holds 5
  int admitted = 0;
  for (int i = 0; i < 8; ++i) admitted += !call(io, limiter, &ev);
  BOOST_TEST(admitted == 5);
  BOOST_TEST(limiter.stats().admitted == 11u);
  BOOST_TEST(limiter.stats().rejected == 7u);
  BOOST_TEST(!limiter.falling_back());

  // The key expires once the bucket would be full again: nothing is left behind.
  redis::connection probe{io.get_executor(), server.connection()};
  const auto ttl = command(io, probe, {"PTTL", "rl:{burst}"});
  BOOST_TEST(ttl.integer > 0);
  BOOST_TEST(ttl.integer <= 61001);  // on the caller's clock, a minute of margin
}

BOOST_AUTO_TEST_CASE(a_waiting_call_sleeps_until_redis_says_and_asks_again) {
  redis_server server;
  asio::io_context io;
  resilience::testing::manual_clock clock;
  test_clock_limiter limiter{
      io.get_executor(), server.connection(),
      redis::fleet_limiter_options{}.key("wait").token_bucket(10, 1s, 1).max_wait(150ms)
          .clock_from(local_time),
      clock};
  BOOST_TEST(!call(io, limiter));
  auto waiting = start_call(io, limiter);
  run_until(io, [&] { return clock.pending() == 1u; });  // Redis said 100 ms: it sleeps
  BOOST_TEST(!waiting->has_value());
  clock.advance(100ms);
  run_until(io, [&] { return waiting->has_value(); });
  BOOST_TEST(!**waiting);
  // A replica that waits at most 50 ms is turned away at once: Redis says 100.
  test_clock_limiter impatient{
      io.get_executor(), server.connection(),
      limiter.options().max_wait(50ms), clock};
  BOOST_TEST((call(io, impatient) == resilience::error::rate_limited));
  BOOST_TEST(clock.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(replicas_share_one_bucket_on_redis_time_whatever_their_clocks_say) {
  redis_server server;
  asio::io_context io;
  resilience::testing::manual_clock early, late;
  late.advance(std::chrono::hours(5));  // skewed by five hours: Redis's TIME decides
  const auto options = redis::fleet_limiter_options{}.key("shared").token_bucket(1, std::chrono::hours(1), 6).max_lease(2);
  test_clock_limiter a{io.get_executor(), server.connection(), options, early};
  test_clock_limiter b{io.get_executor(), server.connection(), options, late};
  int admitted = 0;
  for (int i = 0; i < 10; ++i) admitted += !call(io, (i % 2) ? a : b);
  BOOST_TEST(admitted == 6);
  BOOST_TEST(a.stats().replicas == 2u);
  BOOST_TEST(b.stats().admitted + a.stats().admitted == 6u);
}

BOOST_AUTO_TEST_CASE(callers_on_two_threads_share_the_lease_and_never_overdraw_it) {
  redis_server server;
  asio::io_context io{2};
  auto strand = asio::make_strand(io);
  redis::fleet_limiter limiter{strand, server.connection(),
                              redis::fleet_limiter_options{}.key("threads").token_bucket(1, std::chrono::hours(1), 500)
                                  .max_lease(20).lease_lifetime(10s)};
  std::atomic<int> admitted{0}, refused{0};
  auto caller = [&]() -> asio::awaitable<void> {
    for (int i = 0; i < 200; ++i) {
      const error_code ec = co_await limiter([] { return succeed(); });
      (ec ? refused : admitted).fetch_add(1);
    }
  };
  for (int c = 0; c < 4; ++c) asio::co_spawn(io, caller(), asio::detached);  // on the io_context, not the strand
  std::thread other{[&] { io.run(); }};
  io.run();
  other.join();
  BOOST_TEST(admitted.load() == 500);  // the burst, exactly: a slow rate adds nothing in the meantime
  BOOST_TEST(refused.load() == 300);
  BOOST_TEST(limiter.stats().admitted == 500u);
}

BOOST_AUTO_TEST_CASE(leases_make_one_round_trip_per_many_calls) {
  redis_server server;
  asio::io_context io;
  redis::fleet_limiter limiter{io.get_executor(), server.connection(),
                              redis::fleet_limiter_options{}.key("lease").token_bucket(1000, 1s, 1000).max_lease(50)
                                  .lease_lifetime(10s)};
  for (int i = 0; i < 1000; ++i) BOOST_TEST_REQUIRE(!call(io, limiter));
  const auto s = limiter.stats();
  BOOST_TEST(s.admitted == 1000u);
  // 1, 2, 4, ... 32, then 50 at a time: 6 + 19 round trips, a few more if a lease outran its half-life.
  BOOST_TEST(s.round_trips <= 40u, s.round_trips);
  BOOST_TEST(s.leased >= 1000u);
  BOOST_TEST(s.leased <= 1050u);
}

// Leased permits are spent locally for lease_lifetime() from their grant
// (on the limiter's clock), and not after: then a call asks Redis again.
BOOST_AUTO_TEST_CASE(a_lease_is_spent_for_its_lifetime_and_not_after) {
  redis_server server;
  asio::io_context io;
  resilience::testing::manual_clock clock;
  test_clock_limiter limiter{
      io.get_executor(), server.connection(),
      redis::fleet_limiter_options{}.key("lifetime").token_bucket(1000, 1s, 1000).max_lease(50).lease_lifetime(10s)
          .clock_from(local_time),
      clock};
  const auto in_hand = [&] { return limiter.stats().leased - limiter.stats().admitted; };
  // Leases start small and grow: call until one leaves permits in hand.
  for (int i = 0; i < 10 && in_hand() == 0; ++i) BOOST_REQUIRE(!call(io, limiter));
  BOOST_REQUIRE(in_hand() > 0u);
  const auto trips = limiter.stats().round_trips;
  clock.advance(4s);  // past the default lifetime (100 ms), within this one
  BOOST_TEST(!call(io, limiter));
  BOOST_TEST(limiter.stats().round_trips == trips, "a permit in hand was not spent within its lifetime");
  for (int i = 0; i < 10 && in_hand() == 0; ++i) BOOST_REQUIRE(!call(io, limiter));
  BOOST_REQUIRE(in_hand() > 0u);
  const auto before_expiry = limiter.stats().round_trips;
  clock.advance(10s);
  BOOST_TEST(!call(io, limiter));
  BOOST_TEST(limiter.stats().round_trips == before_expiry + 1, "a permit was spent after its lifetime");
}

BOOST_AUTO_TEST_CASE(redis_killed_falls_back_to_the_local_share_and_comes_back_when_it_returns) {
  redis_server server;
  asio::io_context io;
  events ev;
  resilience::testing::manual_clock clock;  // the local share's time stands still: its count is exact
  test_clock_limiter limiter{
      io.get_executor(), server.connection(),
      redis::fleet_limiter_options{}.key("killed").token_bucket(100, 1s, 100).max_lease(1).replicas_hint(4),
      clock};
  BOOST_TEST(!call(io, limiter, &ev));
  server.kill();
  // Redis saw one replica, and its count wins over the hint (4): the share
  // is the whole quota, 100 a second with a burst of 100.
  int admitted = 0;
  for (int i = 0; i < 150; ++i) admitted += !call(io, limiter, &ev);
  BOOST_TEST(limiter.falling_back());
  BOOST_TEST(ev.count(kind::fleet_fell_back) == 1u);
  BOOST_TEST(admitted == 100);  // the burst
  clock.advance(100ms);
  int refilled = 0;
  for (int i = 0; i < 20; ++i) refilled += !call(io, limiter, &ev);
  BOOST_TEST(refilled == 10);  // 100 a second
  BOOST_TEST(limiter.stats().admitted_by_fallback == static_cast<std::uint64_t>(admitted + refilled));

  server.start();
  call_until(io, limiter, [&] { return ev.count(kind::fleet_resumed) == 1u; }, &ev);
  BOOST_TEST(!limiter.falling_back());
  // Back, but held to the local share as well for a while: it is spent.
  BOOST_TEST((call(io, limiter, &ev) == resilience::error::rate_limited));
  clock.advance(10ms);  // one more permit in the share, within the lease's lifetime
  // The probe was the script itself: its permit is the first lease.
  const auto before = limiter.stats();
  BOOST_TEST(!call(io, limiter, &ev));
  BOOST_TEST(limiter.stats().round_trips == before.round_trips);
  BOOST_TEST(limiter.stats().admitted_by_fallback == before.admitted_by_fallback);
  BOOST_TEST(limiter.stats().failed_round_trips == before.failed_round_trips);
}

// Redis goes away and comes back while two replicas are over their quota,
// and they find it again 600 ms apart. On return, a replica on the shared
// quota beside one still on its local share would draw the whole rate (and
// the burst of a bucket Redis lost) while the other spends its share: no
// one-second window, the transitions included, admits more than the
// documented bound.
BOOST_AUTO_TEST_CASE(across_an_outage_and_the_return_no_second_admits_more_than_the_bound) {
  redis_server server;
  asio::io_context io;
  resilience::testing::manual_clock clock;
  {
    redis::connection admin{io.get_executor(), server.connection()};
    command(io, admin, {"ACL", "SETUSER", "late", "on", ">pw", "allcommands", "allkeys"});
  }
  const auto options = redis::fleet_limiter_options{}.key("return").token_bucket(100, 1s, 10).max_lease(2)
                           .clock_from(local_time);
  test_clock_limiter a{io.get_executor(), server.connection(), options, clock};
  // b signs in as a user the restarted Redis does not know yet: it stays on
  // its local share until the test creates it again.
  test_clock_limiter b{io.get_executor(), server.connection().user("late", "pw"), options, clock};
  std::vector<resilience::time_point> admitted;
  // Every millisecond, each replica is called until it turns a call away.
  const auto saturate = [&](resilience::duration d) {
    for (const auto end = clock.now() + d; clock.now() < end; clock.advance(1ms)) {
      for (auto* l : {&a, &b}) {
        for (int c = 0; c < 8 && !call(io, *l); ++c) admitted.push_back(clock.now());
      }
    }
  };
  saturate(1500ms);
  server.kill();
  saturate(1500ms);
  BOOST_TEST_REQUIRE((a.falling_back() && b.falling_back()));
  server.start();
  call_until(io, a, [&] { return !a.falling_back(); });
  saturate(600ms);
  BOOST_TEST_REQUIRE(b.falling_back());
  {
    redis::connection admin{io.get_executor(), server.connection()};
    command(io, admin, {"ACL", "SETUSER", "late", "on", ">pw", "allcommands", "allkeys"});
  }
  call_until(io, b, [&] { return !b.falling_back(); });
  saturate(3000ms);

  const std::size_t bound = 100 + 10 + 2 * 2;  // rate x 1 s + burst + replicas x max_lease
  std::size_t worst = 0;
  resilience::time_point worst_at{};
  for (std::size_t i = 0, j = 0; i < admitted.size(); ++i) {
    while (j < admitted.size() && admitted[j] < admitted[i] + 1s) ++j;
    if (j - i > worst) {
      worst = j - i;
      worst_at = admitted[i];
    }
  }
  BOOST_TEST_MESSAGE("the busiest second admitted " << worst << ", the bound " << bound);
  const auto from_ms = std::chrono::duration_cast<std::chrono::milliseconds>(worst_at.time_since_epoch()).count();
  BOOST_TEST(worst <= bound, worst << " admitted in the second from " << from_ms << " ms");
  // And the quota is used: the last second admits it, within 5%.
  const auto last = std::count_if(admitted.begin(), admitted.end(), [&](auto t) { return t >= clock.now() - 1s; });
  BOOST_TEST(last >= 95, last);
}

// Four replicas, four callers each every millisecond, far over the quota:
// each round trip reserves the replica's next lease in the bucket's queue
// instead of racing the other replicas for the next permit.
BOOST_AUTO_TEST_CASE(replicas_over_the_quota_make_at_most_one_round_trip_per_admitted_call) {
  redis_server server;
  asio::io_context io;
  resilience::testing::manual_clock clock;
  const auto options = redis::fleet_limiter_options{}.key("saturated").token_bucket(200, 1s, 20).max_lease(2)
                           .clock_from(local_time);
  std::vector<std::unique_ptr<test_clock_limiter>> fleet;
  for (int i = 0; i < 4; ++i)
    fleet.push_back(std::make_unique<test_clock_limiter>(io.get_executor(), server.connection(), options, clock));
  for (int ms = 0; ms < 3000; ++ms, clock.advance(1ms)) {
    std::vector<std::shared_ptr<std::optional<error_code>>> calls;
    for (auto& l : fleet)
      for (int c = 0; c < 4; ++c) calls.push_back(start_call(io, *l));
    run_until(io, [&] { return std::all_of(calls.begin(), calls.end(), [](auto& r) { return r->has_value(); }); });
  }
  std::uint64_t admitted = 0, round_trips = 0;
  for (auto& l : fleet) {
    admitted += l->stats().admitted;
    round_trips += l->stats().round_trips;
  }
  const double expected = 200 * 3 + 20;  // 3 s of the rate, and the burst the key starts with
  BOOST_TEST(std::abs(static_cast<double>(admitted) - expected) <= 0.05 * expected, admitted << " admitted");
  BOOST_TEST_MESSAGE(round_trips << " round trips for " << admitted << " admitted calls");
  BOOST_TEST(round_trips <= admitted, round_trips << " round trips for " << admitted << " admitted calls");
}

BOOST_AUTO_TEST_CASE(after_redis_restarts_empty_the_share_counts_the_replicas_seen_before) {
  redis_server server;
  asio::io_context io;
  resilience::testing::manual_clock clock;  // stands still: within the replicas window throughout
  const auto options = redis::fleet_limiter_options{}.key("restarted").token_bucket(100, 1s, 100).max_lease(1);
  test_clock_limiter a{io.get_executor(), server.connection(), options, clock};
  test_clock_limiter b{io.get_executor(), server.connection(), options, clock};
  BOOST_TEST(!call(io, a));
  BOOST_TEST(!call(io, b));
  BOOST_TEST(!call(io, a));
  BOOST_TEST(a.stats().replicas == 2u);
  server.kill();
  server.start();  // empty: only the replicas that reach it from now on are counted
  BOOST_TEST(!call(io, a));
  BOOST_TEST(!a.falling_back());
  BOOST_TEST(a.stats().replicas == 1u);
  server.kill();
  int admitted = 0;
  for (int i = 0; i < 100; ++i) admitted += !call(io, a);
  BOOST_TEST(a.falling_back());
  BOOST_TEST(admitted == 50);  // half the burst: b is still out there
}

BOOST_AUTO_TEST_CASE(the_share_before_redis_was_ever_reached_is_the_quota_over_the_hint) {
  redis_server server;
  server.kill();
  asio::io_context io;
  resilience::testing::manual_clock clock;
  test_clock_limiter limiter{
      io.get_executor(), server.connection(), redis::fleet_limiter_options{}.key("hint").token_bucket(100, 1s, 100).replicas_hint(4),
      clock};
  int admitted = 0;
  for (int i = 0; i < 40; ++i) admitted += !call(io, limiter);
  BOOST_TEST(admitted == 25);  // a quarter of the burst
  clock.advance(1s);
  admitted = 0;
  for (int i = 0; i < 40; ++i) admitted += !call(io, limiter);
  BOOST_TEST(admitted == 25);  // a quarter of the rate
}

BOOST_AUTO_TEST_CASE(a_slow_redis_is_a_bounded_wait_then_the_fallback) {
  redis_server server;
  asio::io_context io;
  events ev;
  redis::fleet_limiter limiter{io.get_executor(), server.connection().command_timeout(40ms),
                              redis::fleet_limiter_options{}.key("slow").token_bucket(100, 1s).max_lease(1)
                                  .fallback(redis::fallback_mode::fail_open)};
  BOOST_TEST(!call(io, limiter, &ev));
  // CLIENT PAUSE from another client holds every command for a second,
  // from its reply on: our round trip queues and times out.
  redis::connection other{io.get_executor(), server.connection()};
  BOOST_TEST(command(io, other, {"CLIENT", "PAUSE", "1000", "ALL"}).text == "OK");
  BOOST_TEST(!call(io, limiter, &ev));  // admitted by fail_open after the 40 ms bound
  BOOST_TEST_REQUIRE(ev.count(kind::fleet_fell_back) == 1u);
  const auto it = std::find_if(ev.seen.begin(), ev.seen.end(),
                               [](auto& e) { return e.kind == kind::fleet_fell_back; });
  BOOST_TEST((it->error == resilience::error::timeout));
  BOOST_TEST(limiter.stats().admitted_by_fallback == 1u);
  call_until(io, limiter, [&] { return ev.count(kind::fleet_resumed) == 1u; }, &ev);
}

BOOST_AUTO_TEST_CASE(a_redis_that_answers_ping_but_refuses_the_script_keeps_the_breaker_open) {
  redis_server server;
  asio::io_context io;
  redis::connection admin{io.get_executor(), server.connection()};
  command(io, admin, {"ACL", "SETUSER", "pinger", "on", ">pw", "+ping", "+client", "+auth"});
  events ev;
  resilience::testing::manual_clock clock;
  test_clock_limiter limiter{
      io.get_executor(), server.connection().user("pinger", "pw"),
      redis::fleet_limiter_options{}.key("acl").token_bucket(100, 1s, 100).replicas_hint(4),
      clock};
  // The round trip, then probes (calls drive them, on their schedule), until
  // Redis has refused the script three times: each time NOPERM, and the
  // breaker stays open.
  call_until(io, limiter, [&] { return scripts_refused(io, admin) >= 3u; }, &ev);
  BOOST_TEST(ev.count(kind::fleet_fell_back) == 1u);
  BOOST_TEST(ev.count(kind::fleet_resumed) == 0u);
  BOOST_TEST(limiter.stats().admitted_by_fallback <= 25u);  // one share's burst, never a fresh one
  // Allowed again: the next probe brings the shared quota back.
  command(io, admin, {"ACL", "SETUSER", "pinger", "allcommands", "allkeys"});
  call_until(io, limiter, [&] { return ev.count(kind::fleet_resumed) == 1u; }, &ev);
}

BOOST_AUTO_TEST_CASE(a_rate_that_does_not_divide_is_rounded_so_that_a_permit_never_comes_early) {
  redis_server server;
  asio::io_context io;
  resilience::testing::manual_clock clock;
  test_clock_limiter limiter{
      io.get_executor(), server.connection(),
      redis::fleet_limiter_options{}.key("thirds").token_bucket(3, 1s, 1).clock_from(local_time), clock};
  BOOST_TEST(!call(io, limiter));
  BOOST_TEST((call(io, limiter) == resilience::error::rate_limited));
  BOOST_TEST((limiter.time_until_permit() == std::chrono::microseconds(333'334)));
  clock.advance(std::chrono::microseconds(333'333));
  BOOST_TEST((call(io, limiter) == resilience::error::rate_limited));
  clock.advance(std::chrono::microseconds(1));
  BOOST_TEST(!call(io, limiter));
}

BOOST_AUTO_TEST_CASE(fail_closed_turns_every_call_away_while_redis_is_down) {
  redis_server server;
  server.kill();
  asio::io_context io;
  events ev;
  redis::fleet_limiter limiter{io.get_executor(), server.connection(),
                              redis::fleet_limiter_options{}.key("closed").fallback(redis::fallback_mode::fail_closed)};
  for (int i = 0; i < 5; ++i) BOOST_TEST((call(io, limiter, &ev) == resilience::error::rate_limited));
  BOOST_TEST(ev.count(kind::fleet_fell_back) == 1u);
  BOOST_TEST(ev.count(kind::fleet_round_trip_failed) == 1u);
  BOOST_TEST(limiter.stats().rejected == 5u);
}

BOOST_AUTO_TEST_CASE(the_registry_counts_its_events_through_the_calls_sink) {
  redis_server server;
  server.kill();
  asio::io_context io;
  resilience::metrics telemetry;
  auto& sink = telemetry.events("mail");
  redis::fleet_limiter limiter{io.get_executor(), server.connection(),
                               redis::fleet_limiter_options{}.key("metered").fallback(redis::fallback_mode::fail_closed)};
  for (int i = 0; i < 3; ++i) BOOST_TEST((call(io, limiter, &sink) == resilience::error::rate_limited));
  auto events = [&](const char* name, const char* outcome) -> std::uint64_t {
    for (const auto& f : telemetry.snapshot().families) {
      if (f.name != "resilience.strategy.events") continue;
      for (const auto& s : f.samples) {
        std::vector<std::string> have;
        for (const auto& l : s.labels) have.push_back(l.second);
        if (have == std::vector<std::string>{"mail", "fleet_rate_limiter", name, outcome}) return s.count;
      }
    }
    return 0;
  };
  BOOST_TEST(events("on_fell_back", "none") == 1u);
  BOOST_TEST(events("on_round_trip_failed", "none") == 1u);
  BOOST_TEST(events("on_rate_limited", "error") == 3u);
  BOOST_TEST(events("on_resumed", "none") == 0u);
  server.start();
  call_until(io, limiter, [&] { return events("on_resumed", "none") == 1u; }, &sink);
  BOOST_TEST(!limiter.falling_back());
}

BOOST_AUTO_TEST_CASE(a_script_flushed_from_redis_is_loaded_again) {
  redis_server server;
  asio::io_context io;
  redis::fleet_limiter limiter{io.get_executor(), server.connection(),
                              redis::fleet_limiter_options{}.key("flush").token_bucket(100, 1s).max_lease(1)};
  BOOST_TEST(!call(io, limiter));
  redis::connection admin{io.get_executor(), server.connection()};
  command(io, admin, {"SCRIPT", "FLUSH"});
  BOOST_TEST(!call(io, limiter));
  BOOST_TEST(limiter.stats().failed_round_trips == 0u);
}

BOOST_AUTO_TEST_CASE(the_limiter_and_its_context_go_with_a_round_trip_and_a_probe_in_flight) {
  redis_server server;
  auto io = std::make_unique<asio::io_context>();
  std::shared_ptr<std::optional<error_code>> pending;  // the call's result slot, shared with its handler
  {
    redis::fleet_limiter limiter{io->get_executor(), server.connection().command_timeout(5s),
                                redis::fleet_limiter_options{}.key("gone").max_lease(1)};
    BOOST_TEST(!call(*io, limiter));
    server.pause();
    pending = start_call(*io, limiter);  // its round trip waits on a paused Redis
    io->poll();
    BOOST_TEST(!pending->has_value());
    BOOST_TEST(pending.use_count() > 1);
  }
  io.reset();  // frees the waiting call's frame, and its handler with it
  BOOST_TEST(!pending->has_value(), "the call completed after its limiter was gone");
  BOOST_TEST(pending.use_count() == 1, "the waiting call's handler was not freed");
  server.resume();
}

BOOST_AUTO_TEST_SUITE_END()
