// resilience/http/deadline_header.hpp — a deadline read from and written to
// a Beast message's header fields (deadline_format.hpp has the values).
//
//   const auto inbound = resilience::http::deadline_header::grpc_timeout();
//   const auto outbound = resilience::http::deadline_header::milliseconds("x-request-timeout-ms");
//   if (auto d = inbound.read(req, clock.now())) ctx.deadline = std::min(ctx.deadline, *d);
//   outbound.write(out_req, ctx.deadline, clock.now());
//
// read(): the deadline the header names, counted from `now`; nullopt when the
// header is absent or malformed (read_all() tells which: http::server answers
// a malformed one 400). A message with the field more than once is held to
// the earliest deadline they name (a proxy may have added its own), and is
// malformed if any one is. write(): sets the header to the
// time left, rounded up; with no deadline (time_point::max()) it removes the header instead. A
// deadline already passed is written as the format's least value ("1n" or
// "0", see deadline_format.hpp): the peer learns that no time is left.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/http/deadline_format.hpp>

#include <boost/beast/http/fields.hpp>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace resilience::http {

class deadline_header {
 public:
  // "grpc-timeout", gRPC's format.
  static deadline_header grpc_timeout() { return deadline_header("grpc-timeout", true); }
  // A header of the caller's naming, holding unsigned milliseconds. The name
  // must be an HTTP token (RFC 9110 §5.6.2), else std::invalid_argument.
  static deadline_header milliseconds(std::string name) {
    if (!is_token(name))
      throw std::invalid_argument("http::deadline_header: \"" + name + "\" is not a valid header name");
    return deadline_header(std::move(name), false);
  }

  std::string_view name() const noexcept { return name_; }
  bool is_grpc_timeout() const noexcept { return grpc_; }

  // What the fields say: `present` when the header is there at all;
  // `deadline` the earliest one named, or nullopt if any is malformed.
  struct reading {
    bool present = false;
    std::optional<time_point> deadline;
  };

  template <class Fields>
  std::optional<time_point> read(const Fields& fields, time_point now) const {
    return read_all(fields, now).deadline;
  }
  template <class Fields>
  reading read_all(const Fields& fields, time_point now) const {
    reading r;
    const auto [first, last] = fields.equal_range(name_);
    for (auto it = first; it != last; ++it) {
      const auto d = parse(std::string_view(it->value().data(), it->value().size()), now);
      if (!d) return {true, std::nullopt};
      r.deadline = r.present ? std::min(*r.deadline, *d) : *d;
      r.present = true;
    }
    return r;
  }

  // The first field's value, unparsed; nullopt when there is none.
  template <class Fields>
  std::optional<std::string_view> value_in(const Fields& fields) const {
    const auto it = fields.find(name_);
    if (it == fields.end()) return std::nullopt;
    return std::string_view(it->value().data(), it->value().size());
  }
  std::optional<time_point> parse(std::string_view value, time_point now) const noexcept {
    return grpc_ ? grpc_timeout_deadline(value, now) : timeout_ms_deadline(value, now);
  }

  template <class Fields>
  void write(Fields& fields, time_point deadline, time_point now) const {
    if (deadline == time_point::max()) {
      fields.erase(name_);
      return;
    }
    const duration left = time_until(deadline, now);
    fields.set(name_, grpc_ ? format_grpc_timeout(left) : format_timeout_ms(left));
  }

 private:
  deadline_header(std::string name, bool grpc) : name_(std::move(name)), grpc_(grpc) {}

  static bool is_token(std::string_view s) noexcept {
    if (s.empty()) return false;
    for (const char c : s) {
      const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
      if (!alnum && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) return false;
    }
    return true;
  }

  std::string name_;
  bool grpc_;
};

}  // namespace resilience::http
