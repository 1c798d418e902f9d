// The HTTP classifiers: which statuses and errors are worth retrying, and
// which count as failures for a breaker; a request that may have been sent
// is retried only if it is idempotent.
#include "support_http.hpp"

#include <resilience/error.hpp>
#include <resilience/http/classifier.hpp>

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>

#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace rhttp = resilience::http;
using boost::system::error_code;
using resilience::context;
using resilience::outcome;
using resilience::test::make;
using resilience::test::response;

BOOST_AUTO_TEST_SUITE(http_classification)

namespace {
const rhttp::classifier retry_if{};

// TLS errors are recognised by their category's name, so that the classifier
// needs no OpenSSL headers; these tests need none either. Asio's categories
// are named "asio.ssl" (OpenSSL's codes) and "asio.ssl.stream" (its own).
struct named_category : boost::system::error_category {
  const char* n;
  explicit named_category(const char* name) : n(name) {}
  const char* name() const noexcept override { return n; }
  std::string message(int) const override { return n; }
};
const named_category ssl_category{"asio.ssl"};
const named_category ssl_stream_category{"asio.ssl.stream"};
const rhttp::breaker_classifier breaker_counts{};

bool transient(unsigned status) { return retry_if(outcome<response>::from_value(make(status))); }
bool transient(const error_code& ec) { return retry_if(outcome<error_code>::from_value(ec)); }
bool counts(unsigned status) { return breaker_counts(outcome<response>::from_value(make(status))); }
bool counts(const error_code& ec) { return breaker_counts(outcome<error_code>::from_value(ec)); }
}  // namespace

BOOST_AUTO_TEST_CASE(statuses) {
  for (const unsigned s : {408u, 429u, 500u, 502u, 503u, 504u}) BOOST_TEST_CONTEXT(s) { BOOST_TEST(transient(s)); }
  for (const unsigned s : {200u, 201u, 204u, 301u, 304u, 400u, 401u, 403u, 404u, 409u, 413u, 422u, 501u, 505u, 599u})
    BOOST_TEST_CONTEXT(s) { BOOST_TEST(!transient(s)); }
}

