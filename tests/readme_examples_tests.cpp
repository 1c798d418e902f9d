// Examples of the README and docs/ (as written there, originally the README's), on virtual time: each one
// compiles against the public headers and does what its text says. Only
// what the README leaves to the reader (a mailer, a database, a response
// type) is filled in here, and each example's clock is set to a manual one.
#include "support.hpp"

#include <resilience/breaker_registry.hpp>
#include <resilience/bulkhead.hpp>
#include <resilience/chaos.hpp>
#include <resilience/deadline.hpp>
#include <resilience/error.hpp>
#include <resilience/fallback.hpp>
#include <resilience/hedging.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/properties.hpp>
#include <resilience/retry.hpp>
#include <resilience/retry_budget.hpp>
#include <resilience/timeout.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::spawn;

namespace {

struct virtual_time {
  asio::io_context io;
  manual_clock clock;

  // Hangs until its context is cancelled (by a timeout, a deadline, a winning hedge).
  asio::awaitable<error_code> hang() {
    auto timer = clock.make_timer(co_await asio::this_coro::executor);
    timer.expires_after(24h);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return ec;
  }
};

// What the README calls a mailer: fails with connection_reset `failures` times.
struct mailer {
  int failures = 0;
  error_code permanent{};
  std::vector<std::uint32_t> attempts_seen;

