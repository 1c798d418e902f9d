// expect: must read the same clock type
// strategy: circuit_breaker
// A breaker keeps its own clock; the stages that take one are put on it with
// pipeline(...).clock(c). Without that, the call would mix two clocks.
#include <resilience/circuit_breaker.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/awaitable.hpp>

void build() {
  using namespace std::chrono_literals;
  resilience::testing::manual_clock clock;
  static resilience::basic_circuit_breaker<resilience::testing::manual_clock> breaker{{}, clock};
#ifdef RESILIENCE_MISUSE
  const auto call = resilience::pipeline(resilience::retry_policy{}, breaker, resilience::timeout(1s));
#else
  const auto call = resilience::pipeline(resilience::retry_policy{}, breaker, resilience::timeout(1s)).clock(clock);
#endif
  (void)call([]() -> boost::asio::awaitable<int> { co_return 1; });  // where the clocks are checked
}
