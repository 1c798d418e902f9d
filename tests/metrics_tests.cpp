// Metrics: counts from real pipelines on virtual time (retries, a breaker
// opening, bulkhead rejections, timeouts), durations and outcomes of calls
// and attempts, bucket edges, the Prometheus text exactly, escaping, exact
// sums under two threads, cancellation and shutdown mid-call, options; and
// the application's own instruments in a registry.
#include "support.hpp"

#include <resilience/bulkhead.hpp>
#include <resilience/circuit_breaker.hpp>
#include <resilience/metrics.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/prometheus.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::duration;
using resilience::metric_kind;
using resilience::metrics;
using resilience::metrics_options;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::contains;
using resilience::test::spawn;
using resilience::test::throws_naming;

namespace {

using resilience::test::reset;
using resilience::test::aborted;

struct metrics_fixture {
  asio::io_context io;
  manual_clock clock;
  metrics m{metrics_options{}.buckets({1ms, 10ms, 100ms, 1s})};

  // Waits `d` on the virtual clock, then answers `result`. A member
  // coroutine: its arguments live in its frame, not in a closure.
  asio::awaitable<error_code> wait(duration d, error_code result) {
    if (d > duration::zero()) {
      auto timer = clock.make_timer(co_await asio::this_coro::executor);
      timer.expires_after(d);
      auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return ec;
    }
    co_return result;
  }
  auto op(duration d, error_code result = {}) {
    return [this, d, result] { return wait(d, result); };
  }

