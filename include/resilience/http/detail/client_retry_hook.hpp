// The client's retries told to client_options::on_retry. Not public API.
#pragma once

#include <resilience/http/classifier.hpp>
#include <resilience/http/client_options.hpp>
#include <resilience/http/retry_after_delay.hpp>
#include <resilience/retry.hpp>

#include <boost/beast/http/field.hpp>

#include <functional>

namespace resilience::http {

namespace detail {

// Forwards retry events to client_options::on_retry.
struct client_retry_hook {
  const std::function<void(const client_retry_event&)>* report;
  const retry_after_delay* retry_after;

  template <class T>
  void operator()(const retry_event<T>& e) const {
    if (!*report) return;
    unsigned status = 0;
    bool server_delay = false;
    bool malformed = false;
    if constexpr (http::detail::carries_response<T>) {
      if (const auto* r = http::detail::response_of(e.result)) {
        status = r->result_int();
        // Asked again rather than remembered: a retry is off the success
        // path, and the delay generator keeps no state.
        server_delay = retry_after->requested(*r).has_value();
        malformed = !server_delay && (status == 429 || status == 503) &&
                    r->find(boost::beast::http::field::retry_after) != r->end();
      }
    }
    (*report)(client_retry_event{e.attempt, e.delay, e.result.error(), status, server_delay, malformed});
  }
};

}  // namespace detail

}  // namespace resilience::http
