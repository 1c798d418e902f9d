// Server options: see resilience/http/server.hpp.
#include <resilience/http/server.hpp>

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
  auto o = *this;
  o.max_concurrent_ = n;
  return o;
}

server_options server_options::retry_after(std::chrono::seconds s) const {
  if (s < std::chrono::seconds::zero())
    throw std::invalid_argument("http::server_options::retry_after: must not be negative");
  auto o = *this;
  o.retry_after_ = s;
  return o;
}

server_options server_options::inbound_deadline(deadline_header h) const {
  auto o = *this;
  o.inbound_deadline_ = std::move(h);
  return o;
}

server_options server_options::max_deadline(duration d) const {
  auto o = *this;
  o.max_deadline_ = checked_bound(d, "max_deadline");
  return o;
}

server_options server_options::header_read_timeout(duration d) const {
  auto o = *this;
  o.header_read_timeout_ = checked_bound(d, "header_read_timeout");
  return o;
}

server_options server_options::body_read_timeout(duration d) const {
  auto o = *this;
  o.body_read_timeout_ = checked_bound(d, "body_read_timeout");
  return o;
}

server_options server_options::write_timeout(duration d) const {
  auto o = *this;
  o.write_timeout_ = checked_bound(d, "write_timeout");
  return o;
}

server_options server_options::idle_timeout(duration d) const {
  auto o = *this;
  o.idle_timeout_ = checked_bound(d, "idle_timeout");
  return o;
}

server_options server_options::max_header_bytes(std::uint64_t n) const {
  // Beast's parser takes a 32-bit header limit.
  if (n < 1 || n > std::numeric_limits<std::uint32_t>::max())
    throw std::invalid_argument("http::server_options::max_header_bytes: must be in [1, 2^32 - 1]");
  auto o = *this;
  o.max_header_bytes_ = static_cast<std::uint32_t>(n);
  return o;
}

server_options server_options::max_body_bytes(std::uint64_t n) const {
  auto o = *this;
  o.max_body_bytes_ = n;
  return o;
}

server_options server_options::max_connections(std::size_t n) const {
  if (n < 1) throw std::invalid_argument("http::server_options::max_connections: must be at least 1");
  auto o = *this;
  o.max_connections_ = n;
  return o;
}

server_options server_options::drain_grace(duration d) const {
  if (d < duration::zero()) throw std::invalid_argument("http::server_options::drain_grace: must not be negative");
  auto o = *this;
  o.drain_grace_ = d;
  return o;
}

server_options server_options::on_request_started(std::function<void(const server_request&)> f) const {
  auto o = *this;
  o.started_ = std::move(f);
  return o;
}

server_options server_options::on_request_finished(std::function<void(const request_finished&)> f) const {
  auto o = *this;
  o.finished_ = std::move(f);
  return o;
}

server_options server_options::on_shed(std::function<void(std::uint32_t)> f) const {
  auto o = *this;
  o.shed_ = std::move(f);
  return o;
}

server_options server_options::on_deadline_exceeded(std::function<void(time_point)> f) const {
  auto o = *this;
  o.deadline_exceeded_ = std::move(f);
  return o;
}

server_options server_options::on_slow_client(std::function<void(client_phase)> f) const {
  auto o = *this;
  o.slow_client_ = std::move(f);
  return o;
}

}  // namespace resilience::http