  // The sample of `family` whose label values are `values`, if it has recorded.
  std::optional<resilience::metric_sample> sample(const std::string& family, std::vector<std::string> values) const {
    for (const auto& f : m.snapshot().families) {
      if (f.name != family) continue;
      for (const auto& s : f.samples) {
        std::vector<std::string> have;
        for (const auto& l : s.labels) have.push_back(l.second);
        if (have == values) return s;
      }
    }
    return std::nullopt;
  }
  std::uint64_t events(const std::string& pipeline, const std::string& strategy, const std::string& event,
                       const std::string& outcome) const {
    const auto s = sample("resilience.strategy.events", {pipeline, strategy, event, outcome});
    return s ? s->count : 0;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(metrics_counts, metrics_fixture)

BOOST_AUTO_TEST_CASE(a_retry_pipeline_counts_retries_attempts_and_the_whole_call) {
  int calls = 0;
  const auto call = resilience::pipeline(
                        m.stage("backend"),
                        resilience::retry_policy{}
                            .max_attempts(4)
                            .backoff(resilience::backoff::constant(100ms).with_jitter(resilience::jitter::none)),
                        m.attempt_stage("backend"))
                        .clock(clock)
                        .events(m.events("backend"));
  completion<error_code> done;
  spawn(io, call([&] { return wait(10ms, ++calls < 3 ? reset : error_code{}); }), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == error_code{}));
  BOOST_TEST(events("backend", "retry", "on_retry", "error") == 2u);
  BOOST_TEST(events("backend", "retry", "on_retry", "exception") == 0u);
  const auto whole = sample("resilience.pipeline.duration", {"backend", "success"});
  BOOST_REQUIRE(whole);
  BOOST_TEST(whole->count == 1u);
  BOOST_TEST((whole->sum == 230ms), "3 attempts of 10 ms and 2 waits of 100 ms");
  for (const char* n : {"1", "2"}) {
    const auto failed = sample("resilience.strategy.attempt.duration", {"backend", n, "error"});
    BOOST_REQUIRE(failed);
    BOOST_TEST(failed->count == 1u);
    BOOST_TEST((failed->sum == 10ms));
  }
  const auto third = sample("resilience.strategy.attempt.duration", {"backend", "3", "success"});
  BOOST_REQUIRE(third);
  BOOST_TEST(third->count == 1u);
  BOOST_TEST(!sample("resilience.strategy.attempt.duration", {"backend", "3", "error"}));
}

BOOST_AUTO_TEST_CASE(a_breaker_opening_and_rejecting_is_counted_and_ends_the_call_as_an_error) {
  resilience::basic_circuit_breaker<manual_clock> breaker(
      resilience::breaker_options{}.consecutive_failures(2).open_duration(5s), clock);
  // The breaker reads the manual clock: every stage must, from the start.
  const auto call = resilience::pipeline(m.stage("backend").clock(clock),
                                         resilience::retry_policy{}
                                             .max_attempts(5)
                                             .backoff(resilience::backoff::constant(100ms).with_jitter(resilience::jitter::none))
                                             .clock(clock),
                                         breaker, m.attempt_stage("backend").clock(clock))
                        .events(m.events("backend"));
  completion<error_code> done;
  spawn(io, call(op(10ms, reset)), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == error_code(resilience::error::circuit_open)), "a rejection ends the retry");
  BOOST_TEST(events("backend", "circuit_breaker", "on_circuit_opened", "none") == 1u);
  BOOST_TEST(events("backend", "circuit_breaker", "on_circuit_rejected", "error") == 1u);
  BOOST_TEST(events("backend", "retry", "on_retry", "error") == 2u);
  // The rejected third attempt never reached the op: only two attempts timed.
  BOOST_TEST(!sample("resilience.strategy.attempt.duration", {"backend", "3", "error"}));
  const auto whole = sample("resilience.pipeline.duration", {"backend", "error"});
  BOOST_REQUIRE(whole);
  BOOST_TEST((whole->sum == 220ms));
}

BOOST_AUTO_TEST_CASE(bulkhead_rejections_are_counted_by_reason) {
  resilience::basic_bulkhead<manual_clock> pool(resilience::bulkhead_options{}
                                                    .max_concurrent(1)
                                                    .max_queue(1)
                                                    .max_wait(50ms),
                                                clock);
  const auto call = resilience::pipeline(m.stage("db").clock(clock), pool).events(m.events("db"));
  std::vector<completion<error_code>> done(3);
  for (auto& d : done) spawn(io, call(op(1s)), d);  // one inside, one waits 50 ms, one finds the queue full
  clock.run(io);
  for (const auto& d : done) BOOST_TEST(d.times == 1);
  BOOST_TEST(events("db", "bulkhead", "on_bulkhead_queue_full", "error") == 1u);
  BOOST_TEST(events("db", "bulkhead", "on_bulkhead_wait_expired", "error") == 1u);
  const auto rejected = sample("resilience.pipeline.duration", {"db", "error"});
  BOOST_REQUIRE(rejected);
  BOOST_TEST(rejected->count == 2u);
  BOOST_TEST((rejected->sum == 50ms), "the full queue rejected at once, the waiter after max_wait");
  BOOST_TEST(sample("resilience.pipeline.duration", {"db", "success"})->count == 1u);
}

BOOST_AUTO_TEST_CASE(a_timeout_is_counted_and_its_attempt_timed_to_the_bound) {
  const auto call =
      resilience::pipeline(m.attempt_stage("svc"), resilience::timeout(50ms)).clock(clock).events(m.events("svc"));
  completion<error_code> done;
  spawn(io, call(op(1s)), done);
  clock.run(io);
  BOOST_TEST((done.value == error_code(resilience::error::timeout)));
  BOOST_TEST(events("svc", "timeout", "on_timeout", "error") == 1u);
  const auto attempt = sample("resilience.strategy.attempt.duration", {"svc", "1", "error"});
  BOOST_REQUIRE(attempt);
  BOOST_TEST((attempt->sum == 50ms));
}

BOOST_AUTO_TEST_CASE(attempt_numbers_past_four_share_one_series) {
  const auto call = resilience::pipeline(resilience::retry_policy{}
                                             .max_attempts(7)
                                             .backoff(resilience::backoff::constant(1ms).with_jitter(resilience::jitter::none)),
                                         m.attempt_stage("svc"))
                        .clock(clock);
  completion<error_code> done;
  spawn(io, call(op(1ms, reset)), done);
  clock.run(io);
  for (const char* n : {"1", "2", "3", "4"})
    BOOST_TEST(sample("resilience.strategy.attempt.duration", {"svc", n, "error"})->count == 1u);
  BOOST_TEST(sample("resilience.strategy.attempt.duration", {"svc", "5+", "error"})->count == 3u);
}

BOOST_AUTO_TEST_CASE(one_name_gives_one_sink_and_its_series) {
  resilience::event_sink& a = m.events("p");
  resilience::event_sink& b = m.events("p");
  BOOST_TEST(&a == &b);
  resilience::event rejected{resilience::event_kind::circuit_rejected};
  rejected.outcome = resilience::call_outcome::error;
  a.on_event(rejected);
  b.on_event(rejected);
  BOOST_TEST(events("p", "circuit_breaker", "on_circuit_rejected", "error") == 2u);
  BOOST_TEST(m.snapshot().families.size() == 1u, "series that recorded nothing are left out");
}

// What the server answered itself, by status: http.response.status_code on
// the server's events that carry one, and on no other series.
BOOST_AUTO_TEST_CASE(the_servers_events_count_by_the_status_they_answered) {
  resilience::event_sink& sink = m.events("api");
  const auto report = [&](resilience::event_kind kind, unsigned status) {
    resilience::event e{kind};
    e.status = status;
    sink.on_event(e);
  };
  for (unsigned status : {400u, 413u, 413u, 431u}) report(resilience::event_kind::request_refused, status);
  report(resilience::event_kind::shed, 503);
  report(resilience::event_kind::server_deadline_exceeded, 504);
  report(resilience::event_kind::slow_client, 0);
  resilience::event retried{resilience::event_kind::retry};  // the client's: by outcome alone
  retried.outcome = resilience::call_outcome::error;
  retried.status = 503;
  sink.on_event(retried);
  const auto refused = [&](const std::string& status) {
    const auto s = sample("resilience.strategy.events", {"api", "http_server", "on_request_refused", "none", status});
    return s ? s->count : 0;
  };
  BOOST_TEST(refused("400") == 1u);
  BOOST_TEST(refused("413") == 2u);
  BOOST_TEST(refused("431") == 1u);
  BOOST_TEST(events("api", "http_server", "on_request_refused", "none") == 0u, "none without its status");
  const auto shed = sample("resilience.strategy.events", {"api", "http_server", "on_shed", "none", "503"});
  BOOST_TEST((shed && shed->count == 1u));
  const auto late = sample("resilience.strategy.events", {"api", "http_server", "on_deadline_exceeded", "none", "504"});
  BOOST_TEST((late && late->count == 1u));
  BOOST_TEST(events("api", "http_server", "on_slow_client", "none") == 1u);
  BOOST_TEST(events("api", "retry", "on_retry", "error") == 1u);
  const std::string text = resilience::prometheus_text(m);
  BOOST_TEST(contains(text, "resilience_strategy_events_total{pipeline_name=\"api\",strategy_name=\"http_server\","
                            "event_name=\"on_request_refused\",outcome=\"none\",http_response_status_code=\"413\"} 2\n"),
             text);
  BOOST_TEST(contains(text, "resilience_strategy_events_total{pipeline_name=\"api\",strategy_name=\"http_server\","
                            "event_name=\"on_slow_client\",outcome=\"none\"} 1\n"),
             text);
}

BOOST_AUTO_TEST_CASE(every_event_kind_has_a_name_and_a_strategy) {
  for (std::size_t k = 0; k < resilience::event_kind_count; ++k) {
    const auto kind = static_cast<resilience::event_kind>(k);
    BOOST_TEST(std::string_view(resilience::to_string(kind)).starts_with("on_"));
    BOOST_TEST(std::string_view(resilience::strategy_of(kind)) != "unknown");
  }
  BOOST_TEST(std::string_view(resilience::to_string(resilience::event_kind::server_deadline_exceeded)) ==
             "on_deadline_exceeded");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(metrics_outcomes, metrics_fixture)

BOOST_AUTO_TEST_CASE(values_errors_and_exceptions_pass_through_unchanged_and_are_told_apart) {
  const auto stage = m.stage("svc").clock(clock);
  completion<int> value;
  spawn(io, stage([]() -> asio::awaitable<int> { co_return 42; }), value);
  completion<int> failure;
  spawn(io, stage([]() -> asio::awaitable<int> {
          throw boost::system::system_error(resilience::error::timeout);
          co_return 0;
        }),
        failure);
  completion<int> other;
  spawn(io, stage([]() -> asio::awaitable<int> {
          throw std::runtime_error("boom");
          co_return 0;
        }),
        other);
  completion<void> nothing;
  spawn(io, stage([]() -> asio::awaitable<void> { co_return; }), nothing);
  clock.run(io);
  BOOST_TEST(*value.value == 42);
  BOOST_CHECK_THROW(resilience::test::rethrow(failure), boost::system::system_error);
  BOOST_CHECK_THROW(resilience::test::rethrow(other), std::runtime_error);
  BOOST_TEST(nothing.times == 1);
  BOOST_TEST(sample("resilience.pipeline.duration", {"svc", "success"})->count == 2u);
  BOOST_TEST(sample("resilience.pipeline.duration", {"svc", "error"})->count == 1u);
  BOOST_TEST(sample("resilience.pipeline.duration", {"svc", "exception"})->count == 1u);
}

// A value the classifier calls a failure (a 503 the retry gave up on) is an
// error, not a success; the value itself comes back unchanged.
BOOST_AUTO_TEST_CASE(values_a_classifier_selects_are_recorded_as_errors) {
  struct status {
    int code;
  };
  const auto stage = m.stage("http").clock(clock).failures_are(
      [](const resilience::outcome<status>& o) { return !o.failed() && o.value().code >= 500; });
  completion<status> ok, unavailable;
  spawn(io, stage([]() -> asio::awaitable<status> { co_return status{200}; }), ok);
  spawn(io, stage([]() -> asio::awaitable<status> { co_return status{503}; }), unavailable);
  clock.run(io);
  BOOST_TEST(ok.value->code == 200);
  BOOST_TEST(unavailable.value->code == 503);
  BOOST_TEST(sample("resilience.pipeline.duration", {"http", "success"})->count == 1u);
  BOOST_TEST(sample("resilience.pipeline.duration", {"http", "error"})->count == 1u);
}

BOOST_AUTO_TEST_CASE(bucket_bounds_are_inclusive_upper_bounds) {
  const auto stage = m.stage("svc").clock(clock);  // bounds 1 ms, 10 ms, 100 ms, 1 s
  for (duration d : {duration::zero(), duration(1ms), 1ms + duration(1), duration(10ms), duration(1s),
                     1s + duration(1)}) {
    completion<error_code> done;
    spawn(io, stage(op(d)), done);
    clock.run(io);
    BOOST_REQUIRE(done.times == 1);
  }
  const auto s = sample("resilience.pipeline.duration", {"svc", "success"});
  BOOST_REQUIRE(s);
  BOOST_TEST(s->cumulative == (std::vector<std::uint64_t>{2, 4, 4, 5, 6}), boost::test_tools::per_element());
  BOOST_TEST(s->count == 6u);
}

BOOST_AUTO_TEST_CASE(a_cancelled_call_ends_aborted_is_recorded_as_cancelled_and_frees_its_frames) {
  const auto stage = m.stage("svc").clock(clock);
  int started = 0;
  {
    asio::cancellation_signal cancel;
    completion<error_code> done;
    spawn(io, stage([&] { return resilience::test::sleep_an_hour(&started); }), done, &cancel);
    io.poll();
    BOOST_REQUIRE(started == 1);
    clock.advance(3s);
    cancel.emit(asio::cancellation_type::terminal);
    io.run();
    BOOST_TEST(done.times == 1);
    BOOST_TEST((done.value == aborted));
  }
  BOOST_TEST(resilience::test::live::ops == 0);
  const auto s = sample("resilience.pipeline.duration", {"svc", "cancelled"});
  BOOST_REQUIRE(s);
  BOOST_TEST((s->sum == 3s));
}

BOOST_AUTO_TEST_CASE(a_call_cancelled_while_retry_waits_is_recorded_as_cancelled_after_its_failed_attempt) {
  const auto call = resilience::pipeline(m.stage("svc"),
                                         resilience::retry_policy{}.backoff(resilience::backoff::constant(1s).with_jitter(resilience::jitter::none)),
                                         m.attempt_stage("svc"))
                        .clock(clock);
  asio::cancellation_signal cancel;
  completion<error_code> done;
  spawn(io, call(op(10ms, reset)), done, &cancel);
  clock.run_for(io, 500ms);  // the attempt failed at 10 ms; the retry waits until 1.01 s
  BOOST_REQUIRE(!done.done());
  cancel.emit(asio::cancellation_type::terminal);
  io.run();
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == aborted));
  BOOST_TEST(sample("resilience.strategy.attempt.duration", {"svc", "1", "error"})->count == 1u);
  BOOST_TEST(!sample("resilience.strategy.attempt.duration", {"svc", "2", "error"}));
  const auto whole = sample("resilience.pipeline.duration", {"svc", "cancelled"});
  BOOST_REQUIRE(whole);
  BOOST_TEST((whole->sum == 500ms));
}

