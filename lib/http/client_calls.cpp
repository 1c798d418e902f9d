// The client's common calls, instantiated once (see the end of client.hpp).
#include <resilience/http/client.hpp>

#include <boost/beast/http/empty_body.hpp>

namespace resilience::http {

RESILIENCE_HTTP_CLIENT_COMMON_CALLS(RESILIENCE_HTTP_CLIENT_CALL)

}  // namespace resilience::http
