// libFuzzer target: grpc-timeout and milliseconds headers. Parsing never
// crashes or overflows; what parses formats back to a value that parses to
// no less; formatting any duration gives a valid value that is never less.
#include <resilience/http/deadline_format.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace rhttp = resilience::http;
using resilience::duration;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view value(reinterpret_cast<const char*>(data), size);
  if (const auto t = rhttp::parse_grpc_timeout(value)) {
    if (*t < duration::zero()) std::abort();
    const auto back = rhttp::parse_grpc_timeout(rhttp::format_grpc_timeout(*t));
    if (!back || (*back < *t && *t > duration::zero())) std::abort();
  }
  if (const auto t = rhttp::parse_timeout_ms(value)) {
    if (*t < duration::zero()) std::abort();
    const auto back = rhttp::parse_timeout_ms(rhttp::format_timeout_ms(*t));
    if (!back || *back < *t) std::abort();
  }
  // The first 8 bytes as a duration: format must round up and stay parseable.
  if (size >= 8) {
    duration::rep r;
    std::memcpy(&r, data, sizeof r);
    const duration d(r);
    const auto g = rhttp::parse_grpc_timeout(rhttp::format_grpc_timeout(d));
    if (!g || *g < d || *g <= duration::zero()) std::abort();
    const auto m = rhttp::parse_timeout_ms(rhttp::format_timeout_ms(d));
    if (!m || *m < d) std::abort();
    const resilience::time_point now(duration(r / 2));
    (void)rhttp::time_until(rhttp::deadline_after(d, now), now);
  }
  return 0;
}
