#include <resilience/error.hpp>

#include <string>

namespace resilience {
namespace {

class category final : public boost::system::error_category {
 public:
  // A fixed id keeps comparisons cheap and stable across shared objects.
  constexpr category() noexcept : error_category(0x7265'7369'6c69'656eULL) {}

  const char* name() const noexcept override { return "resilience"; }

  std::string message(int value) const override {
    switch (static_cast<error>(value)) {
      case error::timeout: return "operation timed out";
      case error::deadline_exceeded: return "deadline exceeded";
      case error::circuit_open: return "circuit breaker is open";
      case error::retry_budget_exhausted: return "retry budget exhausted";
      case error::bulkhead_full: return "bulkhead is full";
      case error::rate_limited: return "rate limit reached";
      case error::throttled: return "rejected by adaptive throttling";
      case error::no_replica: return "no replica to send to";
      case error::pool_exhausted: return "no pooled connection in time";
    }
    return "unknown resilience error";
  }
};

constinit const category the_category;

}  // namespace

const boost::system::error_category& error_category() noexcept { return the_category; }

}  // namespace resilience
