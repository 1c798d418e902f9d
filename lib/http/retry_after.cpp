// Retry-After and HTTP-date parsing: see resilience/http/retry_after.hpp.
#include <resilience/http/retry_after.hpp>

#include "ascii.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace resilience::http {
namespace {

using detail::is_digit;

using namespace std::chrono;

// Indexed by weekday::c_encoding(): 0 is Sunday.
constexpr std::array<std::string_view, 7> short_days{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
constexpr std::array<std::string_view, 7> long_days{"Sunday",   "Monday", "Tuesday", "Wednesday",
                                                    "Thursday", "Friday", "Saturday"};
constexpr std::array<std::string_view, 12> months{"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

class cursor {
 public:
  explicit cursor(std::string_view s) noexcept : s_(s) {}

  bool literal(std::string_view t) noexcept {
    if (s_.substr(i_, t.size()) != t) return false;
    i_ += t.size();
    return true;
  }
  // Exactly n digits.
  bool digits(std::size_t n, int& out) noexcept {
    if (s_.size() - i_ < n) return false;
    int v = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const char c = s_[i_ + k];
      if (!is_digit(c)) return false;
      v = v * 10 + (c - '0');
    }
    i_ += n;
    out = v;
    return true;
  }
  template <std::size_t N>
  int one_of(const std::array<std::string_view, N>& names) noexcept {
    for (std::size_t k = 0; k < N; ++k)
      if (literal(names[k])) return static_cast<int>(k);
    return -1;
  }
  bool at_end() const noexcept { return i_ == s_.size(); }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
};

struct stamp {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0, weekday = -1;
};

bool time_of_day(cursor& c, stamp& t) noexcept {
  return c.digits(2, t.hour) && c.literal(":") && c.digits(2, t.minute) && c.literal(":") &&
         c.digits(2, t.second) && t.hour <= 23 && t.minute <= 59 && t.second <= 60;
}

bool month(cursor& c, stamp& t) noexcept {
  t.month = c.one_of(months) + 1;
  return t.month > 0;
}

// The checked date as seconds since the epoch.
std::optional<sys_seconds> to_time(const stamp& t) noexcept {
  const year_month_day ymd{year{t.year}, std::chrono::month{static_cast<unsigned>(t.month)},
                           std::chrono::day{static_cast<unsigned>(t.day)}};
  if (!ymd.ok()) return std::nullopt;
  const sys_days d{ymd};
  if (static_cast<int>(weekday{d}.c_encoding()) != t.weekday) return std::nullopt;
  return sys_seconds{d} + hours{t.hour} + minutes{t.minute} + seconds{t.second};
}

// "Sun, 06 Nov 1994 08:49:37 GMT"
std::optional<sys_seconds> imf_fixdate(std::string_view s) noexcept {
  cursor c(s);
  stamp t;
  t.weekday = c.one_of(short_days);
  if (t.weekday < 0 || !c.literal(", ") || !c.digits(2, t.day) || !c.literal(" ") || !month(c, t) ||
      !c.literal(" ") || !c.digits(4, t.year) || !c.literal(" ") || !time_of_day(c, t) || !c.literal(" GMT") ||
      !c.at_end())
    return std::nullopt;
  return to_time(t);
}

// "Sun Nov  6 08:49:37 1994" (day: two digits, or a space and one digit)
std::optional<sys_seconds> asctime_date(std::string_view s) noexcept {
  cursor c(s);
  stamp t;
  t.weekday = c.one_of(short_days);
  if (t.weekday < 0 || !c.literal(" ") || !month(c, t) || !c.literal(" ")) return std::nullopt;
  if (!(c.literal(" ") ? c.digits(1, t.day) : c.digits(2, t.day))) return std::nullopt;
  if (!c.literal(" ") || !time_of_day(c, t) || !c.literal(" ") || !c.digits(4, t.year) || !c.at_end())
    return std::nullopt;
  return to_time(t);
}

// "Sunday, 06-Nov-94 08:49:37 GMT"
std::optional<sys_seconds> rfc850_date(std::string_view s, wall_time now) noexcept {
  cursor c(s);
  stamp t;
  int yy = 0;
  t.weekday = c.one_of(long_days);
  if (t.weekday < 0 || !c.literal(", ") || !c.digits(2, t.day) || !c.literal("-") || !month(c, t) ||
      !c.literal("-") || !c.digits(2, yy) || !c.literal(" ") || !time_of_day(c, t) || !c.literal(" GMT") ||
      !c.at_end())
    return std::nullopt;

  // The latest year ending in yy whose timestamp is not more than 50 years
  // after now (compared field by field: no calendar arithmetic on Feb 29).
  const sys_days today = floor<days>(now);
  const year_month_day n{today};
  const hh_mm_ss<seconds> tod{floor<seconds>(now - today)};
  const int now_year = static_cast<int>(n.year());
  const std::array<long long, 6> limit{now_year + 50LL,
                                       static_cast<unsigned>(n.month()),
                                       static_cast<unsigned>(n.day()),
                                       tod.hours().count(),
                                       tod.minutes().count(),
                                       tod.seconds().count()};
  int y = now_year - ((now_year % 100) + 100) % 100 + yy + 100;
  for (;;) {
    const std::array<long long, 6> candidate{y, t.month, t.day, t.hour, t.minute, t.second};
    if (candidate <= limit) break;
    y -= 100;
  }
  t.year = y;
  return to_time(t);
}

bool is_ows(char c) noexcept { return c == ' ' || c == '\t'; }

}  // namespace

std::optional<sys_seconds> parse_http_date(std::string_view s, wall_time now) noexcept {
  if (s.size() < 4) return std::nullopt;
  if (s[3] == ',') return imf_fixdate(s);
  if (s[3] == ' ') return asctime_date(s);
  return rfc850_date(s, now);
}

std::optional<wall_time> to_wall_time(sys_seconds t) noexcept {
  constexpr auto lowest = ceil<seconds>(wall_time::min());
  constexpr auto highest = floor<seconds>(wall_time::max());
  if (t < lowest || t > highest) return std::nullopt;
  return time_point_cast<wall_time::duration>(t);
}

std::optional<duration> parse_retry_after(std::string_view v, wall_time now) noexcept {
  while (!v.empty() && is_ows(v.front())) v.remove_prefix(1);
  while (!v.empty() && is_ows(v.back())) v.remove_suffix(1);
  if (v.empty()) return std::nullopt;

  constexpr std::int64_t max_seconds = duration_cast<seconds>(duration::max()).count();
  if (is_digit(v.front())) {
    // delay-seconds: 1*DIGIT, saturating (a value that stops growing past
    // max_seconds cannot overflow, however many digits follow).
    std::int64_t n = 0;
    for (const char c : v) {
      if (!is_digit(c)) return std::nullopt;
      if (n <= max_seconds) n = n * 10 + (c - '0');
    }
    if (n > max_seconds) return duration::max();
    return duration_cast<duration>(seconds{n});
  }

  const auto date = parse_http_date(v, now);
  if (!date) return std::nullopt;
  // In seconds first: the years an HTTP-date may name overflow nanoseconds.
  const auto now_s = floor<seconds>(now);
  const std::int64_t ahead = date->time_since_epoch().count() - now_s.time_since_epoch().count();
  if (ahead <= 0) return duration::zero();
  if (ahead >= max_seconds) return duration::max();
  const auto fraction = duration_cast<duration>(now - now_s);  // in [0, 1 s)
  return duration_cast<duration>(seconds{ahead}) - fraction;
}

}  // namespace resilience::http
