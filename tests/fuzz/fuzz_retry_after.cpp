// libFuzzer target: Retry-After and HTTP-date parsing must never crash,
// overflow (UBSan), hang or read out of bounds (ASan), and what they accept
// must be consistent.
#include <resilience/http/retry_after.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

using namespace std::chrono;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view value(reinterpret_cast<const char*>(data), size);
  // Now: a fixed instant, and the extremes system_clock can hold.
  static const resilience::http::wall_time nows[] = {
      sys_days{year{2026} / 11 / 23} + hours{12}, system_clock::time_point{},
      system_clock::time_point::min() + hours{24 * 366}, system_clock::time_point::max() - hours{24 * 366}};
  for (const auto now : nows) {
    const auto wait = resilience::http::parse_retry_after(value, now);
    if (wait && *wait < resilience::duration::zero()) std::abort();
    const auto date = resilience::http::parse_http_date(value, now);
    // A date that parses is a date Retry-After accepts.
    if (date && !wait) std::abort();
    // A date as "now" (the Date header's use): converted only when it fits.
    if (date) {
      if (const auto as_now = resilience::http::to_wall_time(*date))
        (void)resilience::http::parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", *as_now);
    }
  }
  return 0;
}
