// expect: must read the same clock type
// strategy: deadline
// A deadline kept on a manual clock around stages on the steady clock would
// measure the call's time on another time than its attempts'.
#include <resilience/deadline.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/awaitable.hpp>

void build() {
  using namespace std::chrono_literals;
  resilience::testing::manual_clock clock;
#ifdef RESILIENCE_MISUSE
  const auto call = resilience::pipeline(resilience::deadline_stage(1s).clock(clock), resilience::retry_policy{});
#else
  const auto call = resilience::pipeline(resilience::deadline_stage(1s), resilience::retry_policy{}).clock(clock);
#endif
  (void)call([]() -> boost::asio::awaitable<int> { co_return 1; });  // where the clocks are checked
}
