#include <resilience/testing/redis_server.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace resilience::testing {
namespace {

std::string find_in_path(const char* name) {
  const char* path = std::getenv("PATH");
  std::string_view rest = path ? path : "/usr/local/bin:/usr/bin:/bin";
  while (!rest.empty()) {
    const auto colon = rest.find(':');
    const std::string dir(rest.substr(0, colon));
    rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

// A descriptor closed on every path.
struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

// The datagram socket redis-server reports READY=1 on (the sd_notify
// protocol). Its path must fit sun_path, as the server's own socket must.
int bind_notify_socket(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) throw std::runtime_error("redis_server: socket path too long: " + path);
  path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "redis_server: socket");
  ::unlink(path.c_str());
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::system_error(e, std::generic_category(), "redis_server: bind " + path);
  }
  return fd;
}

}  // namespace

redis_server::redis_server(std::vector<std::string> extra_args) : extra_args_(std::move(extra_args)) {
  binary_ = find_in_path("redis-server");
  if (binary_.empty())
    throw std::runtime_error("redis_server: redis-server not found on PATH (Debian: apt-get install redis-server)");
  char tmpl[] = "/tmp/resilience-redis-XXXXXX";
  const char* made = ::mkdtemp(tmpl);
  if (!made) throw std::system_error(errno, std::generic_category(), "redis_server: mkdtemp");
  dir_ = made;
  socket_ = (dir_ / "redis.sock").string();
  try {
    start();
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
}

redis_server::~redis_server() {
  kill();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string redis_server::log_file() const { return (dir_ / "redis.log").string(); }

redis::connection_options redis_server::connection() const { return redis::connection_options{}.unix_socket(socket_); }

void redis_server::start() {
  if (running()) {
    if (::waitpid(pid_, nullptr, WNOHANG) != pid_) return;  // still up
    pid_ = -1;  // it died on its own: start it again
  }
  const std::string notify_path = (dir_ / "notify.sock").string();
  fd_guard notify{bind_notify_socket(notify_path)};

  // Everything the child needs is made before fork(): other threads may
  // run, so the child makes only async-signal-safe calls until exec. Its
  // stderr goes to its log: a bad argument is reported there, before the
  // server opens the log itself.
  const std::string log = log_file();
  std::vector<std::string> args{binary_, "--port", "0", "--unixsocket", socket_, "--unixsocketperm", "700",
                                "--save", "", "--appendonly", "no", "--dir", dir_.string(),
                                "--logfile", log, "--supervised", "systemd"};
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string notify_env = "NOTIFY_SOCKET=" + notify_path;
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "NOTIFY_SOCKET=", 14) != 0) envp.push_back(*e);
  envp.push_back(notify_env.data());
  envp.push_back(nullptr);

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "redis_server: fork");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);  // the parent died before prctl
    ::setpgid(0, 0);
    const int null = ::open("/dev/null", O_RDWR);
    const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ::dup2(null, 0);
    ::dup2(log_fd >= 0 ? log_fd : null, 1);
    ::dup2(log_fd >= 0 ? log_fd : null, 2);
    ::close_range(3, ~0u, 0);  // none of the program's descriptors in the server
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);  // not the starting thread's blocked signals
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  pid_ = pid;

  // Ready when it says so; failed when it exits first (its pidfd becomes
  // readable; without pidfd_open, a reap between slices of the wait) or
  // says nothing within 10 s (a redis-server built without systemd support
  // never does: Debian's is built with it).
  fd_guard exited{static_cast<int>(::syscall(SYS_pidfd_open, pid, 0))};
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  const auto fail = [&](const std::string& why) {
    kill();
    ::unlink(notify_path.c_str());
    throw std::runtime_error("redis_server: redis-server " + why + "; see " + log_file());
  };
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now());
    if (left.count() <= 0) fail("was not ready within 10 s");
    pollfd fds[2] = {{notify.fd, POLLIN, 0}, {exited.fd, POLLIN, 0}};
    const int slice = exited.fd >= 0 ? static_cast<int>(left.count()) : std::min<int>(100, static_cast<int>(left.count()));
    const int n = ::poll(fds, exited.fd >= 0 ? 2 : 1, slice);
    if (n < 0 && errno != EINTR) fail("could not be waited for");
    if (exited.fd < 0 && n == 0 && ::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      fail("exited at once");
    }
    if (fds[0].revents & POLLIN) {
      char message[512];
      const auto got = ::recv(notify.fd, message, sizeof message - 1, 0);
      if (got > 0) {
        // One datagram may carry several lines (READY=1\nSTATUS=...).
        const std::string_view text(message, static_cast<std::size_t>(got));
        if (text.starts_with("READY=1") || text.find("\nREADY=1") != std::string_view::npos) break;
      }
    } else if (exited.fd >= 0 && (fds[1].revents & POLLIN)) {
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
      fail("exited at once");
    }
  }
  ::unlink(notify_path.c_str());
}

void redis_server::kill() noexcept {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGCONT);  // a paused server dies as promptly
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
  ::unlink(socket_.c_str());
}

void redis_server::pause() noexcept {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void redis_server::resume() noexcept {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

}  // namespace resilience::testing
