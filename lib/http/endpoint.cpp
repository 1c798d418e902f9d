// resilience/http/endpoint.hpp's keys.
#include <resilience/http/endpoint.hpp>

#include <charconv>
#include <cstring>
#include <string>

namespace resilience::http {

std::string endpoint::key() const {
  // Built on every request: one allocation at most, and none for a key that
  // fits the string's own buffer.
  // Written in place at its final size: each append would check the
  // capacity and call out again.
  char digits[5];
  const auto length = static_cast<std::size_t>(std::to_chars(digits, digits + sizeof digits, port).ptr - digits);
  std::string k(host.size() + 1 + length + (tls ? 4 : 0) + (address.empty() ? 0 : 1 + address.size()), ':');
  char* p = k.data();
  std::memcpy(p, host.data(), host.size());
  p += host.size() + 1;  // past the ':' already there
  std::memcpy(p, digits, length);
  p += length;
  if (tls) {
    std::memcpy(p, ":tls", 4);
    p += 4;
  }
  if (!address.empty()) {
    *p++ = '@';
    std::memcpy(p, address.data(), address.size());
  }
  return k;
}

std::string endpoint::authority() const {
  const bool default_port = port == (tls ? 443 : 80);
  // An IPv6 literal is bracketed in a Host header.
  const bool bracketed = host.find(':') != std::string::npos;
  std::string a;
  if (bracketed) a += '[';
  a += host;
  if (bracketed) a += ']';
  if (!default_port) {
    a += ':';
    a += std::to_string(port);
  }
  return a;
}

}  // namespace resilience::http
