// libFuzzer target: an arbitrary byte stream parsed as an HTTP/1 response by
// Beast, then judged by the classifier, the breaker classifier and the
// Retry-After delay generator. Nothing may crash, and the verdicts must agree
// with the status.
#include <resilience/http/http.hpp>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace bhttp = boost::beast::http;
namespace rhttp = resilience::http;
using response = bhttp::response<bhttp::string_body>;

namespace {
rhttp::wall_time fixed_now() noexcept {
  return std::chrono::sys_days{std::chrono::year{2026} / 11 / 23} + std::chrono::hours{12};
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  bhttp::response_parser<bhttp::string_body> parser;
  parser.eager(true);
  parser.body_limit(4096);
  boost::system::error_code ec;
  parser.put(boost::asio::buffer(data, size), ec);
  if (!ec && !parser.is_done()) parser.put_eof(ec);

  static const rhttp::classifier retry_if{};
  static const rhttp::breaker_classifier counts{};
  static const auto delay = rhttp::retry_after_delay{}.max_retry_after(std::chrono::seconds(30)).wall_clock(&fixed_now);

  resilience::properties props;
  props.set(rhttp::idempotent, true);
  const resilience::context ctx = resilience::context{}.with(props);

  if (ec) {
    // What the exchange would have thrown.
    const auto o = resilience::outcome<response>::from_error(ec);
    (void)retry_if(o, ctx);
    if (counts(o) != !o.cancelled()) std::abort();
    if (delay(o, ctx).decision() != resilience::retry_delay::kind::backoff) std::abort();
    return 0;
  }
  if (!parser.is_header_done()) return 0;
  const auto o = resilience::outcome<response>::from_value(parser.release());
  const unsigned status = o.value().result_int();
  const bool transient = retry_if(o, ctx);
  if (transient != retry_if.retryable_status(status)) std::abort();
  if (status < 400 && transient) std::abort();
  if (counts(o) != (status >= 500 && status <= 599)) std::abort();
  // By default a Retry-After is waited with the backoff on top; one past the
  // maximum ends the call (stop), never cut short.
  const auto d = delay(o, ctx);
  if (d.decision() == resilience::retry_delay::kind::after_then_backoff) {
    if (status != 429 && status != 503) std::abort();
    if (d.given() < resilience::duration::zero() || d.given() > std::chrono::seconds(30)) std::abort();
  } else if (d.decision() == resilience::retry_delay::kind::stop) {
    if (status != 429 && status != 503) std::abort();
    const auto asked = delay.requested(o.value());
    if (!asked || *asked <= std::chrono::seconds(30)) std::abort();
  } else if (d.decision() != resilience::retry_delay::kind::backoff) {
    std::abort();
  }
  return 0;
}
