// resilience/config_watch.hpp — a live_config kept in step with a file: read
// again when it changes on disk (inotify, Linux) or when the process gets
// SIGHUP. Component resilience::config.
//
//   resilience::config::live_config policies{resilience::config::read_file(path), path};
//   resilience::config::file_watch watch{io.get_executor(), policies, path};
//   io.run();  // each change is a reload: accepted, or refused with the running one kept
#pragma once

#include <resilience/config.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

namespace resilience::config {

// A file's text. Throws config::error naming the file and the system's reason.
std::string read_file(const std::string& path);

struct watch_on {
  bool file_changes = true;  // inotify on the file's directory: an editor's write-and-rename counts
  bool sighup = true;        // the operator's `kill -HUP`
};

// Reloads `live` from `path` on each change (a text equal to the last one
// read is not a reload). A file that cannot be read is a refused reload
// (live_config::refuse). Runs on a strand of `ex`; `live` must outlive it.
// Destroying it (or stop()) stops it at once: no reload starts afterwards.
class file_watch {
 public:
  file_watch(boost::asio::any_io_executor ex, live_config& live, std::string path, watch_on on = {});
  ~file_watch();
  file_watch(const file_watch&) = delete;
  file_watch& operator=(const file_watch&) = delete;

  void stop() noexcept;

  struct state;

 private:
  std::shared_ptr<state> state_;
};

}  // namespace resilience::config
