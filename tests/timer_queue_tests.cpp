// The steady clock's bounds share one timer per execution context
// (detail::timer_queue). No test here depends on how the machine schedules
// threads: nodes driven directly are due already (so they all fire in the
// first expiry, in a known order) or an hour away (so they never fire while
// the test runs), and calls through the public stage are checked for what
// holds whatever the timing.
#include "support.hpp"

#include <resilience/detail/timer_queue.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::time_point;
using resilience::detail::timer_node;
using resilience::detail::timer_queue;
using resilience::test::completion;
using resilience::test::spawn;

namespace {

const error_code timeout_error = resilience::error::timeout;
using resilience::test::aborted;

// A node that records its firing. Like a bounded call's node, it leaves the
// queue when destroyed.
struct probe : timer_node {
  int id = 0;
  std::atomic<int> fired{0};
  std::vector<int>* log = nullptr;
  std::function<void()> then;  // after recording
  timer_queue* queue = nullptr;

  probe() = default;
  probe(const probe&) = delete;
  probe& operator=(const probe&) = delete;
  ~probe() {
    if (queue) queue->remove(*this);
  }

  bool queued() const { return heap_index != unqueued; }

  static void record(timer_node* node) {
    auto& self = static_cast<probe&>(*node);
    self.fired.fetch_add(1);
    if (self.log) self.log->push_back(self.id);
    if (self.then) self.then();
  }
};

// One io_context, its queue, and nodes with expiries chosen by the test.
struct direct {
  std::optional<asio::io_context> io{std::in_place};
  const asio::any_io_executor ex = io->get_executor();
  timer_queue& queue = timer_queue::of(ex);
  const time_point now = std::chrono::steady_clock::now();
  std::vector<int> log;  // ids, in the order they fired
  std::deque<probe> nodes;  // ids are indices
  std::mt19937_64 random{20240611};

  // Due already, `ago` before the test started.
  time_point past(std::chrono::nanoseconds ago) const { return now - ago; }
  // An hour away at least: never due while the test runs.
  time_point far(std::chrono::nanoseconds later) const { return now + 1h + later; }
  std::chrono::nanoseconds random_offset() { return std::chrono::nanoseconds(random() % 1'000'000'000'000); }

  probe& node(time_point at) {
    probe& p = nodes.emplace_back();
    p.id = static_cast<int>(nodes.size() - 1);
    p.fire_at = at;
    p.fire = &probe::record;
    p.executor = &ex;
    p.log = &log;
    p.queue = &queue;
    return p;
  }

