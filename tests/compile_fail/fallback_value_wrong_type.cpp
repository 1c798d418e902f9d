// expect: must convert to the op's value type
// strategy: fallback
// A fallback value stands in for the op's own value: one that cannot become
// it is refused where the stage is applied, not at run time.
#include <resilience/fallback.hpp>

#include <boost/asio/awaitable.hpp>

#include <string>

boost::asio::awaitable<int> count();

boost::asio::awaitable<int> call() {
#ifdef RESILIENCE_MISUSE
  const auto stage = resilience::fallback_value(std::string("none"));
#else
  const auto stage = resilience::fallback_value(0);
#endif
  co_return co_await stage([] { return count(); });
}
