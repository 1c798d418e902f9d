// What the client asks of a request beyond Beast's API: a field's presence
// without a name lookup, whether a failed exchange met a connection the
// server had closed, and a file body's position for a retry. Not public API.
#pragma once

#include <boost/beast/http/field.hpp>
#include <boost/system/error_code.hpp>

#include <concepts>
#include <functional>
#include <cstdint>

namespace resilience::http {

namespace detail {

// The request a call holds: its own, or the caller's (std::ref).
template <class R>
R& request_of(R& r) noexcept {
  return r;
}
template <class R>
R& request_of(std::reference_wrapper<R> r) noexcept {
  return r.get();
}

// Whether a message has a field: a walk of its fields comparing their enums
// (find() compares names in a tree, about ten times the work for a few fields).
template <class Fields>
bool holds(const Fields& fields, boost::beast::http::field name) noexcept {
  for (const auto& f : fields)
    if (f.name() == name) return true;
  return false;
}

// Whether an exchange on a kept-alive connection failed as one the server
// had closed fails: the write refused, or the read ended (end of stream, a
// reset, a TLS stream cut short) before a byte of a response.
bool closed_before_answering(const boost::system::error_code& ec, bool got_some) noexcept;

// A body read from a file as it is written (Beast's file_body): its writer
// starts at the file's position, so a retry must put it back.
template <class V>
concept file_backed_body = requires(V& v, boost::system::error_code& ec) {
  { v.file().pos(ec) } -> std::convertible_to<std::uint64_t>;
  v.file().seek(std::uint64_t{}, ec);
};
template <class V>
std::uint64_t body_position(V& v) noexcept {
  if constexpr (file_backed_body<V>) {
    boost::system::error_code ec;
    const std::uint64_t at = v.file().pos(ec);
    return ec ? 0 : at;
  } else {
    return 0;
  }
}
template <class V>
void rewind_body(V& v, [[maybe_unused]] std::uint64_t to) noexcept {
  if constexpr (file_backed_body<V>) {
    boost::system::error_code ignored;  // a file that cannot seek fails the next write instead
    v.file().seek(to, ignored);
  }
}

}  // namespace detail

}  // namespace resilience::http
