// Not public API; http::client uses it.
#pragma once

#include <resilience/event.hpp>

#include <string_view>

namespace resilience::http::detail {

// A call's events with its endpoint key filled in, passed on to the sink the
// call reports to. It lives in the call's frame, and is used only when there
// is a sink.
class host_tagged_events final : public event_sink {
 public:
  host_tagged_events(event_sink* next, std::string_view host) noexcept : next_(next), host_(host) {}
  // The sink it passes on to, if any.
  event_sink* target() const noexcept { return next_; }
  // Another host from now on (an upstream call's next replica); it must
  // outlive the events reported under it.
  void retag(std::string_view host) noexcept { host_ = host; }
  void on_event(const event& e) noexcept override {
    event tagged = e;
    if (tagged.host.empty()) tagged.host = host_;
    next_->on_event(tagged);
  }

 private:
  event_sink* next_;
  std::string_view host_;
};

}  // namespace resilience::http::detail