  // The ids of `ids` sorted by expiry: the order they must fire in.
  std::vector<int> by_expiry(std::vector<int> ids) const {
    std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return nodes[a].fire_at < nodes[b].fire_at; });
    return ids;
  }

  // Runs until out of work; false if run_for timed out instead (a timer
  // left armed on an idle queue would hold the context).
  bool run_to_idle() {
    io->restart();
    io->run_for(60s);
    return io->stopped();
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(timer_queue_heap)

BOOST_AUTO_TEST_CASE(due_nodes_fire_earliest_first_whatever_the_order_they_were_added) {
  direct t;
  std::vector<int> ids;
  for (int i = 0; i < 1000; ++i) ids.push_back(t.node(t.past(t.random_offset())).id);
  std::vector<int> order = ids;
  std::shuffle(order.begin(), order.end(), t.random);
  for (int id : order) t.queue.add(t.nodes[id]);
  BOOST_TEST(t.run_to_idle());
  BOOST_TEST(t.log == t.by_expiry(ids));
  for (auto& n : t.nodes) {
    BOOST_TEST(n.fired.load() == 1);
    BOOST_TEST(!n.queued());
    BOOST_TEST(!t.queue.remove(n), "a node that fired is no longer queued");
  }
}

BOOST_AUTO_TEST_CASE(random_adds_and_removes_keep_the_earliest_first) {
  direct t;
  constexpr int count = 2000;
  for (int i = 0; i < count; ++i) t.node(t.past(t.random_offset()));
  std::set<int> queued;
  for (int step = 0; step < 20'000; ++step) {
    probe& n = t.nodes[t.random() % count];
    if (n.queued()) {
      BOOST_REQUIRE(t.queue.remove(n));
      BOOST_REQUIRE(!t.queue.remove(n));
      queued.erase(n.id);
    } else {
      n.fire_at = t.past(t.random_offset());  // back with a new expiry
      t.queue.add(n);
      queued.insert(n.id);
    }
    BOOST_REQUIRE(n.queued() == queued.contains(n.id));
  }
  BOOST_TEST(!queued.empty());
  BOOST_TEST(t.run_to_idle());
  BOOST_TEST(t.log == t.by_expiry({queued.begin(), queued.end()}));
  for (auto& n : t.nodes) BOOST_TEST(n.fired.load() == (queued.contains(n.id) ? 1 : 0));
}

BOOST_AUTO_TEST_CASE(removing_the_first_a_middle_or_the_last_node) {
  direct t;
  for (int i = 0; i < 9; ++i) t.queue.add(t.node(t.past(std::chrono::seconds(10 - i))));  // ids in expiry order
  BOOST_TEST(t.queue.remove(t.nodes[4]));
  BOOST_TEST(t.queue.remove(t.nodes[0]));
  BOOST_TEST(t.queue.remove(t.nodes[8]));
  BOOST_TEST(!t.queue.remove(t.nodes[4]), "removed twice");
  BOOST_TEST(t.run_to_idle());
  BOOST_TEST((t.log == std::vector<int>{1, 2, 3, 5, 6, 7}));
}

BOOST_AUTO_TEST_CASE(a_fired_node_is_out_of_the_queue_before_its_fire_runs) {
  direct t;
  probe& n = t.node(t.past(1s));
  bool removed_in_fire = true;
  n.then = [&] { removed_in_fire = t.queue.remove(n); };
  t.queue.add(n);
  BOOST_TEST(t.run_to_idle());
  BOOST_TEST(n.fired.load() == 1);
  BOOST_TEST(!removed_in_fire);
  BOOST_TEST(!t.queue.remove(n));
  // And it can be queued again, as a retry's sleep is.
  n.fire_at = t.past(2s);
  n.then = nullptr;
  t.queue.add(n);
  BOOST_TEST(t.run_to_idle());
  BOOST_TEST(n.fired.load() == 2);
}

BOOST_AUTO_TEST_CASE(never_added_is_not_removed) {
  direct t;
  probe& n = t.node(t.past(1s));
  BOOST_TEST(!t.queue.remove(n));
}

BOOST_AUTO_TEST_CASE(equal_expiries_each_fire_once) {
  direct t;
  const time_point at = t.past(1s);
  for (int i = 0; i < 100; ++i) t.queue.add(t.node(at));
  BOOST_TEST(t.queue.remove(t.nodes[50]));
  BOOST_TEST(t.run_to_idle());
  BOOST_TEST(t.log.size() == 99u);
  for (auto& n : t.nodes) BOOST_TEST(n.fired.load() == (n.id == 50 ? 0 : 1));
}

BOOST_AUTO_TEST_CASE(due_nodes_fire_and_distant_ones_wait) {
  // The distant nodes go in first, arming the timer an hour away; each due
  // node added after them must re-arm it earlier.
  direct t;
  std::vector<int> due, distant;
  for (int i = 0; i < 50; ++i) distant.push_back(t.node(t.far(t.random_offset())).id);
  for (int i = 0; i < 50; ++i) due.push_back(t.node(t.past(t.random_offset())).id);
  for (int id : distant) t.queue.add(t.nodes[id]);
  for (int id : due) t.queue.add(t.nodes[id]);
  // Once every due node has fired, take the distant ones out: the queue
  // goes idle and run() must return.
  int removed = 0;
  for (int id : due)
    t.nodes[id].then = [&] {
      if (t.log.size() != due.size()) return;
      for (int d : distant) removed += t.queue.remove(t.nodes[d]);
    };
  BOOST_TEST(t.run_to_idle());
  BOOST_TEST(t.log == t.by_expiry(due));
  BOOST_TEST(removed == 50);
  for (int id : distant) BOOST_TEST(t.nodes[id].fired.load() == 0);
}

BOOST_AUTO_TEST_CASE(an_idle_queue_lets_run_return_each_time) {
  direct t;
  probe& n = t.node(t.far(0s));
  for (int round = 0; round < 3; ++round) {
    t.queue.add(n);  // armed for an hour from now
    bool removed = false;
    asio::post(*t.io, [&] { removed = t.queue.remove(n); });
    BOOST_TEST(t.run_to_idle());
    BOOST_TEST(removed);
  }
  BOOST_TEST(n.fired.load() == 0);
}

BOOST_AUTO_TEST_CASE(a_hundred_thousand_nodes) {
  direct t;
  constexpr int count = 100'000;
  std::vector<int> ids(count);
  for (int i = 0; i < count; ++i) ids[i] = t.node(t.past(t.random_offset())).id;
  std::vector<int> order = ids;
  std::shuffle(order.begin(), order.end(), t.random);
  for (int id : order) t.queue.add(t.nodes[id]);
  // Half of them out again, in another random order.
  std::shuffle(order.begin(), order.end(), t.random);
  order.resize(count / 2);
  for (int id : order) BOOST_REQUIRE(t.queue.remove(t.nodes[id]));
  std::sort(order.begin(), order.end());
  std::vector<int> left;
  std::set_difference(ids.begin(), ids.end(), order.begin(), order.end(), std::back_inserter(left));
  BOOST_TEST(t.run_to_idle());
  BOOST_TEST(t.log == t.by_expiry(left));
}

BOOST_AUTO_TEST_CASE(a_hundred_thousand_distant_nodes_all_removed) {
  direct t;
  constexpr int count = 100'000;
  std::vector<int> order(count);
  for (int i = 0; i < count; ++i) order[i] = t.node(t.far(t.random_offset())).id;
  std::shuffle(order.begin(), order.end(), t.random);
  for (int id : order) t.queue.add(t.nodes[id]);
  std::shuffle(order.begin(), order.end(), t.random);
  int removed = 0;
  asio::post(*t.io, [&] {
    for (int id : order) removed += t.queue.remove(t.nodes[id]);
  });
  BOOST_TEST(t.run_to_idle());
  BOOST_TEST(removed == count);
  BOOST_TEST(t.log.empty());
}

BOOST_AUTO_TEST_CASE(destroying_the_context_takes_every_node_out) {
  direct t;
  for (int i = 0; i < 10; ++i) t.queue.add(t.node(t.far(std::chrono::seconds(i))));
  t.io.reset();  // shuts the queue down
  for (auto& n : t.nodes) {
    BOOST_TEST(!n.queued());
    BOOST_TEST(n.fired.load() == 0);
    n.queue = nullptr;  // gone with its context
  }
}

BOOST_AUTO_TEST_CASE(two_threads_adding_and_removing) {
  // Each thread queues due nodes, which must fire exactly once, and distant
  // ones, which it takes out again. join() returns only if the timer ends
  // up disarmed.
  asio::thread_pool pool(2);
  const asio::any_io_executor ex = pool.get_executor();
  timer_queue& queue = timer_queue::of(ex);
  const time_point now = std::chrono::steady_clock::now();
  constexpr int per_thread = 2000;
  std::deque<probe> due(2 * per_thread), distant(2 * per_thread);
  std::atomic<int> removed{0};
  for (int thread = 0; thread < 2; ++thread) {
    asio::post(pool, [&, thread] {
      for (int i = thread * per_thread; i < (thread + 1) * per_thread; ++i) {
        for (auto* n : {&due[i], &distant[i]}) {
          n->fire = &probe::record;
          n->executor = &ex;
        }
        due[i].fire_at = now - std::chrono::microseconds(i % 97);
        distant[i].fire_at = now + 1h + std::chrono::microseconds(i % 89);
        queue.add(due[i]);
        queue.add(distant[i]);
        if (i % 3 == 0) removed += queue.remove(distant[i]);
      }
      for (int i = thread * per_thread; i < (thread + 1) * per_thread; ++i)
        if (i % 3 != 0) removed += queue.remove(distant[i]);
    });
  }
  pool.join();
  BOOST_TEST(removed == 2 * per_thread);
  for (auto& n : due) BOOST_TEST(n.fired.load() == 1);
  for (auto& n : distant) BOOST_TEST(n.fired.load() == 0);
}

BOOST_AUTO_TEST_SUITE_END()

// The same through the public timeout stage, on real time: what is checked
// holds however late the threads run.
BOOST_AUTO_TEST_SUITE(shared_timer_queue)

// Waits until cancelled, then reports it.
asio::awaitable<error_code> wait_forever() {
  asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::hours(1));
  auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return ec;
}

