// What event.hpp declares and does not define inline.
#include <resilience/event.hpp>

namespace resilience {

const char* to_string(call_outcome o) noexcept {
  switch (o) {
    case call_outcome::success: return "success";
    case call_outcome::error: return "error";
    case call_outcome::exception: return "exception";
    case call_outcome::cancelled: return "cancelled";
  }
  return "unknown";
}

}  // namespace resilience
