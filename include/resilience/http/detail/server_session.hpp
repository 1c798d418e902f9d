// A connection's record in http::server (for the drain and the sweep of
// bounds) and the stream its requests are read through. Not public API;
// included by resilience/http/server.hpp.
#pragma once

#include <resilience/clock.hpp>

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <algorithm>
#include <chrono>

namespace resilience::http::detail {

// One connection the server keeps track of, for a drain and the sweep of
// bounds to reach it.
struct session_entry {
  boost::asio::cancellation_signal signal;          // reaches the handler running in the session
  boost::asio::ip::tcp::socket* socket = nullptr;  // set while its session runs
  time_point deadline = time_point::max();          // the bound of the phase it is in, or the handler's deadline
  bool idle = false;                                // waiting for the next request
  bool in_handler = false;                          // `deadline` is the handler's
  bool cancelled = false;                           // by a drain
  bool timed_out = false;                           // past its bound: the sweep closed its socket
  bool handler_expired = false;                     // past its deadline: the sweep cancelled the handler
};

// The socket as Beast reads a request header through. A kept-alive
// connection waits for its next request inside this read, bounded by the
// idle timeout; Beast reads again only when bytes came short of a whole
// header, so a second read means the request has begun, and from then on
// the header's own bound applies (from its first byte, not from the end of
// the previous request).
template <class Clock>
class request_stream {
 public:
  using executor_type = boost::asio::ip::tcp::socket::executor_type;

  request_stream(boost::asio::ip::tcp::socket& socket, session_entry& entry, const Clock& clock,
                 duration header_timeout) noexcept
      : socket_(&socket), entry_(&entry), clock_(&clock), header_timeout_(header_timeout) {}

  executor_type get_executor() const noexcept { return socket_->get_executor(); }

  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    if (reads_++ > 0 && entry_->idle && !entry_->timed_out) {
      entry_->idle = false;
      entry_->deadline = saturating_add(clock_->now(), header_timeout_);
    }
    return socket_->async_read_some(buffers, std::forward<Token>(token));
  }

 private:
  boost::asio::ip::tcp::socket* socket_;
  session_entry* entry_;
  const Clock* clock_;
  duration header_timeout_;
  unsigned reads_ = 0;
};

// How late a connection bound may be cut: never early, and at most this late
// (see server::sweep()). A tenth of the smallest bound keeps it small beside
// every bound, 100 ms at most beside the defaults (10 s and more); for
// connection bounds the sweep wakes at most once per granularity, however
// many connections stall.
inline duration sweep_granularity(duration smallest_bound) noexcept {
  return std::clamp<duration>(smallest_bound / 10, std::chrono::milliseconds(1), std::chrono::milliseconds(100));
}

}  // namespace resilience::http::detail
