// file_watch: inotify through Asio's posix::stream_descriptor, SIGHUP
// through a signal_set, both on one strand.
#include <resilience/config_watch.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include <sys/inotify.h>
#include <unistd.h>

namespace resilience::config {
namespace asio = boost::asio;

std::string read_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw error(path, 0, 0, std::string("cannot be read: ") + std::strerror(errno));
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

struct file_watch::state : std::enable_shared_from_this<state> {
  state(asio::any_io_executor ex, live_config& l, std::string p)
      : strand(asio::make_strand(std::move(ex))), live(&l), path(std::move(p)), descriptor(strand), signals(strand) {
    const std::size_t slash = path.rfind('/');
    directory = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    name = slash == std::string::npos ? path : path.substr(slash + 1);
  }

  asio::strand<asio::any_io_executor> strand;
  std::mutex guard;    // held while a reload runs and while stopping
  live_config* live;   // null once stopped
  std::string path, directory, name, last_text;
  asio::posix::stream_descriptor descriptor;
  asio::signal_set signals;
  alignas(inotify_event) std::array<char, 4096> events;

  void start(watch_on on) {
    {
      const std::lock_guard lock(guard);
      try {
        last_text = read_file(path);
      } catch (const error&) {
      }
    }
    if (on.file_changes) {
      const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
      if (fd < 0) throw std::system_error(errno, std::generic_category(), "config::file_watch: inotify_init1");
      descriptor.assign(fd);
      if (::inotify_add_watch(fd, directory.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE) < 0)
        throw std::system_error(errno, std::generic_category(), "config::file_watch: watching " + directory);
      read_events();
    }
    if (on.sighup) {
      signals.add(SIGHUP);
      wait_signal();
    }
  }

  void read_events() {
    descriptor.async_read_some(asio::buffer(events), [self = shared_from_this()](boost::system::error_code ec,
                                                                                 std::size_t n) {
      if (ec) return;  // stopped
      bool ours = false;
      for (std::size_t at = 0; at + sizeof(inotify_event) <= n;) {
        inotify_event e;
        std::memcpy(&e, self->events.data() + at, sizeof e);
        const char* file = self->events.data() + at + sizeof(inotify_event);
        if (e.len && self->name == std::string_view(file, ::strnlen(file, e.len))) ours = true;
        at += sizeof(inotify_event) + e.len;
      }
      if (ours) self->reload();
      self->read_events();
    });
  }

  void wait_signal() {
    signals.async_wait([self = shared_from_this()](boost::system::error_code ec, int) {
      if (ec) return;
      self->reload();
      self->wait_signal();
    });
  }

  void reload() {
    const std::lock_guard lock(guard);
    if (!live) return;
    std::string text;
    try {
      text = read_file(path);
    } catch (const error& e) {
      live->refuse(path, e.what());
      return;
    }
    if (text == last_text) return;
    last_text = text;
    live->reload(text, path);
  }

  void stop() noexcept {
    {
      const std::lock_guard lock(guard);
      live = nullptr;
    }
    asio::post(strand, [self = shared_from_this()] {
      boost::system::error_code ignored;
      self->descriptor.close(ignored);
      self->signals.cancel(ignored);
    });
  }
};

file_watch::file_watch(asio::any_io_executor ex, live_config& live, std::string path, watch_on on)
    : state_(std::make_shared<state>(std::move(ex), live, std::move(path))) {
  state_->start(on);
}

file_watch::~file_watch() { stop(); }

void file_watch::stop() noexcept {
  if (state_) state_->stop();
  state_.reset();
}

}  // namespace resilience::config
