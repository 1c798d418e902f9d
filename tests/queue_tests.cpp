// What every stage that queues its callers until there is room does with a
// waiter that is cancelled: it leaves the queue at once (queued() drops when
// the cancellation is emitted), ends with operation_aborted, loses no permit
// and leaves no timer armed; the waiter behind it keeps its place. One table
// of such stages (a row added is a strategy covered); what only one of them
// does stays in its own file (bulkhead_tests, rate_limiter_tests).
#include "support.hpp"

#include <resilience/bulkhead.hpp>
#include <resilience/rate_limiter.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/mpl/list.hpp>

#include <chrono>
#include <cstdint>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::duration;
using resilience::time_point;
using resilience::testing::manual_clock;
using resilience::test::aborted;
using resilience::test::completion;
using resilience::test::spawn;

namespace {

// Each row: `stage`, full at virtual time zero, so that a call queues (with
// a timer armed for it); make_room() lets one waiter in, at once or as
// virtual time passes; `next_admitted_after` is when, from time zero, the
// second waiter gets in once the first has left. try_acquire() then finds
// exactly one permit: the one the cancelled waiter did not take.
namespace queue_rows {

// One slot, held; a waiter gives up after an hour (a timer each).
struct a_bulkhead {
  manual_clock clock;
  int rejections = 0;
  resilience::basic_bulkhead<manual_clock> stage{resilience::bulkhead_options{}
                                                     .max_concurrent(1)
                                                     .max_queue(5)
                                                     .max_wait(1h)
                                                     .on_rejected([this](const auto&) { ++rejections; }),
                                                 clock};
  resilience::bulkhead_permit held = stage.try_acquire();
  static constexpr duration next_admitted_after = 0ms;
  void make_room() { held.release(); }
};

// 10 a second with a burst of 2, emptied: the waiters' tokens come at 100
// and 200 ms. The second keeps its 200 ms; the 100 ms token stays in the
// bucket.
struct a_rate_limiter {
  manual_clock clock;
  int rejections = 0;
  resilience::basic_rate_limiter<manual_clock> stage{
      resilience::rate_limiter_options{}.token_bucket(10, 1s, 2).max_wait(1s).on_rejected(
          [this](const auto&) { ++rejections; }),
      clock};
  a_rate_limiter() {
    BOOST_REQUIRE(stage.try_acquire());
    BOOST_REQUIRE(stage.try_acquire());
  }
  static constexpr duration next_admitted_after = 200ms;
  void make_room() {}  // time brings the tokens
};

}  // namespace queue_rows

using queueing_stages = boost::mpl::list<queue_rows::a_bulkhead, queue_rows::a_rate_limiter>;

const time_point t0{};

// A row, an io_context, and ops that record when they start.
template <class Row>
struct queue_fixture : Row {
  asio::io_context io;
  std::vector<int> admitted;  // op ids, in the order the ops started
  std::vector<time_point> admitted_at;

  auto op(int id) {
    return [this, id]() -> asio::awaitable<error_code> {
      admitted.push_back(id);
      admitted_at.push_back(this->clock.now());
      co_return error_code{};
    };
  }
  void poll() {
    while (io.poll() != 0) {
    }
    io.restart();
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(a_cancelled_waiter)

BOOST_AUTO_TEST_CASE_TEMPLATE(leaves_the_queue_at_once_and_loses_no_permit, Row, queueing_stages) {
  queue_fixture<Row> f;
  std::vector<completion<error_code>> done(2);
  asio::cancellation_signal first;
  spawn(f.io, f.stage(f.op(0)), done[0], &first);
  spawn(f.io, f.stage(f.op(1)), done[1]);
  f.poll();
  BOOST_REQUIRE(f.stage.queued() == 2u);
  BOOST_REQUIRE(f.clock.pending() == 2u);
  // Emitted on the io_context's thread, where the cancellation reaches the
  // waiter inline: it must be out of the queue when emit() returns.
  std::uint32_t queued_after_emit = 99;
  asio::post(f.io, [&] {
    first.emit(asio::cancellation_type::terminal);
    queued_after_emit = f.stage.queued();
  });
  f.poll();
  BOOST_TEST(queued_after_emit == 1u, "still queued after its cancellation");
  BOOST_TEST(done[0].times == 1);
  BOOST_TEST((done[0].value == aborted));
  BOOST_TEST((f.clock.now() == t0));
  BOOST_TEST(f.clock.pending() == 1u, "the cancelled waiter's timer is still armed");

  f.make_room();
  f.clock.run(f.io);
  BOOST_TEST(f.admitted == (std::vector<int>{1}), "the room went to the cancelled waiter");
  BOOST_REQUIRE(f.admitted_at.size() == 1u);
  BOOST_TEST((f.admitted_at[0] == t0 + Row::next_admitted_after), "the waiter behind did not keep its place");
  BOOST_TEST((f.clock.now() == t0 + Row::next_admitted_after), "a timer of the cancelled waiter fired later");
  BOOST_TEST(done[1].times == 1);
  BOOST_TEST((done[1].value == error_code{}));
  BOOST_TEST(f.stage.queued() == 0u);
  BOOST_TEST(f.rejections == 0);
  // The permit the cancelled waiter would have had is still there, once.
  const auto permit = f.stage.try_acquire();
  BOOST_TEST(static_cast<bool>(permit), "the cancelled waiter's permit was lost");
  BOOST_TEST(!f.stage.try_acquire());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(with_a_plain_result_gets_operation_aborted_thrown, Row, queueing_stages) {
  queue_fixture<Row> f;
  completion<int> done;
  asio::cancellation_signal signal;
  spawn(f.io, f.stage([]() -> asio::awaitable<int> { co_return 1; }), done, &signal);
  f.poll();
  BOOST_REQUIRE(f.stage.queued() == 1u);
  signal.emit(asio::cancellation_type::terminal);
  f.poll();
  BOOST_TEST(done.times == 1);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), boost::system::system_error,
                        [](const auto& e) { return e.code() == aborted; });
  BOOST_TEST(f.stage.queued() == 0u);
  BOOST_TEST(f.clock.pending() == 0u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(cancelled_before_it_queues_does_not_queue, Row, queueing_stages) {
  queue_fixture<Row> f;
  completion<error_code> done;
  asio::cancellation_signal signal;
  int calls = 0;
  spawn(f.io, resilience::test::cancel_then_call(f.stage, signal, resilience::test::counting(calls)), done, &signal);
  f.poll();
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == aborted));
  BOOST_TEST(calls == 0);
  BOOST_TEST(f.stage.queued() == 0u);
  BOOST_TEST(f.clock.pending() == 0u);
  BOOST_TEST(f.rejections == 0);
}

BOOST_AUTO_TEST_SUITE_END()