BOOST_AUTO_TEST_CASE(a_cancellation_thrown_as_system_error_is_recorded_as_cancelled) {
  const auto stage = m.stage("svc").clock(clock);
  asio::cancellation_signal cancel;
  completion<int> done;
  spawn(io, stage([this]() -> asio::awaitable<int> {
          auto timer = clock.make_timer(co_await asio::this_coro::executor);
          timer.expires_after(1h);
          co_await timer.async_wait(asio::use_awaitable);  // throws when cancelled
          co_return 1;
        }),
        done, &cancel);
  io.poll();
  cancel.emit(asio::cancellation_type::terminal);
  io.run();
  BOOST_TEST(done.times == 1);
  BOOST_CHECK_THROW(resilience::test::rethrow(done), boost::system::system_error);
  BOOST_TEST(sample("resilience.pipeline.duration", {"svc", "cancelled"})->count == 1u);
}

BOOST_AUTO_TEST_CASE(a_call_whose_context_is_destroyed_records_nothing_and_frees_its_frames) {
  int started = 0;
  completion<error_code> done;
  const auto call = resilience::pipeline(m.stage("svc"), m.attempt_stage("svc")).clock(clock);
  {
    asio::io_context doomed;
    spawn(doomed, call([&] { return resilience::test::sleep_an_hour(&started); }), done);
    doomed.poll();
    BOOST_REQUIRE(started == 1);
  }
  BOOST_TEST(done.times == 0);
  BOOST_TEST(resilience::test::live::ops == 0);
  BOOST_TEST(m.snapshot().families.empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(metrics_prometheus, metrics_fixture)

BOOST_AUTO_TEST_CASE(a_small_registry_is_written_exactly) {
  metrics small{metrics_options{}.buckets({1ms, 10ms})};
  const auto stage = small.stage("p").clock(clock);
  completion<error_code> done;
  spawn(io, stage(op(5ms)), done);
  clock.run(io);
  resilience::event_sink& sink = small.events("p");
  sink.on_event(resilience::event{resilience::event_kind::circuit_opened});
  resilience::event rejected{resilience::event_kind::circuit_rejected};
  rejected.outcome = resilience::call_outcome::error;
  sink.on_event(rejected);
  sink.on_event(rejected);
  const std::string expected =
      "# HELP resilience_pipeline_duration_seconds Duration of calls through a resilience pipeline.\n"
      "# TYPE resilience_pipeline_duration_seconds histogram\n"
      "resilience_pipeline_duration_seconds_bucket{pipeline_name=\"p\",outcome=\"success\",le=\"0.001\"} 0\n"
      "resilience_pipeline_duration_seconds_bucket{pipeline_name=\"p\",outcome=\"success\",le=\"0.01\"} 1\n"
      "resilience_pipeline_duration_seconds_bucket{pipeline_name=\"p\",outcome=\"success\",le=\"+Inf\"} 1\n"
      "resilience_pipeline_duration_seconds_sum{pipeline_name=\"p\",outcome=\"success\"} 0.005\n"
      "resilience_pipeline_duration_seconds_count{pipeline_name=\"p\",outcome=\"success\"} 1\n"
      "# HELP resilience_strategy_events_total Events reported by resilience strategies.\n"
      "# TYPE resilience_strategy_events_total counter\n"
      "resilience_strategy_events_total{pipeline_name=\"p\",strategy_name=\"circuit_breaker\",event_name=\"on_circuit_opened\","
      "outcome=\"none\"} 1\n"
      "resilience_strategy_events_total{pipeline_name=\"p\",strategy_name=\"circuit_breaker\",event_name=\"on_circuit_rejected\","
      "outcome=\"error\"} 2\n";
  BOOST_TEST(resilience::prometheus_text(small) == expected);
}

BOOST_AUTO_TEST_CASE(an_empty_registry_writes_nothing) { BOOST_TEST(resilience::prometheus_text(m).empty()); }

BOOST_AUTO_TEST_CASE(label_values_are_escaped) {
  m.events("a\\b\"c\nd").on_event(resilience::detail::expiry_event_of(resilience::error::deadline_exceeded, 1));
  const std::string text = resilience::prometheus_text(m);
  BOOST_TEST(text.find("{pipeline_name=\"a\\\\b\\\"c\\nd\",strategy_name=\"deadline\",event_name=\"on_deadline\","
                       "outcome=\"error\"} 1\n") != std::string::npos,
             text);
}

BOOST_AUTO_TEST_CASE(the_sum_is_written_in_exact_seconds) {
  const auto stage = m.stage("p").clock(clock);
  for (duration d : {duration(1500ms), duration(250us), duration(7)}) {
    completion<error_code> done;
    spawn(io, stage(op(d)), done);
    clock.run(io);
  }
  BOOST_TEST(resilience::prometheus_text(m).find(
                 "resilience_pipeline_duration_seconds_sum{pipeline_name=\"p\",outcome=\"success\"} 1.500250007\n") !=
             std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(metrics_threads)

BOOST_AUTO_TEST_CASE(two_threads_recording_at_once_sum_exactly) {
  metrics m;
  manual_clock clock;
  resilience::event_sink& sink = m.events("p");
  const auto stage = m.stage("p").clock(clock);
  constexpr int events = 100000;
  constexpr int calls = 5000;
  auto work = [&] {
    for (int i = 0; i < events; ++i) sink.on_event(resilience::event{resilience::event_kind::circuit_rejected});
    asio::io_context io;
    for (int i = 0; i < calls; ++i) {
      asio::co_spawn(io, stage([]() -> asio::awaitable<int> { co_return 1; }), [](std::exception_ptr, int) {});
    }
    io.run();
  };
  std::thread other(work);
  work();
  other.join();
  const auto snap = m.snapshot();
  BOOST_REQUIRE(snap.families.size() == 2u);
  BOOST_TEST(snap.families[0].samples.at(0).count == 2u * calls);
  BOOST_TEST(snap.families[1].samples.at(0).count == 2u * events);
}

// Each status's series claimed by both threads at once, each found after.
BOOST_AUTO_TEST_CASE(two_threads_counting_statuses_at_once_sum_exactly) {
  metrics m;
  resilience::event_sink& sink = m.events("p");
  constexpr unsigned statuses[] = {400, 413, 431, 503};
  constexpr int rounds = 20000;
  auto work = [&] {
    for (int i = 0; i < rounds; ++i) {
      const unsigned status = statuses[i % 4];
      resilience::event e{status == 503 ? resilience::event_kind::shed : resilience::event_kind::request_refused};
      e.status = status;
      sink.on_event(e);
    }
  };
  std::thread other(work);
  work();
  other.join();
  const auto snap = m.snapshot();
  BOOST_REQUIRE(snap.families.size() == 1u);
  const auto& series = snap.families[0].samples;
  BOOST_REQUIRE(series.size() == 4u);  // one per status
  for (const auto& s : series) {
    BOOST_TEST(s.labels.size() == 5u);
    BOOST_TEST(s.count == 2u * rounds / 4);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(metrics_validation)

BOOST_AUTO_TEST_CASE(bad_buckets_and_names_throw_naming_the_field) {
  const metrics_options o;
  throws_naming([&] { (void)o.exponential_buckets(duration::zero(), 2, 5); }, "exponential_buckets: first");
  throws_naming([&] { (void)o.exponential_buckets(1ms, 1.0, 5); }, "exponential_buckets: factor");
  throws_naming([&] { (void)o.exponential_buckets(1ms, std::nan(""), 5); }, "exponential_buckets: factor");
  throws_naming([&] { (void)o.exponential_buckets(1ms, 2, 0); }, "exponential_buckets: count");
  throws_naming([&] { (void)o.exponential_buckets(1ms, 2, 33); }, "exponential_buckets: count");
  throws_naming([&] { (void)o.exponential_buckets(duration(1), 1.1, 3); }, "exponential_buckets: factor too small");
  throws_naming([&] { (void)o.exponential_buckets(1s, 10, 8); }, "exponential_buckets: the last bound");
  throws_naming([&] { (void)o.buckets({}); }, "buckets: give 1 to 32");
  throws_naming([&] { (void)o.buckets({2ms, 1ms}); }, "buckets: bounds must be strictly increasing");
  throws_naming([&] { (void)o.buckets({1ms, 1ms}); }, "buckets: bounds must be strictly increasing");
  throws_naming([&] { (void)o.buckets({-1ms}); }, "buckets: bounds must be positive");
  throws_naming([&] { (void)o.buckets({25h}); }, "buckets: bounds must be at most 24 h");
  metrics m;
  throws_naming([&] { (void)m.stage(""); }, "metrics::stage: pipeline");
  throws_naming([&] { (void)m.attempt_stage(""); }, "metrics::attempt_stage: pipeline");
  throws_naming([&] { (void)m.events(""); }, "metrics::events: pipeline");
}

BOOST_AUTO_TEST_CASE(the_defaults_double_from_one_millisecond) {
  const metrics_options defaults;
  const auto bounds = defaults.bucket_bounds();
  BOOST_REQUIRE(bounds.size() == 15u);
  BOOST_TEST((bounds.front() == 1ms));
  BOOST_TEST((bounds.back() == 16384ms));
  const auto thirds = metrics_options{}.exponential_buckets(1ms, 3, 3);
  BOOST_TEST((thirds.bucket_bounds()[2] == 9ms));
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

const resilience::metric_family* family(const resilience::metrics_snapshot& s, const std::string& name) {
  for (const auto& f : s.families)
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(instruments)

BOOST_AUTO_TEST_CASE(counters_gauges_and_histograms_are_served_from_the_moment_they_are_made) {
  resilience::metrics registry;
  const auto quotes = registry.counter("gateway.quotes", {{"outcome", "ok"}}, "Quotes served.");
  const auto failed = registry.counter("gateway.quotes", {{"outcome", "failed"}});
  const auto in_flight = registry.gauge("gateway.in_flight");
  const auto latency = registry.histogram("gateway.upstream.wait", {}, "Waits.", resilience::http_duration_buckets());
  std::string page = resilience::prometheus_text(registry);
  BOOST_TEST(contains(page, "gateway_quotes_total{outcome=\"failed\"} 0\n"), page);
  BOOST_TEST(contains(page, "gateway_quotes_total{outcome=\"ok\"} 0\n"), page);
  BOOST_TEST(contains(page, "# TYPE gateway_in_flight gauge\ngateway_in_flight 0\n"), page);
  BOOST_TEST(contains(page, "gateway_upstream_wait_seconds_count 0\n"), page);

  quotes.add();
  quotes.add(2);
  registry.counter("gateway.quotes", {{"outcome", "ok"}}).add();  // the same series
  in_flight.add(3);
  in_flight.add(-5);
  latency.record(7ms);
  latency.record(30s);
  BOOST_TEST(quotes.value() == 4u);
  BOOST_TEST(failed.value() == 0u);
  page = resilience::prometheus_text(registry);
  BOOST_TEST(contains(page, "gateway_quotes_total{outcome=\"ok\"} 4\n"), page);
  BOOST_TEST(contains(page, "gateway_in_flight -2\n"), page);
  BOOST_TEST(contains(page, "gateway_upstream_wait_seconds_bucket{le=\"0.005\"} 0\n"), page);
  BOOST_TEST(contains(page, "gateway_upstream_wait_seconds_bucket{le=\"0.01\"} 1\n"), page);
  BOOST_TEST(contains(page, "gateway_upstream_wait_seconds_bucket{le=\"10\"} 1\n"), page);
  BOOST_TEST(contains(page, "gateway_upstream_wait_seconds_bucket{le=\"+Inf\"} 2\n"), page);
  BOOST_TEST(contains(page, "gateway_upstream_wait_seconds_sum 30.007\n"), page);
  BOOST_TEST(contains(page, "# HELP gateway_quotes_total Quotes served.\n"), page);

  const auto snap = registry.snapshot();
  const auto* f = family(snap, "gateway.quotes");
  BOOST_REQUIRE(f);
  BOOST_TEST((f->kind == metric_kind::counter));
  BOOST_TEST(f->samples.size() == 2u);
}

BOOST_AUTO_TEST_CASE(bad_names_and_changed_shapes_are_refused) {
  resilience::metrics registry;
  BOOST_CHECK_THROW(registry.counter(""), std::invalid_argument);
  BOOST_CHECK_THROW(registry.counter("9lives"), std::invalid_argument);
  BOOST_CHECK_THROW(registry.counter("has space"), std::invalid_argument);
  BOOST_CHECK_THROW(registry.counter("ok", {{"bad-label", "x"}}), std::invalid_argument);
  BOOST_CHECK_THROW(registry.counter("resilience.strategy.events"), std::invalid_argument);
  BOOST_CHECK_THROW(registry.counter("resilience_strategy_events"), std::invalid_argument);  // written alike
  registry.counter("app.requests");
  BOOST_CHECK_THROW(registry.counter("app_requests"), std::invalid_argument);
  BOOST_CHECK_THROW(registry.counter("x", {{"a.b", "1"}, {"a_b", "2"}}), std::invalid_argument);
  BOOST_CHECK_THROW(registry.counter("y", {{"__name", "1"}}), std::invalid_argument);
  BOOST_CHECK_THROW(registry.histogram("z", {{"le", "1"}}), std::invalid_argument);
  registry.counter("calls", {{"peer", "a"}});
  BOOST_CHECK_THROW(registry.gauge("calls", {{"peer", "a"}}), std::invalid_argument);  // another kind
  BOOST_CHECK_THROW(registry.counter("calls", {{"host", "a"}}), std::invalid_argument);  // other label names
  registry.histogram("waits", {}, {}, resilience::http_duration_buckets());
  BOOST_CHECK_THROW(registry.histogram("waits"), std::invalid_argument);  // other bounds
  const resilience::duration unordered[] = {2s, 1s};
  BOOST_CHECK_THROW(registry.histogram("other", {}, {}, unordered), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
