// Character classes of the HTTP field values parsed in lib/http/ (RFC 9110's
// DIGIT is ASCII only, whatever the locale).
#pragma once

namespace resilience::http::detail {

constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

}  // namespace resilience::http::detail
