// A pipeline whose stages are chosen at run time.
#include "support.hpp"

#include <resilience/any_pipeline.hpp>
#include <resilience/deadline.hpp>
#include <resilience/retry.hpp>
#include <resilience/timeout.hpp>

#include <chrono>
#include <stdexcept>

using namespace std::chrono_literals;
using resilience::backoff;
using resilience::retry_policy;
using resilience::test::completion;
using resilience::test::deadline_error;
using resilience::test::spawn;

namespace {
using virtual_time = resilience::test::timed_stages;
}  // namespace

BOOST_FIXTURE_TEST_SUITE(pipelines, virtual_time)

BOOST_AUTO_TEST_CASE(a_pipeline_built_at_run_time_behaves_the_same) {
  // Configuration decides the stages; the scenario is the static
  // a_deadline_passing_mid_attempt_is_deadline_exceeded one.
  resilience::any_pipeline<boost::system::result<int>> p;
  p.add(deadline(900ms))
      .add(retry_policy{}.max_attempts(10).backoff(backoff::constant(50ms).with_jitter(resilience::jitter::none)).clock(clock))
      .add(timeout(800ms));
  BOOST_TEST(p.size() == 3u);
  completion<boost::system::result<int>> done;
  spawn(io, p(slow(1s)), done);
  clock.run(io);
  BOOST_TEST(calls == 2);
  BOOST_TEST(finished == 2);
  BOOST_TEST((done.value->error() == deadline_error));
  BOOST_TEST((now() == 900ms));

  resilience::any_pipeline<boost::system::result<int>> bad;
  bad.add(resilience::deadline_stage(1s));
  BOOST_CHECK_THROW(bad.add(resilience::timeout(2s)), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