BOOST_AUTO_TEST_CASE(the_set_of_retryable_statuses_is_an_option_and_validated) {
  const rhttp::classifier only_503{503};
  BOOST_TEST(only_503(outcome<response>::from_value(make(503))));
  BOOST_TEST(!only_503(outcome<response>::from_value(make(502))));
  const rhttp::classifier none{};
  BOOST_TEST(none.retryable_status(503));
  const rhttp::classifier empty(std::initializer_list<unsigned>{});
  BOOST_TEST(!empty.retryable_status(503));
  BOOST_TEST(empty(outcome<error_code>::from_value(asio::error::connection_refused)));
  BOOST_CHECK_THROW(rhttp::classifier({200}), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::classifier({302}), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::classifier({600}), std::invalid_argument);
  BOOST_CHECK_THROW(rhttp::classifier({0}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(network_errors) {
  for (const error_code ec : {error_code(asio::error::connection_refused), error_code(asio::error::connection_reset),
                              error_code(asio::error::connection_aborted), error_code(asio::error::broken_pipe),
                              error_code(asio::error::timed_out), error_code(resilience::error::timeout),
                              error_code(beast::error::timeout), error_code(bhttp::error::end_of_stream),
                              error_code(asio::error::eof), error_code(asio::error::host_not_found_try_again),
                              error_code(bhttp::error::partial_message),  // the stream ended mid-response
                              error_code(1, ssl_stream_category)}) {      // stream_truncated: no close_notify
    BOOST_TEST_CONTEXT(ec.message()) {
      BOOST_TEST(transient(ec));
      BOOST_TEST(counts(ec));
    }
  }
}

BOOST_AUTO_TEST_CASE(tls_and_parse_errors_are_permanent) {
  for (const error_code ec :
       {error_code(2, ssl_stream_category),            // unspecified_system_error
        error_code(336151570, ssl_category),           // an OpenSSL handshake error
        error_code(bhttp::error::bad_version), error_code(bhttp::error::bad_status),
        error_code(bhttp::error::body_limit),
        error_code(asio::error::host_not_found), error_code(asio::error::access_denied),
        error_code(resilience::error::circuit_open)}) {
    BOOST_TEST_CONTEXT(ec.category().name() << ": " << ec.message()) { BOOST_TEST(!transient(ec)); }
  }
}

BOOST_AUTO_TEST_CASE(cancellation_is_never_transient_nor_a_breaker_failure) {
  for (const error_code ec : {error_code(asio::error::operation_aborted),
                              error_code(boost::system::errc::make_error_code(boost::system::errc::operation_canceled))}) {
    BOOST_TEST(!transient(ec));
    BOOST_TEST(!counts(ec));
    BOOST_TEST(!retry_if(outcome<error_code>::from_value(ec), context{}));
  }
}

BOOST_AUTO_TEST_CASE(outcomes_of_every_shape) {
  // A thrown system_error is judged by its code; another exception is permanent.
  const auto thrown = outcome<response>::from_error(asio::error::connection_reset);
  BOOST_TEST(retry_if(thrown));
  try {
    throw std::runtime_error("boom");
  } catch (...) {
    BOOST_TEST(!retry_if(outcome<response>::from_current_exception()));
  }
  // boost::system::result<response> and as_tuple's (error_code, response).
  using result = boost::system::result<response>;
  BOOST_TEST(retry_if(outcome<result>::from_value(result(make(503)))));
  BOOST_TEST(!retry_if(outcome<result>::from_value(result(make(404)))));
  BOOST_TEST(retry_if(outcome<result>::from_value(result(error_code(asio::error::eof)))));
  using tuple = std::tuple<error_code, response>;
  BOOST_TEST(retry_if(outcome<tuple>::from_value(tuple{error_code{}, make(504)})));
  BOOST_TEST(!retry_if(outcome<tuple>::from_value(tuple{error_code{}, make(200)})));
  BOOST_TEST(retry_if(outcome<tuple>::from_value(tuple{asio::error::connection_reset, make(200)})));
}

BOOST_AUTO_TEST_CASE(the_breaker_counts_5xx_and_errors_not_4xx) {
  for (const unsigned s : {500u, 501u, 502u, 503u, 504u, 599u}) BOOST_TEST_CONTEXT(s) { BOOST_TEST(counts(s)); }
  for (const unsigned s : {200u, 302u, 400u, 404u, 408u, 429u}) BOOST_TEST_CONTEXT(s) { BOOST_TEST(!counts(s)); }
  BOOST_TEST(counts(bhttp::error::bad_version));
  BOOST_TEST(counts(error_code(1, ssl_stream_category)));
}

BOOST_AUTO_TEST_CASE(idempotent_methods) {
  for (const auto v : {bhttp::verb::get, bhttp::verb::head, bhttp::verb::options, bhttp::verb::put,
                       bhttp::verb::delete_, bhttp::verb::trace})
    BOOST_TEST(rhttp::is_idempotent(bhttp::request<bhttp::empty_body>{v, "/", 11}));
  for (const auto v : {bhttp::verb::post, bhttp::verb::patch, bhttp::verb::connect})
    BOOST_TEST(!rhttp::is_idempotent(bhttp::request<bhttp::empty_body>{v, "/", 11}));
  bhttp::request<bhttp::string_body> keyed{bhttp::verb::post, "/orders", 11};
  keyed.set("Idempotency-Key", "8e03978e-40d5-43e8-bc93-6894a57f9324");
  BOOST_TEST(rhttp::is_idempotent(keyed));
  keyed.erase("Idempotency-Key");
  keyed.set("idempotency-key", "abc");  // field names are case-insensitive
  BOOST_TEST(rhttp::is_idempotent(keyed));
}

BOOST_AUTO_TEST_CASE(idempotency_rules) {
  const auto reset = outcome<response>::from_error(asio::error::connection_reset);
  const auto refused = outcome<response>::from_error(asio::error::connection_refused);
  const auto unavailable = outcome<response>::from_value(make(503));

  const auto decide = [&](const outcome<response>& o, std::optional<bool> idempotent, std::optional<bool> sent) {
    resilience::properties props;
    if (idempotent) props.set(rhttp::idempotent, *idempotent);
    if (sent) props.set(rhttp::request_may_have_been_sent, *sent);
    return retry_if(o, context{}.with(props));
  };
  // GET: retried after it may have been sent, and on a 503.
  BOOST_TEST(decide(reset, true, true));
  BOOST_TEST(decide(unavailable, true, true));
  BOOST_TEST(decide(unavailable, true, std::nullopt));
  // POST: not once it may have been sent...
  BOOST_TEST(!decide(reset, false, true));
  BOOST_TEST(!decide(reset, std::nullopt, true));
  // ...and a response proves it was sent, whatever the op said.
  BOOST_TEST(!decide(unavailable, false, false));
  BOOST_TEST(!decide(unavailable, std::nullopt, std::nullopt));
  // POST certainly not sent: retried.
  BOOST_TEST(decide(refused, false, false));
  BOOST_TEST(decide(refused, std::nullopt, std::nullopt));
  BOOST_TEST(retry_if(refused, context{}));  // no properties attached at all
  // With none attached, the outcome alone decides: a 503 is retried.
  BOOST_TEST(retry_if(unavailable, context{}));
  // POST with an Idempotency-Key: idempotent, retried.
  bhttp::request<bhttp::string_body> post{bhttp::verb::post, "/orders", 11};
  post.set("Idempotency-Key", "k-1");
  BOOST_TEST(decide(reset, rhttp::is_idempotent(post), true));
  // Permanent stays permanent, idempotent or not.
  BOOST_TEST(!decide(outcome<response>::from_value(make(404)), true, true));
}

BOOST_AUTO_TEST_SUITE_END()
