// Test helpers for the tests of resilience/http/: HTTP messages (kept out of
// support.hpp, so that the other tests need not parse Beast).
#pragma once

#include "support.hpp"

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

namespace resilience::test {

using response = boost::beast::http::response<boost::beast::http::string_body>;

// A response of `status`, with a Retry-After if one is given.
inline response make(unsigned status, std::string retry_after = {}) {
  response r{static_cast<boost::beast::http::status>(status), 11};
  if (!retry_after.empty()) r.set(boost::beast::http::field::retry_after, retry_after);
  return r;
}

}  // namespace resilience::test
