// The client's common calls on the manual clock (the ones the library
// compiles for the steady clock, lib/http/client.cpp), compiled once for the
// test files that make them (declared extern in http_client_support.hpp).
// A file of its own, outside the unity batches: it compiles beside them.
#include <resilience/http/client.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/string_body.hpp>

#include <functional>

namespace resilience::http {
RESILIENCE_HTTP_CLIENT_COMMON_CALLS_ON(RESILIENCE_HTTP_CLIENT_CALL, testing::manual_clock)
}  // namespace resilience::http
