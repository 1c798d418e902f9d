// Per-call properties: typed keys, kept for the whole call by the caller,
// read and written by the op, the classifiers and the caller.
#include "support.hpp"

#include <resilience/circuit_breaker.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/properties.hpp>
#include <resilience/retry.hpp>
#include <resilience/timeout.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <string>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::context;
using resilience::properties;
using resilience::property_key;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::spawn;

namespace {

constexpr property_key<bool> request_sent{"request_sent"};
constexpr property_key<bool> idempotent{"idempotent"};
constexpr property_key<int> attempts_seen{"attempts_seen"};
constexpr property_key<std::string> server{"server"};
constexpr property_key<std::chrono::milliseconds> pushback{"pushback"};
constexpr property_key<double> load{"load"};
constexpr property_key<long> spare{"spare"};

using resilience::test::reset;

// Retries a failure unless the request may have been sent and is not
// idempotent: the classifier reads what the caller and the op marked.
auto safe_to_retry = [](const auto& o, const context& ctx) {
  return o.failed() && !o.cancelled() &&
         (ctx.value_or(idempotent, false) || !ctx.value_or(request_sent, false));
};

}  // namespace

BOOST_AUTO_TEST_SUITE(per_call_properties)

BOOST_AUTO_TEST_CASE(set_find_replace_erase) {
  properties p;
  BOOST_TEST(p.empty());
  BOOST_TEST(p.find(request_sent) == nullptr);
  BOOST_TEST(p.value_or(attempts_seen, -1) == -1);
  p.set(request_sent, true);
  p.set(attempts_seen, 3);
  p.set(server, "db-1");
  BOOST_TEST(p.size() == 3u);
  BOOST_TEST(*p.find(request_sent));
  BOOST_TEST(p.value_or(attempts_seen, 0) == 3);
  BOOST_TEST(*p.find(server) == "db-1");
  p.set(attempts_seen, 4);
  p.set(server, std::string("db-2"));
  BOOST_TEST(p.size() == 3u);
  BOOST_TEST(p.value_or(attempts_seen, 0) == 4);
  BOOST_TEST(*p.find(server) == "db-2");
  BOOST_TEST(p.erase(server));
  BOOST_TEST(!p.erase(server));
  BOOST_TEST(!p.contains(server));
  BOOST_TEST(p.erase(request_sent));
  BOOST_TEST(p.size() == 1u);
}

BOOST_AUTO_TEST_CASE(more_small_values_than_inline_slots) {
  properties p;
  p.set(request_sent, true);
  p.set(idempotent, false);
  p.set(attempts_seen, 1);
  p.set(pushback, 250ms);
  p.set(load, 0.5);  // the fifth: on the heap
  p.set(spare, 7L);
  BOOST_TEST(p.size() == 6u);
  BOOST_TEST(p.value_or(load, 0.0) == 0.5);
  BOOST_TEST((p.value_or(pushback, 0ms) == 250ms));
  // A slot frees up; the heap value stays the one that is read and erased.
  BOOST_TEST(p.erase(attempts_seen));
  p.set(load, 0.75);
  BOOST_TEST(p.value_or(load, 0.0) == 0.75);
  BOOST_TEST(p.erase(load));
  BOOST_TEST(!p.contains(load), "no stale copy left behind");
  BOOST_TEST(p.size() == 4u);
  p.clear();
  BOOST_TEST(p.empty());
}

BOOST_AUTO_TEST_CASE(a_context_without_properties_keeps_nothing) {
  const context ctx;
  BOOST_TEST(!ctx.set(request_sent, true));
  BOOST_TEST(ctx.find(request_sent) == nullptr);
  BOOST_TEST(ctx.value_or(request_sent, false) == false);
  properties p;
  const context with = ctx.with(p);
  BOOST_TEST(with.set(request_sent, true));
  BOOST_TEST(*p.find(request_sent));
  BOOST_TEST(ctx.props == nullptr, "with() leaves the original alone");
}

BOOST_AUTO_TEST_CASE(the_classifier_reads_what_the_op_and_the_caller_marked) {
  for (const bool is_idempotent : {false, true}) {
    asio::io_context io;
    manual_clock clock;
    properties props;
    if (is_idempotent) props.set(idempotent, true);
    int calls = 0;
    const auto policy = resilience::retry_policy{}
                            .max_attempts(4)
                            .backoff(resilience::backoff::constant(10ms).with_jitter(resilience::jitter::none))
                            .clock(clock)
                            .retry_if(safe_to_retry);
    // The first attempt fails before sending; the others after.
    auto op = [&](const context& ctx) -> asio::awaitable<error_code> {
      if (++calls > 1) ctx.set(request_sent, true);
      ctx.set(attempts_seen, ctx.attempt);
      co_return reset;
    };
    completion<error_code> done;
    spawn(io, resilience::co_retry(op, policy, context{}.with(props)), done);
    clock.run(io);
    BOOST_TEST((done.value == reset));
    BOOST_TEST(calls == (is_idempotent ? 4 : 2), "idempotent: " << is_idempotent);
    BOOST_TEST(props.value_or(attempts_seen, 0) == calls, "the caller sees the op's marks");
  }
}

BOOST_AUTO_TEST_CASE(marks_survive_a_timeout_that_ended_the_attempt) {
  asio::io_context io;
  manual_clock clock;
  properties props;
  int calls = 0;
  const auto call = resilience::pipeline(resilience::retry_policy{}
                                             .max_attempts(3)
                                             .backoff(resilience::backoff::constant(10ms).with_jitter(resilience::jitter::none))
                                             .clock(clock)
                                             .retry_if(safe_to_retry),
                                         resilience::timeout(50ms).clock(clock));
  // Sends, then hangs until the timeout cancels it.
  auto op = [&](const context& ctx) -> asio::awaitable<error_code> {
    ++calls;
    ctx.set(request_sent, true);
    auto timer = clock.make_timer(co_await asio::this_coro::executor);
    timer.expires_after(1h);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return ec;
  };
  completion<error_code> done;
  spawn(io, call(op, context{}.with(props)), done);
  clock.run(io);
  BOOST_TEST((done.value == resilience::error::timeout));
  BOOST_TEST(calls == 1, "sent and not idempotent: the timeout is not retried");
  BOOST_TEST(props.value_or(request_sent, false), "the op's mark outlived the attempt");
}

BOOST_AUTO_TEST_CASE(a_breaker_classifier_reads_them_too) {
  asio::io_context io;
  manual_clock clock;
  resilience::basic_circuit_breaker<manual_clock> breaker{resilience::breaker_options{}.consecutive_failures(1),
                                                          clock};
  // Only failures after the request was sent count against the dependency.
  const auto stage = breaker.stage([](const auto& o, const context& ctx) {
    return o.failed() && ctx.value_or(request_sent, false);
  });
  for (const bool sent : {false, true}) {
    properties props;
    completion<error_code> done;
    spawn(io,
          stage.run(
              [sent](const context& ctx) -> asio::awaitable<error_code> {
                ctx.set(request_sent, sent);
                co_return reset;
              },
              context{}.with(props)),
          done);
    io.run();
    io.restart();
    BOOST_TEST((done.value == reset));
    BOOST_TEST((breaker.state() == (sent ? resilience::circuit_state::open : resilience::circuit_state::closed)));
  }
}

BOOST_AUTO_TEST_SUITE_END()
