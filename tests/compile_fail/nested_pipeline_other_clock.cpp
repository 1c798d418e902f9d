// expect: must read the same clock type
// strategy: retry
// A pipeline nested in another is one more stage: its clock must be the
// outer stages' clock, or calls would end with deadline_exceeded unrun.
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/awaitable.hpp>

void build() {
  using namespace std::chrono_literals;
  resilience::testing::manual_clock clock;
  const auto inner = resilience::pipeline(resilience::retry_policy{}, resilience::timeout(1s));  // steady clock
#ifdef RESILIENCE_MISUSE
  const auto call = resilience::pipeline(resilience::timeout(5s).clock(clock), inner);
#else
  const auto call = resilience::pipeline(resilience::timeout(5s), inner).clock(clock);
#endif
  (void)call([]() -> boost::asio::awaitable<int> { co_return 1; });  // where the clocks are checked
}
