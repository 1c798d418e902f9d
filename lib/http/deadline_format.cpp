// Deadline header values: see resilience/http/deadline_format.hpp.
#include <resilience/http/deadline_format.hpp>

#include "ascii.hpp"

#include <array>
#include <cstdint>
#include <limits>

namespace resilience::http {
namespace {

using detail::is_digit;

using rep = duration::rep;
static_assert(std::is_same_v<duration::period, std::nano>, "resilience::duration counts nanoseconds");

struct unit {
  char symbol;
  rep nanos;
};
// Finest first: format tries them in this order.
constexpr std::array<unit, 6> units{{{'n', 1},
                                     {'u', 1'000},
                                     {'m', 1'000'000},
                                     {'S', 1'000'000'000},
                                     {'M', 60'000'000'000},
                                     {'H', 3'600'000'000'000}}};
constexpr rep max_grpc_count = 99'999'999;

// n units as a duration, saturating.
duration scaled(std::uint64_t n, rep nanos) noexcept {
  constexpr auto max = static_cast<std::uint64_t>(std::numeric_limits<rep>::max());
  if (n > max / static_cast<std::uint64_t>(nanos)) return duration::max();
  return duration(static_cast<rep>(n) * nanos);
}

}  // namespace

std::optional<duration> parse_grpc_timeout(std::string_view v) noexcept {
  if (v.size() < 2 || v.size() > 9) return std::nullopt;
  std::uint64_t n = 0;
  for (const char c : v.substr(0, v.size() - 1)) {
    if (!is_digit(c)) return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  for (const unit& u : units)
    if (u.symbol == v.back()) return scaled(n, u.nanos);
  return std::nullopt;
}

std::string format_grpc_timeout(duration d) {
  if (d <= duration::zero()) return "1n";
  const rep t = d.count();
  for (const unit& u : units) {
    const rep count = t / u.nanos + (t % u.nanos != 0 ? 1 : 0);
    if (count <= max_grpc_count) return std::to_string(count) + u.symbol;
  }
  // Unreachable: duration::max() is about 2.6 million hours.
  return std::to_string(max_grpc_count) + 'H';
}

std::optional<duration> parse_timeout_ms(std::string_view v) noexcept {
  if (v.empty()) return std::nullopt;
  std::uint64_t n = 0;
  constexpr std::uint64_t stop = std::numeric_limits<std::uint64_t>::max() / 10 - 10;
  for (const char c : v) {
    if (!is_digit(c)) return std::nullopt;
    if (n < stop) n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return scaled(n, 1'000'000);
}

std::string format_timeout_ms(duration d) {
  if (d <= duration::zero()) return "0";
  const rep t = d.count();
  return std::to_string(t / 1'000'000 + (t % 1'000'000 != 0 ? 1 : 0));
}

time_point deadline_after(duration timeout, time_point now) noexcept {
  if (timeout <= duration::zero()) return now;
  if (timeout == duration::max()) return time_point::max();
  return saturating_add(now, timeout);
}

duration time_until(time_point deadline, time_point now) noexcept {
  if (deadline == time_point::max()) return duration::max();
  if (deadline <= now) return duration::zero();
  const rep a = deadline.time_since_epoch().count();
  const rep b = now.time_since_epoch().count();
  if (b < 0 && a > std::numeric_limits<rep>::max() + b) return duration::max();
  return deadline - now;
}

std::optional<time_point> grpc_timeout_deadline(std::string_view value, time_point now) noexcept {
  const auto t = parse_grpc_timeout(value);
  if (!t) return std::nullopt;
  return deadline_after(*t, now);
}

std::optional<time_point> timeout_ms_deadline(std::string_view value, time_point now) noexcept {
  const auto t = parse_timeout_ms(value);
  if (!t) return std::nullopt;
  return deadline_after(*t, now);
}

}  // namespace resilience::http
