// A redis-server of the test's own: a child process listening on a Unix
// socket in a temporary directory (and on a TCP port when asked), stopped,
// paused and restarted at the test's command.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

namespace resilience::test {

class redis_server {
 public:
  explicit redis_server(std::vector<std::string> extra = {}) : extra_(std::move(extra)) {
    char tmpl[] = "/tmp/resilience-redis-XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    BOOST_TEST_REQUIRE(made != nullptr);
    dir_ = made;
    socket_ = (dir_ / "redis.sock").string();
    start();
  }
  ~redis_server() {
    kill();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  const std::string& socket() const noexcept { return socket_; }

  void start() {
    std::vector<std::string> args{"redis-server", "--port", "0", "--unixsocket", socket_, "--unixsocketperm", "700",
                                  "--save", "", "--appendonly", "no", "--dir", dir_.string(),
                                  "--enable-debug-command", "local", "--logfile", (dir_ / "redis.log").string()};
    args.insert(args.end(), extra_.begin(), extra_.end());
    pid_ = ::fork();
    BOOST_TEST_REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test killed midway leaves no server behind
      const int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, 1);
      ::dup2(null, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp("redis-server", argv.data());
      ::_exit(127);  // not installed: the readiness check below fails with a clear message
    }
    // Ready when its socket accepts (polling readiness, not timing anything).
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!accepts()) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        BOOST_FAIL("redis-server did not start (is it installed? scripts/bootstrap installs it); see " +
                   (dir_ / "redis.log").string());
      }
      BOOST_TEST_REQUIRE((std::chrono::steady_clock::now() < give_up), "redis-server did not listen within 10 s");
      ::usleep(5000);
    }
  }
  // SIGKILL: no goodbye to the clients, as a crash.
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    ::unlink(socket_.c_str());
  }
  void pause() { ::kill(pid_, SIGSTOP); }
  void resume() { ::kill(pid_, SIGCONT); }

 private:
  bool accepts() const {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    socket_.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return ok;
  }

  std::vector<std::string> extra_;
  std::filesystem::path dir_;
  std::string socket_;
  pid_t pid_ = -1;
};

// Runs `io` until `done()` holds; fails the test after 10 s of real time
// (Redis answers in microseconds: the bound only keeps a broken test from
// hanging).
inline void run_until(boost::asio::io_context& io, const std::function<bool()>& done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    BOOST_TEST_REQUIRE((std::chrono::steady_clock::now() < give_up), "not done within 10 s");
    io.restart();
    io.run_one_for(std::chrono::milliseconds(10));
  }
}

}  // namespace resilience::test