BOOST_AUTO_TEST_CASE(every_bound_fires_once_and_never_early) {
  asio::io_context io;
  const std::vector<int> bounds_ms{7, 2, 9, 4, 1, 8, 3, 6, 5, 10};
  std::vector<resilience::basic_timeout<>> stages;
  for (int ms : bounds_ms) stages.emplace_back(std::chrono::milliseconds(ms));
  std::vector<int> ended(bounds_ms.size(), 0);
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const auto started = std::chrono::steady_clock::now();
    asio::co_spawn(io, stages[i](wait_forever), [&, i, started](std::exception_ptr e, error_code ec) {
      BOOST_TEST(!e);
      BOOST_TEST((ec == timeout_error));
      BOOST_TEST((std::chrono::steady_clock::now() - started >= std::chrono::milliseconds(bounds_ms[i])));
      ++ended[i];
    });
  }
  io.run();
  BOOST_TEST((ended == std::vector<int>(bounds_ms.size(), 1)));
}

BOOST_AUTO_TEST_CASE(a_due_bound_ends_its_call_and_a_distant_one_waits) {
  // Bounds of 1 ms and of an hour, mixed: only the short ones can fire while
  // the test runs. Once they all have, the long calls are cancelled from
  // outside and end as cancellations, not timeouts.
  asio::io_context io;
  const auto short_bound = resilience::timeout(1ms);
  const auto long_bound = resilience::timeout(1h);
  constexpr int pairs = 20;
  std::vector<completion<error_code>> short_calls(pairs), long_calls(pairs);
  std::vector<asio::cancellation_signal> signals(pairs);
  int short_ended = 0;
  for (int i = 0; i < pairs; ++i) {
    spawn(io, long_bound(wait_forever), long_calls[i], &signals[i]);
    asio::co_spawn(io, short_bound(wait_forever), [&, i](std::exception_ptr e, error_code ec) {
      ++short_calls[i].times;
      short_calls[i].exception = e;
      short_calls[i].value = ec;
      if (++short_ended == pairs)
        for (auto& s : signals) s.emit(asio::cancellation_type::terminal);
    });
  }
  io.run();
  for (int i = 0; i < pairs; ++i) {
    BOOST_TEST(short_calls[i].times == 1);
    BOOST_TEST((short_calls[i].value == timeout_error));
    BOOST_TEST(long_calls[i].times == 1);
    BOOST_TEST(!long_calls[i].exception);
    BOOST_TEST((long_calls[i].value == aborted));
  }
}

