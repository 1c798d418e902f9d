// resilience/redis/connection.hpp — one connection to Redis, driven by Asio.
//
//   resilience::redis::connection redis{io.get_executor(),
//       resilience::redis::connection_options{}.tcp("127.0.0.1", 6379).password("secret")};
//   std::vector<std::string> ping{"PING"};  // not a braced list inside co_await: GCC 12 mishandles it
//   auto [ec, pong] = co_await redis.async_command(std::move(ping), boost::asio::as_tuple(boost::asio::use_awaitable));
//
// hiredis's asynchronous client (Debian's libhiredis 0.14) does the protocol;
// this class maps its read and write hooks onto the connection's executor.
// It connects on the first command and again on the first command after the
// connection is lost (the caller decides when to try again: see
// redis::fleet_limiter, which backs off). AUTH and SELECT are sent on every
// connect. hiredis 0.14 has no TLS: reach a remote Redis over a TLS tunnel
// (stunnel, spiped) or a Unix socket.
//
// Every command completes exactly once, on its handler's executor, with:
//   - the reply (an error reply is a reply: see redis::reply::is_error());
//   - error::timeout if no reply came within command_timeout(), connecting
//     included (the reply, if it comes later, is dropped; the connection is
//     kept);
//   - not_connected when the connection could not be made, eof or
//     connection_reset when it was lost (every command in flight ends with
//     it), permission_denied when AUTH or SELECT was refused;
//   - invalid_argument for a command of no words;
//   - operation_aborted when the caller's cancellation slot fires or the
//     connection is destroyed.
//
// SIGPIPE: hiredis writes with write(2), so the first connection sets
// SIGPIPE to ignored if the program left it at its default (which would end
// the process when Redis goes away mid-write), as most network servers do.
//
// Threads: every hiredis call runs on the executor given at construction; on
// a multi-threaded io_context make it a strand. Commands may be started from
// any thread. Destroy (or close) the connection on that executor's thread,
// or when no thread runs it, and before its io_context.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace resilience::redis {

// A reply, copied out of hiredis's.
struct reply {
  enum class kind : std::uint8_t { string, status, error, integer, array, nil };
  kind type = kind::nil;
  std::string text;  // string, status and error
  long long integer = 0;
  std::vector<reply> elements;  // array

  bool is_error() const noexcept { return type == kind::error; }
};

// connection_options' defaults, in one place.
struct connection_defaults {
  static constexpr std::uint16_t port = 6379;  // on 127.0.0.1
  static constexpr duration connect_timeout = std::chrono::seconds(1);
  static constexpr duration command_timeout = std::chrono::milliseconds(100);
};

class connection_options {
 public:
  // 127.0.0.1 by default. host non-empty, port 1 to 65535. hiredis
  // resolves a host name with a blocking getaddrinfo on each connect: give
  // an address (or a Unix socket) where the executor's thread must not block.
  connection_options tcp(std::string host, std::uint16_t port) const;
  // A Unix socket path instead of TCP (non-empty).
  connection_options unix_socket(std::string path) const;
  // AUTH password, or AUTH username password (Redis 6 ACLs).
  connection_options password(std::string password) const;
  connection_options user(std::string username, std::string password) const;
  connection_options database(int index) const;  // SELECT, 0 (the default) to 15...
  // How long a connect, and then each command, may take: positive.
  connection_options connect_timeout(duration d) const;
  connection_options command_timeout(duration d) const;

  const std::string& host() const noexcept { return host_; }
  std::uint16_t port() const noexcept { return port_; }
  const std::string& socket_path() const noexcept { return socket_path_; }
  const std::string& username() const noexcept { return username_; }
  const std::string& secret() const noexcept { return password_; }
  int database() const noexcept { return database_; }
  duration connect_timeout() const noexcept { return connect_timeout_; }
  duration command_timeout() const noexcept { return command_timeout_; }

 private:
  std::string host_ = "127.0.0.1";
  std::uint16_t port_ = connection_defaults::port;
  std::string socket_path_;
  std::string username_;
  std::string password_;
  int database_ = 0;
  duration connect_timeout_ = connection_defaults::connect_timeout;
  duration command_timeout_ = connection_defaults::command_timeout;
};

namespace detail {
class connection_impl;
// A started command's completion, type-erased once per round trip (not per
// admitted call: the rate limiter leases permits in batches).
using command_handler = std::function<void(error_code, reply)>;
void start_command(const std::shared_ptr<connection_impl>& impl, std::vector<std::string> args,
                   command_handler done, boost::asio::cancellation_slot slot);
}  // namespace detail

class connection {
 public:
  using executor_type = boost::asio::any_io_executor;

  connection(executor_type ex, connection_options options = {});
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // Sends `args` (the command and its arguments) and completes with
  // void(error_code, reply).
  template <class Token>
  auto async_command(std::vector<std::string> args, Token&& token) {
    return boost::asio::async_initiate<Token, void(error_code, reply)>(
        [impl = impl_](auto handler, std::vector<std::string> command) {
          auto slot = boost::asio::get_associated_cancellation_slot(handler);
          auto ex = boost::asio::get_associated_executor(handler, impl_executor(impl));
          // The handler runs on its own executor, never inside hiredis.
          detail::start_command(
              impl, std::move(command),
              [h = std::make_shared<decltype(handler)>(std::move(handler)), ex, slot](error_code ec, reply r) mutable {
                boost::asio::post(ex, [h, slot, ec, r = std::move(r)]() mutable {
                  if (slot.is_connected()) slot.clear();  // on the handler's executor, as Asio asks
                  std::move(*h)(ec, std::move(r));
                });
              },
              slot);
        },
        token, std::move(args));
  }

  // Connected now (a command would not need to connect first).
  bool connected() const noexcept;
  // Drops the connection: commands in flight end with operation_aborted.
  void close();
  executor_type get_executor() const noexcept;
  const connection_options& options() const noexcept { return options_; }

 private:
  static executor_type impl_executor(const std::shared_ptr<detail::connection_impl>& impl) noexcept;
  connection_options options_;
  std::shared_ptr<detail::connection_impl> impl_;
};

}  // namespace resilience::redis