  asio::awaitable<error_code> async_send(const std::string&, std::uint32_t attempt) {
    attempts_seen.push_back(attempt);
    if (permanent) co_return permanent;
    if (failures > 0) {
      --failures;
      co_return error_code(asio::error::connection_reset);
    }
    co_return error_code{};
  }
};

constexpr resilience::property_key<bool> idempotent{"idempotent"};
constexpr resilience::property_key<bool> request_sent{"request_sent"};

struct response {
  int status = 200;
  std::optional<resilience::duration> retry_after;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(readme_examples, virtual_time)

// The README's first example (compiled as written there by docs_examples), run:
// transient errors are retried, the attempt number reaches the op.
BOOST_AUTO_TEST_CASE(quick_start_retries_what_the_classifier_names) {
  const auto policy = resilience::retry_policy{}
                          .max_attempts(5)
                          .backoff(resilience::backoff::exponential(100ms, 2.0, 5s))
                          .jitter(resilience::jitter::full)
                          .time_limit(20s)
                          .retry_if(resilience::retry_on_errors{boost::asio::error::connection_reset,
                                                                boost::asio::error::timed_out})
                          .clock(clock);
  mailer m;
  m.failures = 2;
  std::vector<error_code> logged;
  auto send_welcome = [&](mailer& m, std::string to) -> asio::awaitable<void> {
    error_code ec = co_await resilience::co_retry(
        [&](const resilience::context& ctx) { return m.async_send(to, ctx.attempt); }, policy);
    if (ec) logged.push_back(ec);
  };
  completion<void> done;
  spawn(io, send_welcome(m, "ada@example.com"), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST(logged.empty());
  BOOST_TEST(m.attempts_seen == (std::vector<std::uint32_t>{1, 2, 3}));
  // Full jitter of 100 ms then 200 ms: at most 300 ms of virtual time.
  BOOST_TEST((clock.now().time_since_epoch() <= 300ms));

  // A permanent error is the call's result after one attempt.
  mailer refused;
  refused.permanent = asio::error::access_denied;
  completion<void> done2;
  spawn(io, send_welcome(refused, "bob@example.com"), done2);
  clock.run(io);
  BOOST_TEST(refused.attempts_seen.size() == 1u);
  BOOST_TEST(logged == (std::vector<error_code>{asio::error::access_denied}));
}

// "Delays from outcomes": the server's Retry-After is the wait, exactly.
BOOST_AUTO_TEST_CASE(retry_after_from_the_outcome_is_the_wait) {
  const auto polite = resilience::retry_policy{}
                          .max_attempts(resilience::unlimited_attempts)
                          .time_limit(1min)
                          .retry_if([](const resilience::outcome<response>& o) {
                            return o.failed() || o.value().status == 503;
                          })
                          .delay_generator([](const resilience::outcome<response>& o, const resilience::context&) {
                            if (o.has_value() && o.value().retry_after)
                              return resilience::retry_delay::after(*o.value().retry_after);
                            return resilience::retry_delay::backoff();
                          })
                          .clock(clock);
  std::vector<resilience::time_point> calls;
  auto op = [&]() -> asio::awaitable<response> {
    calls.push_back(clock.now());
    if (calls.size() == 1) co_return response{503, 7s};
    co_return response{200, std::nullopt};
  };
  completion<response> done;
  spawn(io, resilience::co_retry(op, polite), done);
  clock.run(io);
  BOOST_REQUIRE(done.value);
  BOOST_TEST(done.value->status == 200);
  BOOST_REQUIRE(calls.size() == 2u);
  BOOST_TEST((calls[1] - calls[0] == 7s));
}

// "Per-call properties": a request marked sent is retried only when idempotent.
BOOST_AUTO_TEST_CASE(properties_decide_whether_a_sent_request_is_repeated) {
  const auto safe_retry = resilience::retry_policy{}
                              .retry_if([](const resilience::outcome<response>& o, const resilience::context& ctx) {
                                return o.failed() &&
                                       (ctx.value_or(idempotent, false) || !ctx.value_or(request_sent, false));
                              })
                              .clock(clock);
  for (const bool is_get : {false, true}) {
    int attempts = 0;
    resilience::properties props;
    props.set(idempotent, is_get);
    auto call = [&]() -> asio::awaitable<response> {
      co_return co_await resilience::co_retry(
          [&](const resilience::context& ctx) -> asio::awaitable<response> {
            ++attempts;
            ctx.set(request_sent, true);
            throw boost::system::system_error(asio::error::connection_reset);
            co_return response{};
          },
          safe_retry, resilience::context{}.with(props));
    };
    completion<response> done;
    spawn(io, call(), done);
    clock.run(io);
    BOOST_TEST(static_cast<bool>(done.exception));
    BOOST_TEST(attempts == (is_get ? 3 : 1));
    BOOST_TEST(props.value_or(request_sent, false));  // the op's mark reached the caller
  }
}

// "Pipelines": the deadline bounds the whole call, the timeout each attempt,
// and the op is told how much time its attempt has left.
BOOST_AUTO_TEST_CASE(pipeline_deadline_outside_retry_outside_timeout) {
  const auto call_backend = resilience::pipeline(resilience::deadline_stage(2s),
                                                 resilience::retry_policy{}.max_attempts(4),
                                                 resilience::timeout(300ms))
                                .clock(clock);
  std::vector<resilience::duration> remaining;
  auto call = [&]() -> asio::awaitable<error_code> {
    co_return co_await call_backend([&](const resilience::context& ctx) {
      remaining.push_back(ctx.remaining(clock));
      return hang();
    });
  };
  completion<error_code> done;
  spawn(io, call(), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST(remaining.size() == 4u);  // every attempt timed out, none ran past the deadline
  BOOST_REQUIRE(!remaining.empty());
  // The op is told the tighter bound: its attempt's timeout, within the deadline.
  BOOST_TEST((remaining.front() == 300ms));
  for (const auto r : remaining) BOOST_TEST((r > 0ms && r <= 300ms));
  BOOST_TEST((clock.now().time_since_epoch() <= 2s));
  BOOST_TEST((done.value.has_value() || done.exception != nullptr));
}

// "Breakers per key": the host's breaker opens after 5 failures in a row and
// the registry shows it.
BOOST_AUTO_TEST_CASE(breaker_registry_opens_the_host_that_fails) {
  resilience::basic_breaker_registry<std::string, manual_clock> breakers{
      resilience::breaker_options{}.consecutive_failures(5).open_duration(10s),
      resilience::breaker_registry_options{}.max_breakers(1000).idle_after(10min), clock};
  const auto policy = resilience::retry_policy{}.max_attempts(1).clock(clock);
  int calls = 0;
  auto call = [&](std::string host) -> asio::awaitable<error_code> {
    co_return co_await resilience::pipeline(policy, breakers.stage(host))([&]() -> asio::awaitable<error_code> {
      ++calls;
      co_return asio::error::connection_refused;
    });
  };
  std::vector<error_code> results;
  for (int i = 0; i < 6; ++i) {
    completion<error_code> done;
    spawn(io, call("db-1"), done);
    clock.run(io);
    BOOST_REQUIRE(done.value);
    results.push_back(*done.value);
  }
  BOOST_TEST(calls == 5);
  BOOST_TEST(results.back() == error_code(resilience::error::circuit_open));
  bool seen = false;
  for (const auto& e : breakers.snapshot()) {
    if (e.key != "db-1") continue;
    seen = true;
    BOOST_TEST(std::string(resilience::to_string(e.metrics.state)) == "open");
  }
  BOOST_TEST(seen);
}

// "Retry budgets": once the throttle's tokens are spent, a failure is not
// retried and the call ends with retry_budget_exhausted.
BOOST_AUTO_TEST_CASE(retry_throttle_refuses_retries_once_tokens_run_low) {
  resilience::retry_token_budget throttle{10, 0.1};
  std::vector<std::uint32_t> refused_at;
  const auto policy = resilience::retry_policy{}
                          .max_attempts(4)
                          .budget(throttle)
                          .on_budget_refused([&](const resilience::budget_refusal& r) { refused_at.push_back(r.attempt); })
                          .budget_refusal_as_error()
                          .clock(clock);
  int attempts = 0;
  auto failing = [&]() -> asio::awaitable<error_code> {
    ++attempts;
    co_return asio::error::connection_reset;
  };
  std::vector<error_code> results;
  for (int i = 0; i < 3; ++i) {
    completion<error_code> done;
    spawn(io, resilience::co_retry(failing, policy), done);
    clock.run(io);
    BOOST_REQUIRE(done.value);
    results.push_back(*done.value);
  }
  // 10 tokens, one per failure, retries while more than 5 are left: the
  // first call makes its 4 attempts, later ones are refused.
  BOOST_TEST(results.front() == error_code(asio::error::connection_reset));
  BOOST_TEST(results.back() == error_code(resilience::error::retry_budget_exhausted));
  BOOST_TEST(!refused_at.empty());
  BOOST_TEST(attempts < 12);
}

// "Bulkheads": 8 inside at once; a permit goes back when it goes out of scope.
BOOST_AUTO_TEST_CASE(bulkhead_limits_and_gives_permits_back) {
  int rejected = 0;
  resilience::bulkhead db_calls{resilience::bulkhead_options{}
                                    .max_concurrent(8)
                                    .max_queue(100)
                                    .max_wait(250ms)
                                    .on_rejected([&](const resilience::bulkhead_rejection&) { ++rejected; })};
  {
    std::vector<decltype(db_calls.try_acquire())> held;
    for (int i = 0; i < 8; ++i) {
      held.push_back(db_calls.try_acquire());
      BOOST_TEST(static_cast<bool>(held.back()));
    }
    BOOST_TEST(!db_calls.try_acquire());
  }
  BOOST_TEST(static_cast<bool>(db_calls.try_acquire()));
  auto count = []() -> asio::awaitable<int> { co_return 42; };
  completion<int> done;
  spawn(io, db_calls([&] { return count(); }), done);
  io.run();
  BOOST_REQUIRE(done.value);
  BOOST_TEST(*done.value == 42);
}

// "Hedging": when the first attempt gives no answer for 40 ms, a hedge runs
// beside it and its answer wins; the first attempt is cancelled and waited for.
BOOST_AUTO_TEST_CASE(hedge_answers_when_the_first_attempt_hangs) {
  const auto hedged = resilience::hedging_policy{}
                          .max_attempts(3)
                          .delay(40ms)
                          .non_fatal_if(resilience::retry_on_errors{boost::asio::error::connection_reset})
                          .clock(clock);
  std::vector<resilience::time_point> started;
  auto query = [&](const resilience::context& ctx) -> asio::awaitable<error_code> {
    started.push_back(clock.now());
    if (ctx.attempt == 1) co_return co_await hang();
    co_return error_code{};
  };
  completion<error_code> done;
  spawn(io, hedged(query), done);
  clock.run(io);
  BOOST_REQUIRE(done.value);
  BOOST_TEST(!*done.value);
  BOOST_REQUIRE(started.size() == 2u);
  BOOST_TEST((started[1] - started[0] == 40ms));
}

// "Fallbacks and chaos": with the fault switched on, every attempt fails and
// the replica answers; switched off, the primary does.
BOOST_AUTO_TEST_CASE(fallback_outside_retry_outside_injected_faults) {
  struct price {
    int cents = 0;
  };
  int fallbacks = 0;
  auto replica_price = []() -> asio::awaitable<price> { co_return price{99}; };
  const auto from_replica =
      resilience::fallback_to([&](const resilience::outcome<price>&, const resilience::context&) { return replica_price(); })
          .handle_if([](const resilience::outcome<price>& o) {
            return o.failed() && o.error() != boost::system::errc::permission_denied;
          })
          .on_fallback([&](const resilience::outcome<price>&) { ++fallbacks; });
  resilience::chaos_switch chaos_on{false};
  const auto flaky = resilience::chaos_error(boost::asio::error::connection_reset,
                                             resilience::chaos_options{}.rate(1.0).enabled_by(chaos_on));
  const auto retry_policy =
      resilience::retry_policy{}.max_attempts(3).backoff(resilience::backoff::constant(10ms).with_jitter(resilience::jitter::none));
  const auto call =
      resilience::pipeline(from_replica, retry_policy, resilience::timeout(1s), flaky).clock(clock);
  int primary_calls = 0;
  auto primary = [&]() -> asio::awaitable<price> {
    ++primary_calls;
    co_return price{100};
  };
  for (const bool faults : {true, false}) {
    if (faults) chaos_on.enable();
    else chaos_on.disable();
    completion<price> done;
    spawn(io, call(primary), done);
    clock.run(io);
    BOOST_REQUIRE(done.value);
    BOOST_TEST(done.value->cents == (faults ? 99 : 100));
  }
  BOOST_TEST(fallbacks == 1);
  BOOST_TEST(primary_calls == 1);  // the faults stood in for the dependency
}

BOOST_AUTO_TEST_SUITE_END()
