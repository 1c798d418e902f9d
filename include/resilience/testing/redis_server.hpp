// resilience/testing/redis_server.hpp — a throwaway redis-server for tests and demos.
//
//   resilience::testing::redis_server redis;           // started, ready to accept
//   resilience::redis::fleet_limiter limiter{io.get_executor(), redis.connection(), options};
//   ...
//   redis.kill();                                      // as a crash: no goodbye to clients
//   redis.start();                                     // empty again (nothing is persisted)
//
// A child process running `redis-server` (found on PATH) on a Unix socket in
// a temporary directory of its own, with no persistence and no TCP port. It
// is ready when its constructor or start() returns: the server says so
// itself (`--supervised systemd`, READY=1 on a notification socket), so
// nothing polls or sleeps. That needs a redis-server built with systemd
// support, as Debian's is. Part of resilience::redis.
//
// Errors: the constructor and start() throw std::runtime_error saying why
// (redis-server not installed, exited at once, or not ready within 10 s; the
// server's log is named).
//
// Lifetimes: the server is killed with the object, and with the thread that
// started it if that thread dies first (PR_SET_PDEATHSIG), so a test or demo
// killed midway leaves no server behind. It runs in a process group of its
// own: Ctrl-C reaches the program, which stops the server itself.
//
// Threads: start() may run while other threads do (everything the child
// needs is made before fork()). One object is used from one thread.
#pragma once

#include <resilience/redis/connection.hpp>

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace resilience::testing {

class redis_server {
 public:
  // `extra_args` go on redis-server's command line after ours, e.g.
  // {"--requirepass", "secret"} or {"--enable-debug-command", "local"}.
  explicit redis_server(std::vector<std::string> extra_args = {});
  ~redis_server();
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  // Starts it again after kill(), or after it died on its own. Nothing if it
  // runs. Throws std::runtime_error.
  void start();
  // SIGKILL, as a crash. Nothing if it is not running.
  void kill() noexcept;
  // SIGSTOP and SIGCONT: a server that accepts nothing and answers nothing.
  void pause() noexcept;
  void resume() noexcept;

  // Started and not killed (it may have died on its own since).
  bool running() const noexcept { return pid_ > 0; }
  const std::string& socket() const noexcept { return socket_; }
  std::string log_file() const;
  // Options reaching it (add a password with .password() if extra_args set one).
  redis::connection_options connection() const;

 private:
  std::vector<std::string> extra_args_;
  std::filesystem::path dir_;
  std::string socket_;
  std::string binary_;
  pid_t pid_ = -1;
};

}  // namespace resilience::testing
