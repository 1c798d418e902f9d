// breaker_options: a bad value is refused naming its field, where it is set
// or (a contradiction between fields) where the breaker is built; a setter
// leaves the options it was called on as they were.
#include "support.hpp"

#include <resilience/breaker_options.hpp>
#include <resilience/circuit_breaker.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <chrono>

using namespace std::chrono_literals;
using resilience::breaker_options;
using resilience::test::throws_naming;

namespace {

using breaker = resilience::basic_circuit_breaker<resilience::testing::manual_clock>;

}  // namespace

BOOST_AUTO_TEST_SUITE(breaker_options_validation)

BOOST_AUTO_TEST_CASE(bad_input_names_the_field) {
  const breaker_options o;
  throws_naming([&] { return o.consecutive_failures(0); }, "consecutive_failures");
  throws_naming([&] { return o.failure_ratio(0.0); }, "failure_ratio");
  throws_naming([&] { return o.failure_ratio(1.5); }, "failure_ratio");
  throws_naming([&] { return o.failure_ratio(-0.1); }, "failure_ratio");
  throws_naming([&] { return o.slow_calls(0ms, 0.5); }, "slow_calls");
  throws_naming([&] { return o.slow_calls(1s, 0.0); }, "slow_calls");
  throws_naming([&] { return o.count_window(0); }, "count_window");
  throws_naming([&] { return o.time_window(-1s); }, "time_window");
  throws_naming([&] { return o.time_window(10s, 0); }, "time_window");
  throws_naming([&] { return o.minimum_calls(0); }, "minimum_calls");
  throws_naming([&] { return o.open_duration(-1ms); }, "open_duration");
  throws_naming([&] { return o.open_duration(breaker_options::duration_generator{}); }, "open_duration");
  throws_naming([&] { return o.half_open_permits(0); }, "half_open_permits");
  throws_naming([&] { return o.successes_to_close(0); }, "successes_to_close");
  throws_naming([&] { return o.half_open_limit(0s); }, "half_open_limit");
  throws_naming([&] { return breaker(o.count_window(10).minimum_calls(11)); }, "minimum_calls");
  // The setters do not touch the original.
  BOOST_TEST(o.failure_ratio().value() == 0.5);
  BOOST_TEST(o.consecutive_failures(4).consecutive_failures() == 4u);
  BOOST_TEST(o.consecutive_failures() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
