// resilience/http/deadline_format.hpp — how a deadline is written in a header value.
// No Beast here: header values in, durations and deadlines out.
//
//   // inbound: the caller's deadline, on our clock
//   if (auto d = resilience::http::grpc_timeout_deadline(req["grpc-timeout"], clock.now()))
//     ctx.deadline = *d;
//   // outbound: what is left of ours
//   out.set("grpc-timeout", resilience::http::format_grpc_timeout(ctx.remaining()));
//
// grpc-timeout (gRPC over HTTP/2): 1 to 8 ASCII digits and a unit, H (hours),
// M (minutes), S (seconds), m (milliseconds), u (microseconds), n
// (nanoseconds). Nothing else: no sign, no space, no empty digits.
//   - parse: "0n" is accepted as zero (an expired deadline; some peers send
//     it). 99999999H is longer than duration can hold: saturates at
//     duration::max(), which means "no deadline" to this library.
//   - format: the finest unit whose count fits in 8 digits, rounded UP (a
//     peer never gets less time than we have: 1500ns is "1500n",
//     123456789ns is "123457u"). A positive time below one unit is "1n".
//     A zero or negative time (the deadline has passed) is also "1n": the
//     grammar has no zero, and 1 ns tells the peer its time is up.
//     duration::max() (no deadline) is "2562048H": callers with no deadline
//     should not send the header at all.
//
// A milliseconds header (a name of the caller's choice, such as
// "x-request-timeout-ms"): an unsigned decimal count of milliseconds.
//   - parse: 1*DIGIT, any length, saturating at duration::max().
//   - format: rounded up to the next millisecond; zero or negative is "0".
#pragma once

#include <resilience/clock.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace resilience::http {

std::optional<duration> parse_grpc_timeout(std::string_view value) noexcept;
std::string format_grpc_timeout(duration timeout);

std::optional<duration> parse_timeout_ms(std::string_view value) noexcept;
std::string format_timeout_ms(duration timeout);

// now + timeout without overflow (a saturated timeout gives
// time_point::max(), "no deadline"); a negative timeout is now.
time_point deadline_after(duration timeout, time_point now) noexcept;
// The time left until `deadline`, never negative; duration::max() for
// time_point::max().
duration time_until(time_point deadline, time_point now) noexcept;

// Parse + deadline_after in one step: nullopt if the value is malformed.
std::optional<time_point> grpc_timeout_deadline(std::string_view value, time_point now) noexcept;
std::optional<time_point> timeout_ms_deadline(std::string_view value, time_point now) noexcept;

}  // namespace resilience::http
