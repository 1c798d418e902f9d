// resilience/http/retry_after.hpp — the Retry-After header (RFC 9110 §10.2.3)
// and HTTP-dates (§5.6.7). No Beast here: plain strings in, durations out.
//
//   auto wait = resilience::http::parse_retry_after(res[field::retry_after],
//                                                   std::chrono::system_clock::now());
//   if (wait) ...;   // else: absent or malformed, use your backoff
//
// Retry-After is delay-seconds (1*DIGIT) or an HTTP-date, in any of the three
// formats a recipient must accept:
//   IMF-fixdate  "Sun, 06 Nov 1994 08:49:37 GMT"
//   RFC 850      "Sunday, 06-Nov-94 08:49:37 GMT"   (obsolete, two-digit year)
//   asctime      "Sun Nov  6 08:49:37 1994"          (obsolete)
//
// Rules, strict on purpose (a value we cannot read falls back to the caller's
// backoff, which is always safe):
//   - Optional whitespace (SP, HTAB) around the whole value is ignored;
//     nothing else may surround it. Names (days, months, "GMT") are
//     case-sensitive, as the RFC's grammar says.
//   - Day of month is checked against the month and year (no Feb 30, no
//     Feb 29 in 2023), hours 00-23, minutes 00-59, seconds 00-60 (60, a leap
//     second, reads as the first second of the next minute).
//   - The day name must be one of the format's names AND match the date: a
//     date whose weekday is wrong is refused as malformed.
//   - RFC 850's two-digit year: the latest year with those last two digits
//     that does not put the timestamp more than 50 years after `now`
//     (RFC 9110: a date that appears more than 50 years in the future means
//     the most recent past year with the same last two digits).
//   - A date at or before `now` is a zero delay. Delay-seconds "0" is zero.
//   - Values too large for `resilience::duration` (about 292 years)
//     saturate at duration::max(); nothing overflows. Parsing is linear in
//     the input's length and allocates nothing.
#pragma once

#include <resilience/clock.hpp>

#include <chrono>
#include <optional>
#include <string_view>

namespace resilience::http {

using wall_time = std::chrono::system_clock::time_point;

// An HTTP-date in any of the three formats, to the second; nullopt if it is
// malformed. `now` is needed only for RFC 850's two-digit year.
std::optional<std::chrono::sys_seconds> parse_http_date(std::string_view value, wall_time now) noexcept;

// An HTTP-date as a wall-clock time, or nullopt when system_clock cannot
// hold it (nanoseconds: years before 1678 and after 2261). Converting
// without this check overflows.
std::optional<wall_time> to_wall_time(std::chrono::sys_seconds t) noexcept;

// The wait a Retry-After value asks for, seen at wall-clock time `now`:
// never negative; nullopt if the value is empty or malformed.
std::optional<duration> parse_retry_after(std::string_view value, wall_time now) noexcept;

}  // namespace resilience::http
