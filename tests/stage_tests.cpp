// resilience/stage.hpp: the call methods the two bases give every stage. A
// value stage is copied into a call once when named, moved when a
// temporary, and not at all when referred to; a stage with shared state
// runs the same call through run() and operator().
#include "support.hpp"

#include <resilience/circuit_breaker.hpp>
#include <resilience/fallback.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/rate_limiter.hpp>
#include <resilience/retry.hpp>
#include <resilience/stage.hpp>
#include <resilience/timeout.hpp>

#include <boost/system/system_error.hpp>

#include <chrono>
#include <optional>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using resilience::test::completion;
using resilience::test::spawn;

namespace {

// A fallback op that counts its copies: the stage's copies.
struct counted_fallback {
  static inline int copies = 0;
  counted_fallback() = default;
  counted_fallback(const counted_fallback&) { ++copies; }
  counted_fallback(counted_fallback&&) noexcept {}
  asio::awaitable<int> operator()() const { co_return 7; }
};

asio::awaitable<int> fails() {
  throw boost::system::system_error(resilience::error::timeout);
  co_return 0;
}
auto failing_op() {
  return [] { return fails(); };
}

int run_to_end(asio::io_context& io, asio::awaitable<int> call) {
  completion<int> done;
  spawn<int>(io, std::move(call), done);
  io.run();
  io.restart();
  BOOST_TEST_REQUIRE(done.times == 1);
  BOOST_TEST_REQUIRE(!done.exception);
  return *done.value;
}

using fallback_stage = decltype(resilience::fallback_to(counted_fallback{}));

// The by-reference call of a temporary value stage, and any call method a
// stage with shared state lacks, do not exist.
template <class S>
concept referable = requires(const S& s) { s.run_referenced(failing_op()); };
template <class S>
concept referable_as_temporary = requires(S&& s) { std::move(s).run_referenced(failing_op()); };
static_assert(referable<fallback_stage> && !referable_as_temporary<fallback_stage>);
static_assert(!referable<resilience::rate_limiter>);
static_assert(!std::is_copy_constructible_v<resilience::rate_limiter>);

// A stage of a user's own, as the cookbook writes one.
class call_counter : public resilience::stage_base<call_counter> {
 public:
  static constexpr bool respects_deadline = true;
  call_counter() = default;
  call_counter(const call_counter&) = delete;
  int calls() const noexcept { return calls_; }

 private:
  friend resilience::stage_base<call_counter>;
  template <class T, class Executor, class Op>
  auto call(Op op, const resilience::context& parent) const {
    return counted<T, Executor>(std::move(op), parent, &calls_);
  }
  template <class T, class Executor, class Op>
  static asio::awaitable<T, Executor> counted(Op op, resilience::context ctx, int* calls) {
    ++*calls;
    co_return co_await resilience::invoke_op(op, ctx);
  }
  mutable int calls_ = 0;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(stage)

BOOST_AUTO_TEST_CASE(a_stage_of_ones_own_writes_only_its_call_and_composes) {
  asio::io_context io;
  const call_counter attempts;
  int tries = 0;
  const auto policy = resilience::retry_policy{}.max_attempts(3).backoff(resilience::backoff::constant(0ms).with_jitter(resilience::jitter::none));
  const auto flaky = [&]() -> asio::awaitable<int> {
    if (++tries < 3) throw boost::system::system_error(resilience::error::timeout);
    co_return 9;
  };
  BOOST_TEST(run_to_end(io, resilience::pipeline(policy, attempts)(flaky)) == 9);
  BOOST_TEST(attempts.calls() == 3);  // inside the retry: every attempt
  BOOST_TEST(run_to_end(io, attempts(flaky)) == 9);
  BOOST_TEST(attempts.calls() == 4);
}

BOOST_AUTO_TEST_CASE(a_named_value_stage_is_copied_into_the_call_once_and_may_end_first) {
  asio::io_context io;
  std::optional<asio::awaitable<int>> call;
  {
    const auto stage = resilience::fallback_to(counted_fallback{});
    counted_fallback::copies = 0;
    call.emplace(stage.run(failing_op()));
    BOOST_TEST(counted_fallback::copies == 1);
  }
  BOOST_TEST(run_to_end(io, std::move(*call)) == 7);  // the copy's action
  BOOST_TEST(counted_fallback::copies == 1);
}

BOOST_AUTO_TEST_CASE(a_temporary_value_stage_is_moved_into_the_call) {
  asio::io_context io;
  counted_fallback::copies = 0;
  auto call = resilience::fallback_to(counted_fallback{})(failing_op());
  BOOST_TEST(counted_fallback::copies == 0);
  BOOST_TEST(run_to_end(io, std::move(call)) == 7);
}

BOOST_AUTO_TEST_CASE(a_value_stage_referred_to_is_not_copied) {
  asio::io_context io;
  const auto stage = resilience::fallback_to(counted_fallback{});
  counted_fallback::copies = 0;
  BOOST_TEST(run_to_end(io, stage.run_referenced(failing_op())) == 7);
  const resilience::pipeline held(stage);
  BOOST_TEST(run_to_end(io, held.run_referenced(failing_op())) == 7);
  BOOST_TEST(counted_fallback::copies == 1);  // into the pipeline, not into its calls
}

BOOST_AUTO_TEST_CASE(run_and_the_call_operator_are_one_call_on_the_shared_state) {
  asio::io_context io;
  const resilience::rate_limiter limiter{resilience::rate_limiter_options{}.token_bucket(1, 1h)};
  const auto succeeds = [] { return []() -> asio::awaitable<int> { co_return 1; }; };
  BOOST_TEST(run_to_end(io, limiter.run(succeeds())) == 1);
  completion<int> refused;
  spawn<int>(io, limiter(succeeds()), refused);
  io.run();
  BOOST_TEST_REQUIRE(static_cast<bool>(refused.exception));
  BOOST_CHECK_EXCEPTION(std::rethrow_exception(refused.exception), boost::system::system_error,
                        [](const auto& e) { return e.code() == resilience::error::rate_limited; });
}

BOOST_AUTO_TEST_CASE(a_retry_policy_is_a_value_stage_with_a_call_operator) {
  asio::io_context io;
  int attempts = 0;
  const auto policy = resilience::retry_policy{}.max_attempts(3).backoff(resilience::backoff::constant(0ms).with_jitter(resilience::jitter::none));
  auto call = policy([&]() -> asio::awaitable<int> {
    if (++attempts < 3) throw boost::system::system_error(resilience::error::timeout);
    co_return 5;
  });
  BOOST_TEST(run_to_end(io, std::move(call)) == 5);
  BOOST_TEST(attempts == 3);
}

BOOST_AUTO_TEST_SUITE_END()
