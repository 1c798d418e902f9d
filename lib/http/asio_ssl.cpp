// Asio's TLS layer, compiled once (RESILIENCE_ASIO_SEPARATE_COMPILATION): in
// the HTTP library, beside the code that uses it, so that the core needs no
// OpenSSL. Its non-TLS code is in the core (lib/asio.cpp).
#include <boost/asio/ssl/impl/src.hpp>
