// resilience/expiry_event.hpp — what a timeout or deadline stage reports.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/outcome.hpp>

#include <cstdint>
#include <functional>

namespace resilience {

// What a timeout or deadline stage reports when its bound ends a call: the
// error it ends with (timeout or deadline_exceeded), when the bound passed,
// and the attempt number the context carried. Reported on the caller's
// executor once the op that overran has finished.
struct expiry_event {
  error_code reason;
  time_point at;
  std::uint32_t attempt;
};
using expiry_hook = std::function<void(const expiry_event&)>;

}  // namespace resilience
