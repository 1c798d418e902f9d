// expect: must outlive the pipeline
// strategy: fleet_rate_limiter
// A fleet-wide limiter holds the lease and the connection to Redis: a
// pipeline refers to it, so a temporary one would be gone before the first
// call.
#include <resilience/pipeline.hpp>
#include <resilience/redis/fleet_limiter.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/io_context.hpp>

#include <chrono>

void build(boost::asio::io_context& io) {
  using namespace std::chrono_literals;
  namespace redis = resilience::redis;
  const auto options = redis::fleet_limiter_options{}.key("quota");
#ifdef RESILIENCE_MISUSE
  const auto call = resilience::pipeline(redis::fleet_limiter{io.get_executor(), {}, options}, resilience::timeout(1s));
#else
  static redis::fleet_limiter limiter{io.get_executor(), {}, options};
  const auto call = resilience::pipeline(limiter, resilience::timeout(1s));
#endif
  (void)call;
}
