// The fallback stage: what it replaces (by default and by classifier), with
// a value or an op, what it never replaces (cancellation), the fallback op's
// own failure, void and error-channel results, a pipeline inside it, frames
// freed on cancellation and on shutdown, and its options.
#include "support.hpp"

#include <resilience/fallback.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/result.hpp>

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::context;
using resilience::outcome;
using resilience::time_point;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::live;
using resilience::test::names;
using resilience::test::spawn;

namespace {

using result = boost::system::result<int>;
using resilience::test::reset;
using resilience::test::refused;
using resilience::test::aborted;

struct fallback_fixture {
  asio::io_context io;
  manual_clock clock;
  int calls = 0;           // of the primary op
  int fallback_calls = 0;  // of the fallback op
  std::vector<error_code> replaced;  // what on_fallback saw

  // Waits `d` on the manual clock, then answers `r`.
  auto answer_after(result r, resilience::duration d = 10ms) {
    return [this, r, d]() -> asio::awaitable<result> {
      live frame(live::ops);
      ++calls;
      auto timer = clock.make_timer(co_await asio::this_coro::executor);
      timer.expires_after(d);
      auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return ec;
      co_return r;
    };
  }

  auto record() {
    return [this](const outcome<result>& o) { replaced.push_back(o.error()); };
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(fallback_replacement, fallback_fixture)

BOOST_AUTO_TEST_CASE(an_error_in_the_channel_is_replaced_by_the_value) {
  const auto stage = resilience::fallback_value(result(7)).on_fallback(record());
  completion<result> done;
  spawn(io, stage(answer_after(reset)), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_REQUIRE(done.value->has_value());
  BOOST_TEST(**done.value == 7);
  BOOST_TEST(replaced == (std::vector<error_code>{reset}));
}

BOOST_AUTO_TEST_CASE(a_stage_named_by_an_lvalue_is_copied_into_the_call) {
  completion<result> done;
  spawn(io, resilience::test::call_through_local(resilience::fallback_value(result(7)).on_fallback(record()),
                                                 answer_after(reset)),
        done);
  clock.run(io);
  BOOST_TEST(**done.value == 7);
  BOOST_TEST(replaced == (std::vector<error_code>{reset}), "the copy kept the hook");
}

BOOST_AUTO_TEST_CASE(an_exception_is_replaced_by_the_value) {
  std::vector<std::string> seen;
  const auto stage = resilience::fallback_value(-1).on_fallback([&](const outcome<int>& o) {
    try {
      std::rethrow_exception(o.exception());
    } catch (const std::runtime_error& e) {
      seen.emplace_back(e.what());
    }
  });
  completion<int> done;
  spawn(io, stage([]() -> asio::awaitable<int> {
          throw std::runtime_error("down");
          co_return 1;
        }),
        done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST(!done.exception);
  BOOST_TEST(*done.value == -1);
  BOOST_TEST(seen == (std::vector<std::string>{"down"}));
}

BOOST_AUTO_TEST_CASE(a_success_is_returned_and_nothing_falls_back) {
  const auto stage = resilience::fallback_value(result(7)).on_fallback(record());
  completion<result> done;
  spawn(io, stage(answer_after(3)), done);
  clock.run(io);
  BOOST_TEST(**done.value == 3);
  BOOST_TEST(replaced.empty());
}

BOOST_AUTO_TEST_CASE(the_op_fallback_gets_the_failed_outcome_and_the_context) {
  std::vector<std::uint32_t> attempts;
  const auto stage = resilience::fallback_to([&](const outcome<result>& failed,
                                                 const context& ctx) -> asio::awaitable<result> {
    ++fallback_calls;
    attempts.push_back(ctx.attempt);
    const error_code why = failed.error();  // read before suspending and after: the outcome must still be there
    auto timer = clock.make_timer(co_await asio::this_coro::executor);
    timer.expires_after(5ms);
    co_await timer.async_wait(asio::use_awaitable);
    BOOST_TEST(failed.error() == why);
    co_return why == reset ? 100 : 200;
  });
  context ctx;
  ctx.attempt = 4;
  completion<result> done;
  spawn(io, stage(answer_after(reset), ctx), done);
  clock.run(io);
  BOOST_TEST(**done.value == 100);
  BOOST_TEST(fallback_calls == 1);
  BOOST_TEST(attempts == (std::vector<std::uint32_t>{4}));
  BOOST_TEST((clock.now() == time_point{} + 15ms), "the fallback op ran before the op had failed, or not after it");
}

BOOST_AUTO_TEST_CASE(the_op_fallback_may_take_less) {
  const auto by_context = resilience::fallback_to([&](const context&) -> asio::awaitable<result> { co_return 1; });
  const auto by_nothing = resilience::fallback_to([&]() -> asio::awaitable<result> { co_return 2; });
  const auto by_outcome = resilience::fallback_to([&](const outcome<result>&) -> asio::awaitable<result> { co_return 3; });
  std::vector<completion<result>> done(3);
  spawn(io, by_context(answer_after(reset)), done[0]);
  spawn(io, by_nothing(answer_after(reset)), done[1]);
  spawn(io, by_outcome(answer_after(reset)), done[2]);
  clock.run(io);
  BOOST_TEST(**done[0].value == 1);
  BOOST_TEST(**done[1].value == 2);
  BOOST_TEST(**done[2].value == 3);
}

BOOST_AUTO_TEST_CASE(the_classifier_selects_what_is_replaced) {
  const auto only_refused = resilience::fallback_value(result(7))
                                .handle_if([](const outcome<result>& o) { return o.error() == refused; })
                                .on_fallback(record());
  std::vector<completion<result>> done(2);
  spawn(io, only_refused(answer_after(reset)), done[0]);
  spawn(io, only_refused(answer_after(refused)), done[1]);
  clock.run(io);
  BOOST_TEST((done[0].value->error() == reset), "an outcome the classifier did not select was replaced");
  BOOST_TEST(**done[1].value == 7);
  BOOST_TEST(replaced == (std::vector<error_code>{refused}));
}

BOOST_AUTO_TEST_CASE(a_classifier_may_select_a_value_and_read_the_context) {
  // A "successful" 503 is a failure for this caller, on a first attempt only.
  const auto stage = resilience::fallback_value(200).handle_if([](const outcome<int>& o, const context& ctx) {
    return ctx.attempt == 1 && (o.failed() || o.value() == 503);
  });
  const auto status = [](int s) { return [s]() -> asio::awaitable<int> { co_return s; }; };
  context second;
  second.attempt = 2;
  std::vector<completion<int>> done(3);
  spawn(io, stage(status(503)), done[0]);
  spawn(io, stage(status(404)), done[1]);
  spawn(io, stage(status(503), second), done[2]);
  clock.run(io);
  BOOST_TEST(*done[0].value == 200);
  BOOST_TEST(*done[1].value == 404);
  BOOST_TEST(*done[2].value == 503);
}

BOOST_AUTO_TEST_CASE(the_fallback_ops_own_failure_is_the_result) {
  const auto failing_fallback = resilience::fallback_to([&]() -> asio::awaitable<result> {
                                  ++fallback_calls;
                                  co_return refused;
                                }).on_fallback(record());
  const auto throwing_fallback = resilience::fallback_to([&]() -> asio::awaitable<int> {
    ++fallback_calls;
    throw std::logic_error("no replica");
    co_return 0;
  });
  completion<result> errored;
  completion<int> thrown;
  spawn(io, failing_fallback(answer_after(reset)), errored);
  spawn(io, throwing_fallback([]() -> asio::awaitable<int> {
          throw std::runtime_error("down");
          co_return 1;
        }),
        thrown);
  clock.run(io);
  BOOST_TEST((errored.value->error() == refused));
  BOOST_TEST(replaced == (std::vector<error_code>{reset}), "the fallback's own failure was fallen back on");
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(thrown), std::logic_error,
                        [](const auto& e) { return std::string(e.what()) == "no replica"; });
  BOOST_TEST(fallback_calls == 2);
}

BOOST_AUTO_TEST_CASE(a_hook_that_throws_becomes_the_outcome) {
  const auto stage = resilience::fallback_to([&]() -> asio::awaitable<result> {
                       ++fallback_calls;
                       co_return 1;
                     }).on_fallback([](const outcome<result>&) { throw std::runtime_error("hook"); });
  completion<result> done;
  spawn(io, stage(answer_after(reset)), done);
  clock.run(io);
  BOOST_CHECK_THROW(resilience::test::rethrow(done), std::runtime_error);
  BOOST_TEST(fallback_calls == 0);
}

BOOST_AUTO_TEST_CASE(void_ops) {
  int swallowed = 0;
  const auto swallow = resilience::fallback_value().on_fallback([&](const outcome<void>& o) {
    swallowed += o.has_exception() ? 1 : 0;
  });
  const auto to_op = resilience::fallback_to([&](const outcome<void>&) -> asio::awaitable<void> {
    ++fallback_calls;
    co_return;
  });
  const auto throws = []() -> asio::awaitable<void> {
    throw std::runtime_error("down");
    co_return;
  };
  int ran = 0;
  const auto succeeds = [&]() -> asio::awaitable<void> {
    ++ran;
    co_return;
  };
  std::vector<completion<void>> done(3);
  spawn(io, swallow(throws), done[0]);
  spawn(io, to_op(throws), done[1]);
  spawn(io, swallow(succeeds), done[2]);
  clock.run(io);
  for (auto& d : done) {
    BOOST_TEST(d.times == 1);
    BOOST_TEST(!d.exception);
  }
  BOOST_TEST(swallowed == 1);
  BOOST_TEST(fallback_calls == 1);
  BOOST_TEST(ran == 1);
}

BOOST_AUTO_TEST_CASE(a_tuple_error_channel) {
  using reply = std::tuple<error_code, std::string>;
  const auto stage = resilience::fallback_value(reply{error_code{}, "cached"});
  completion<reply> failed;
  completion<reply> fine;
  spawn(io, stage([]() -> asio::awaitable<reply> { co_return reply{reset, ""}; }), failed);
  spawn(io, stage([]() -> asio::awaitable<reply> { co_return reply{error_code{}, "fresh"}; }), fine);
  clock.run(io);
  BOOST_TEST(std::get<1>(*failed.value) == "cached");
  BOOST_TEST(!std::get<0>(*failed.value));
  BOOST_TEST(std::get<1>(*fine.value) == "fresh");
}

BOOST_AUTO_TEST_CASE(around_a_pipeline_with_retry_and_timeout) {
  // Every attempt outlives its timeout; the retry gives up after 3 and the
  // fallback replaces the last timeout.
  const auto call = resilience::pipeline(resilience::fallback_value(result(-1)).on_fallback(record()),
                                         resilience::retry_policy{}
                                             .max_attempts(3)
                                             .backoff(resilience::backoff::constant(50ms))
                                             .jitter(resilience::jitter::none),
                                         resilience::timeout(100ms))
                        .clock(clock);
  completion<result> done;
  spawn(io, call(answer_after(3, 1h)), done);
  clock.run(io);
  BOOST_TEST(**done.value == -1);
  BOOST_TEST(calls == 3);
  BOOST_TEST(replaced == (std::vector<error_code>{resilience::error::timeout}));
  BOOST_TEST((clock.now() == time_point{} + 3 * 100ms + 2 * 50ms));
  BOOST_TEST(live::ops == 0);
}

BOOST_AUTO_TEST_CASE(a_fallback_op_that_runs_a_pipeline) {
  const auto replica = resilience::pipeline(resilience::retry_policy{}.max_attempts(2).backoff(
                                                resilience::backoff::constant(1ms).with_jitter(resilience::jitter::none)),
                                            resilience::timeout(100ms))
                           .clock(clock);
  int replica_calls = 0;
  const auto stage = resilience::fallback_to([&](const context& ctx) {
    return replica(
        [&]() -> asio::awaitable<result> {
          if (++replica_calls == 1) co_return reset;
          co_return 55;
        },
        ctx);
  });
  completion<result> done;
  spawn(io, stage(answer_after(refused)), done);
  clock.run(io);
  BOOST_TEST(**done.value == 55);
  BOOST_TEST(replica_calls == 2);
}

BOOST_AUTO_TEST_CASE(a_temporary_stage_is_moved_into_the_call) {
  completion<result> done;
  {
    auto call = resilience::fallback_value(result(9))(answer_after(reset));
    spawn(io, std::move(call), done);
  }
  clock.run(io);
  BOOST_TEST(**done.value == 9);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(fallback_cancellation, fallback_fixture)

BOOST_AUTO_TEST_CASE(a_cancellation_the_op_reports_is_never_replaced) {
  const auto stage = resilience::fallback_value(result(7))
                         .handle_if([](const outcome<result>&) { return true; })
                         .on_fallback(record());
  completion<result> done;
  spawn(io, stage(answer_after(aborted)), done);
  clock.run(io);
  BOOST_TEST((done.value->error() == aborted));
  BOOST_TEST(replaced.empty());
}

BOOST_AUTO_TEST_CASE(cancelling_the_caller_while_the_op_runs_is_final) {
  const auto stage = resilience::fallback_value(result(7)).on_fallback(record());
  completion<result> done;
  asio::cancellation_signal signal;
  spawn(io, stage(answer_after(3, 1h)), done, &signal);
  clock.run_for(io, 1s);
  BOOST_REQUIRE(calls == 1);
  signal.emit(asio::cancellation_type::terminal);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value->error() == aborted));
  BOOST_TEST(replaced.empty());
  BOOST_TEST(live::ops == 0);
  BOOST_TEST(clock.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(an_op_that_turns_the_callers_cancellation_into_another_error_is_not_replaced) {
  const auto stage = resilience::fallback_value(7).on_fallback([&](const outcome<int>&) { ++fallback_calls; });
  completion<int> done;
  asio::cancellation_signal signal;
  spawn(io, stage([&]() -> asio::awaitable<int> {
          auto timer = clock.make_timer(co_await asio::this_coro::executor);
          timer.expires_after(1h);
          co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
          throw std::runtime_error("interrupted");  // not a cancellation, but the caller cancelled
        }),
        done, &signal);
  clock.run_for(io, 1s);
  signal.emit(asio::cancellation_type::terminal);
  clock.run(io);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), boost::system::system_error,
                        [](const auto& e) { return e.code() == aborted; });
  BOOST_TEST(fallback_calls == 0);
}

BOOST_AUTO_TEST_CASE(cancelling_the_caller_while_the_fallback_op_runs) {
  const auto stage = resilience::fallback_to([&]() -> asio::awaitable<result> {
    live frame(live::ops);
    ++fallback_calls;
    auto timer = clock.make_timer(co_await asio::this_coro::executor);
    timer.expires_after(1h);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return ec;
    co_return 1;
  });
  completion<result> done;
  asio::cancellation_signal signal;
  spawn(io, stage(answer_after(reset)), done, &signal);
  clock.run_for(io, 1s);
  BOOST_REQUIRE(fallback_calls == 1);
  signal.emit(asio::cancellation_type::terminal);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value->error() == aborted));
  BOOST_TEST(fallback_calls == 1);
  BOOST_TEST(live::ops == 0);
}

BOOST_AUTO_TEST_CASE(a_context_destroyed_mid_call_frees_every_frame) {
  int completed = 0;
  manual_clock local;
  const auto stage = resilience::fallback_to([&]() -> asio::awaitable<result> {
    live frame(live::ops);
    auto timer = local.make_timer(co_await asio::this_coro::executor);
    timer.expires_after(1h);
    co_await timer.async_wait(asio::use_awaitable);
    co_return 1;
  });
  {
    asio::io_context ctx;
    // One call suspended in its op, one in its fallback op.
    for (resilience::duration fail_after : {resilience::duration(2h), resilience::duration(1ms)}) {
      asio::co_spawn(ctx,
                     stage([&local, fail_after]() -> asio::awaitable<result> {
                       live frame(live::ops);
                       auto timer = local.make_timer(co_await asio::this_coro::executor);
                       timer.expires_after(fail_after);
                       co_await timer.async_wait(asio::use_awaitable);
                       co_return reset;
                     }),
                     [&completed, guard = live(live::handlers)](std::exception_ptr, auto&&...) { ++completed; });
    }
    local.run_for(ctx, 1s);
    BOOST_REQUIRE(live::ops == 2);
  }
  BOOST_TEST(completed == 0);
  BOOST_TEST(live::ops == 0, "frames left after the context was destroyed");
  BOOST_TEST(live::handlers == 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(fallback_options_validation)

BOOST_AUTO_TEST_CASE(empty_callables_throw_naming_the_field) {
  using op = std::function<asio::awaitable<int>(const context&)>;
  BOOST_CHECK_EXCEPTION(resilience::fallback_to(op{}), std::invalid_argument, names("fallback_to"));
  BOOST_CHECK_EXCEPTION(resilience::fallback_value(1).on_fallback(std::function<void(const outcome<int>&)>{}),
                        std::invalid_argument, names("on_fallback"));
  BOOST_CHECK_EXCEPTION(resilience::fallback_value(1).handle_if(std::function<bool(const outcome<int>&)>{}),
                        std::invalid_argument, names("handle_if"));
  asio::awaitable<int> (*null_op)() = nullptr;
  BOOST_CHECK_EXCEPTION(resilience::fallback_to(null_op), std::invalid_argument, names("fallback_to"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(fallback_cancelled_from_inside, fallback_fixture)

// These calls end without suspending: Asio must not throw out of run().
BOOST_AUTO_TEST_CASE(a_hook_that_cancels_the_caller_ends_the_call_as_aborted) {
  asio::cancellation_signal signal;
  const auto stage = resilience::fallback_to([&]() -> asio::awaitable<result> {
                       ++fallback_calls;
                       co_return 1;
                     }).on_fallback([&](const outcome<result>&) { signal.emit(asio::cancellation_type::terminal); });
  completion<result> done;
  spawn(io, stage([]() -> asio::awaitable<result> { co_return reset; }), done, &signal);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value->error() == aborted));
  BOOST_TEST(fallback_calls == 0);
}

BOOST_AUTO_TEST_CASE(an_op_that_cancels_its_caller_and_fails) {
  asio::cancellation_signal signal;
  const auto stage = resilience::fallback_value(7).on_fallback([&](const outcome<int>&) { ++fallback_calls; });
  completion<int> done;
  spawn(io, stage([&]() -> asio::awaitable<int> {
          signal.emit(asio::cancellation_type::terminal);
          throw std::runtime_error("gave up");
          co_return 0;
        }),
        done, &signal);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), boost::system::system_error,
                        [](const auto& e) { return e.code() == aborted; });
  BOOST_TEST(fallback_calls == 0);
}

BOOST_AUTO_TEST_SUITE_END()