BOOST_AUTO_TEST_CASE(an_answered_call_leaves_nothing_behind) {
  asio::io_context io;
  const auto stage = resilience::timeout(std::chrono::hours(1));
  int answers = 0;
  for (int i = 0; i < 100; ++i)
    asio::co_spawn(io, stage([]() -> asio::awaitable<int> { co_return 3; }), [&](std::exception_ptr, int v) {
      answers += v == 3;
    });
  io.run();  // returns: no armed timer is left holding the context
  BOOST_TEST(answers == 100);
}

BOOST_AUTO_TEST_CASE(run_returns_once_suspending_calls_are_done) {
  // Ops that really suspend get the bound armed; when the last one answers,
  // the shared timer must be disarmed or run() would wait an hour.
  asio::io_context io;
  const auto stage = resilience::timeout(std::chrono::hours(1));
  int answers = 0;
  auto suspending = []() -> asio::awaitable<int> {
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
    co_return 3;
  };
  for (int i = 0; i < 10; ++i)
    asio::co_spawn(io, stage(suspending), [&](std::exception_ptr, int v) { answers += v == 3; });
  io.run();
  BOOST_TEST(answers == 10);
}

BOOST_AUTO_TEST_CASE(a_tracked_first_executor_does_not_keep_the_context_busy) {
  // The queue's own timer comes from the first caller's executor; if that
  // one tracks work, the timer must not inherit it, or run() never returns.
  asio::io_context io;
  asio::any_io_executor tracked = asio::prefer(io.get_executor(), asio::execution::outstanding_work.tracked);
  bool done = false;
  asio::co_spawn(
      tracked,
      [&]() -> asio::awaitable<void> {
        co_await resilience::timeout(std::chrono::hours(1))(
            []() -> asio::awaitable<void> { co_await asio::post(asio::use_awaitable); });
        done = true;
      },
      asio::detached);
  tracked = asio::any_io_executor();
  io.run_for(std::chrono::seconds(30));  // returns at once when out of work
  BOOST_TEST(done);
  BOOST_TEST(io.stopped(), "run_for ended because the work ran out, not because its time did");
}

