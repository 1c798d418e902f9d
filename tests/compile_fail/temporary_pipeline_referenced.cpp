// expect: use of deleted function .*resilience::pipeline<Stored>::run_referenced\(Op, const resilience::context&\) &&
// expect: call to deleted member function 'run_referenced'[\s\S]*?resilience/pipeline\.hpp:[0-9:]+ note: candidate function.* has been explicitly deleted
// strategy: retry
// A stage or pipeline named by an lvalue is copied into each call, unless
// run_referenced() is asked to refer to it: then it must outlive the call,
// and a temporary cannot.
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>

boost::asio::awaitable<int> op();

auto call() {
  using namespace std::chrono_literals;
#ifdef RESILIENCE_MISUSE
  return resilience::pipeline(resilience::retry_policy{}, resilience::timeout(1s)).run_referenced([] { return op(); });
#else
  static const auto pipeline = resilience::pipeline(resilience::retry_policy{}, resilience::timeout(1s));
  return pipeline.run_referenced([] { return op(); });
#endif
}
