// Server options: see resilience/http/server.hpp.
#include <resilience/http/server.hpp>
#include <resilience/detail/with_option.hpp>

#include <limits>

namespace resilience::http {
namespace {

// A time bound: positive, or duration::max() for none (already positive).
duration checked_bound(duration d, const char* field) {
  if (d <= duration::zero()) throw std::invalid_argument(std::string("http::server_options::") + field + ": must be positive");
  return d;
}

}  // namespace

server_options server_options::max_concurrent(std::uint32_t n) const {
  if (n < 1 || n > bulkhead_options::max_limit)
    throw std::invalid_argument("http::server_options::max_concurrent: must be in [1, 2^31 - 1]");
  return resilience::detail::with_option(*this, &server_options::max_concurrent_, n);
}

server_options server_options::retry_after(std::chrono::seconds s) const {
  if (s < std::chrono::seconds::zero())
    throw std::invalid_argument("http::server_options::retry_after: must not be negative");
  return resilience::detail::with_option(*this, &server_options::retry_after_, s);
}

server_options server_options::problem_details(bool on) const {
  return resilience::detail::with_option(*this, &server_options::problem_details_, on);
}

server_options server_options::inbound_deadline(deadline_header h) const {
  return resilience::detail::with_option(*this, &server_options::inbound_deadline_, std::move(h));
}

server_options server_options::max_deadline(duration d) const {
  return resilience::detail::with_option(*this, &server_options::max_deadline_, checked_bound(d, "max_deadline"));
}

server_options server_options::header_read_timeout(duration d) const {
  return resilience::detail::with_option(*this, &server_options::header_read_timeout_, checked_bound(d, "header_read_timeout"));
}

server_options server_options::body_read_timeout(duration d) const {
  return resilience::detail::with_option(*this, &server_options::body_read_timeout_, checked_bound(d, "body_read_timeout"));
}

server_options server_options::write_timeout(duration d) const {
  return resilience::detail::with_option(*this, &server_options::write_timeout_, checked_bound(d, "write_timeout"));
}

server_options server_options::idle_timeout(duration d) const {
  return resilience::detail::with_option(*this, &server_options::idle_timeout_, checked_bound(d, "idle_timeout"));
}

server_options server_options::max_header_bytes(std::uint64_t n) const {
  // Beast's parser takes a 32-bit header limit.
  if (n < 1 || n > std::numeric_limits<std::uint32_t>::max())
    throw std::invalid_argument("http::server_options::max_header_bytes: must be in [1, 2^32 - 1]");
  return resilience::detail::with_option(*this, &server_options::max_header_bytes_, static_cast<std::uint32_t>(n));
}

server_options server_options::max_body_bytes(std::uint64_t n) const {
  return resilience::detail::with_option(*this, &server_options::max_body_bytes_, n);
}

server_options server_options::max_connections(std::size_t n) const {
  if (n < 1) throw std::invalid_argument("http::server_options::max_connections: must be at least 1");
  return resilience::detail::with_option(*this, &server_options::max_connections_, n);
}

server_options server_options::drain_grace(duration d) const {
  if (d < duration::zero()) throw std::invalid_argument("http::server_options::drain_grace: must not be negative");
  return resilience::detail::with_option(*this, &server_options::drain_grace_, d);
}

server_options server_options::on_request_started(std::function<void(const server_request&)> f) const {
  return resilience::detail::with_option(*this, &server_options::started_, std::move(f));
}

server_options server_options::on_request_finished(std::function<void(const request_finished&)> f) const {
  return resilience::detail::with_option(*this, &server_options::finished_, std::move(f));
}

server_options server_options::on_shed(std::function<void(std::uint32_t)> f) const {
  return resilience::detail::with_option(*this, &server_options::shed_, std::move(f));
}

server_options server_options::on_deadline_exceeded(std::function<void(time_point)> f) const {
  return resilience::detail::with_option(*this, &server_options::deadline_exceeded_, std::move(f));
}

server_options server_options::on_slow_client(std::function<void(client_phase)> f) const {
  return resilience::detail::with_option(*this, &server_options::slow_client_, std::move(f));
}

server_options server_options::events(event_sink& sink) const {
  return resilience::detail::with_option(*this, &server_options::events_, &sink);
}

}  // namespace resilience::http
