// expect: must read the same clock type
// strategy: retry, timeout
// A call has one clock: a manual clock in one stage and the steady clock in
// another would end calls with deadline_exceeded before the op ran.
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/awaitable.hpp>

void build() {
  using namespace std::chrono_literals;
  resilience::testing::manual_clock clock;
#ifdef RESILIENCE_MISUSE
  const auto call = resilience::pipeline(resilience::retry_policy{}.clock(clock), resilience::timeout(1s));
#else
  const auto call = resilience::pipeline(resilience::retry_policy{}, resilience::timeout(1s)).clock(clock);
#endif
  (void)call([]() -> boost::asio::awaitable<int> { co_return 1; });  // where the clocks are checked
}
