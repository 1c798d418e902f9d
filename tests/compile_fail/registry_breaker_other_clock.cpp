// expect: must read the same clock type
// strategy: circuit_breaker
// A breaker from a registry on the steady clock, in a pipeline on a manual
// clock, would keep its breaks on another time than the calls it guards.
#include <resilience/breaker_registry.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <string>

#include <boost/asio/awaitable.hpp>

void build() {
  resilience::testing::manual_clock clock;
#ifdef RESILIENCE_MISUSE
  static resilience::basic_breaker_registry<std::string> hosts;
#else
  static resilience::basic_breaker_registry<std::string, resilience::testing::manual_clock> hosts{
      resilience::breaker_options{}, resilience::breaker_registry_options{}, clock};
#endif
  const auto call = resilience::pipeline(resilience::retry_policy{}.clock(clock), hosts.stage("db"));
  (void)call([]() -> boost::asio::awaitable<int> { co_return 1; });  // where the clocks are checked
}
