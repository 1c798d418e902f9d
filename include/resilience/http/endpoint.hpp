// resilience/http/endpoint.hpp — where a request goes: a host, a port,
// plain or TLS.
//
//   const auto api = resilience::http::endpoint::https("api.example.com");   // port 443
//   const auto db = resilience::http::endpoint::http("10.0.0.7", 8080);
//   api.key();        // "api.example.com:443:tls": its connections' and breaker's key
//   api.authority();  // "api.example.com": the Host header
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace resilience::http {

// Where requests go: a host (name or IP literal), a port, plain or TLS.
struct endpoint {
  std::string host;
  std::uint16_t port = 80;
  bool tls = false;
  // Where to connect instead of resolving `host`: an address `host` resolved
  // to (an upstream's replica, upstream.hpp). The Host header, SNI and the
  // certificate's check still use `host`. Empty: resolve `host`.
  std::string address{};

  // Throw std::invalid_argument for an empty host, a host with a byte no
  // name or address has (a control character, a space, one of "/?#@[]\\":
  // an IPv6 literal is given bare, "::1", and bracketed where it is written),
  // or port 0.
  static endpoint http(std::string host, std::uint16_t port = 80) { return validated({std::move(host), port, false, {}}); }
  static endpoint https(std::string host, std::uint16_t port = 443) { return validated({std::move(host), port, true, {}}); }

  // The factories' check, which the client repeats for an endpoint built
  // field by field. A CR or LF would otherwise end the Host header early and
  // start one of the caller's choosing; a NUL would cut the name resolved.
  void validate() const {
    if (host.empty()) throw std::invalid_argument("http::endpoint: host must not be empty");
    for (const char c : host) {
      if (refused_in_host(static_cast<unsigned char>(c)))
        throw std::invalid_argument("http::endpoint: host must be a name or an address (IPv6 without brackets), "
                                    "without spaces, control characters, or any of /?#@[]\\ (a URL goes in the "
                                    "request's target)");
    }
    if (port == 0) throw std::invalid_argument("http::endpoint: port must not be 0");
    for (const char c : address) {
      if (refused_in_host(static_cast<unsigned char>(c)))
        throw std::invalid_argument("http::endpoint: address must be an IP address, without brackets");
    }
  }

  // "host:port", or "host:port:tls", and "@address" after it when it has
  // one: the key of its connections and of its circuit breaker.
  std::string key() const;
  // The Host header's value: the port only when not the scheme's default.
  std::string authority() const;

 private:
  // Checked on every request: a table, not eleven comparisons a character.
  static bool refused_in_host(unsigned char c) noexcept {
    static constexpr auto refused = [] {
      std::array<bool, 256> t{};
      for (unsigned u = 0; u <= 0x20; ++u) t[u] = true;
      for (const char r : std::string_view("\x7f/?#@[]\\")) t[static_cast<unsigned char>(r)] = true;
      return t;
    }();
    return refused[c];
  }
  static endpoint validated(endpoint e) {
    e.validate();
    return e;
  }
};

}  // namespace resilience::http