BOOST_AUTO_TEST_CASE(destroying_a_context_with_calls_pending_leaves_no_dangling_node) {
  // Frames destroyed by a shutting-down service must take their node out of
  // the queue, which shuts down after them (AddressSanitizer sees a node
  // left behind); the call's frame and handler go, its handler uncalled.
  using resilience::test::live;
  const int ops_before = live::ops, handlers_before = live::handlers;
  int completed = 0;
  {
    asio::io_context io;
    asio::co_spawn(io, resilience::timeout(1h)([]() -> asio::awaitable<void> { co_await asio::post(asio::use_awaitable); }),
                   asio::detached);
    io.run();  // creates the queue before the strand service below
    io.restart();
    asio::co_spawn(asio::make_strand(io), resilience::timeout(1h)([]() -> asio::awaitable<void> {
                     live frame(live::ops);
                     asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::hours(1));
                     co_await t.async_wait(asio::use_awaitable);
                   }),
                   [&completed, guard = live(live::handlers)](std::exception_ptr) { ++completed; });
    io.poll();  // the call is now pending, its bound armed
    BOOST_REQUIRE_EQUAL(live::ops, ops_before + 1);
  }
  BOOST_TEST(live::ops == ops_before, "the pending call's frame outlived its context");
  BOOST_TEST(live::handlers == handlers_before, "the pending call's handler outlived its context");
  BOOST_TEST(completed == 0);
}

// A coroutine on a concrete executor type, not any_io_executor.
asio::awaitable<int, asio::io_context::executor_type> concrete_op() { co_return 5; }

BOOST_AUTO_TEST_CASE(stages_accept_awaitables_of_any_executor_type) {
  asio::io_context io;
  int value = 0;
  asio::co_spawn(io, resilience::timeout(1h)([] { return concrete_op(); }), [&](std::exception_ptr, int v) { value = v; });
  io.run();
  BOOST_TEST(value == 5);
}

BOOST_AUTO_TEST_SUITE_END()
