// The HTTP client over TLS: certificates made for the test, trusted or not
// (or not verified: verify_peer(false)), and a server that hangs or drops
// mid-handshake. The same scripted servers
// and manual clock as http_client_tests.cpp.
#include "http_client_support.hpp"

namespace {

// A key and a self-signed certificate for localhost and 127.0.0.1, made now.
struct test_certificate {
  std::string cert_pem;
  std::string key_pem;
};

std::string pem_of(int (*write)(BIO*, const void*), const void* what) {
  BIO* bio = BIO_new(BIO_s_mem());
  write(bio, what);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string s(data, static_cast<std::size_t>(n));
  BIO_free(bio);
  return s;
}

test_certificate make_certificate(const char* names = "DNS:localhost,IP:127.0.0.1") {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  BOOST_REQUIRE(key);
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, cert, cert, nullptr, nullptr, 0);
  for (const auto& [nid, value] : {std::pair{NID_subject_alt_name, names},
                                   std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, nid, value);
    BOOST_REQUIRE(ext);
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
  }
  BOOST_REQUIRE(X509_sign(cert, key, EVP_sha256()) > 0);
  test_certificate out;
  out.cert_pem = pem_of([](BIO* b, const void* c) { return PEM_write_bio_X509(b, static_cast<X509*>(const_cast<void*>(c))); }, cert);
  out.key_pem = pem_of(
      [](BIO* b, const void* k) {
        return PEM_write_bio_PrivateKey(b, static_cast<EVP_PKEY*>(const_cast<void*>(k)), nullptr, nullptr, 0, nullptr,
                                        nullptr);
      },
      key);
  X509_free(cert);
  EVP_PKEY_free(key);
  return out;
}

struct tls_server_context {
  asio::ssl::context ctx{asio::ssl::context::tls_server};
  explicit tls_server_context(const test_certificate& c) {
    ctx.use_certificate_chain(asio::buffer(c.cert_pem));
    ctx.use_private_key(asio::buffer(c.key_pem), asio::ssl::context::pem);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(http_client_tls)

BOOST_AUTO_TEST_CASE(a_trusted_certificate_is_accepted_and_its_connection_reused) {
  const auto cert = make_certificate();
  tls_server_context server_tls(cert);
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.tls = &server_tls.ctx;
  auto trust = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  trust->add_certificate_authority(asio::buffer(cert.cert_pem));
  client_t c(quick().pool(rhttp::connection_pool_options{}.tls_context(trust)), clock);
  const auto to = rhttp::endpoint::https("127.0.0.1", srv.port());
  for (int i = 0; i < 2; ++i) {
    completion<result_t> done;
    spawn(io, call(c, to, get()), done);
    BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
    BOOST_TEST(status_of(done) == 200u);
  }
  BOOST_TEST(srv.accepted == 1);
  BOOST_TEST(srv.requests == 2);
  BOOST_TEST(srv.handshake_failures == 0);
}

// The attempt's time ends a wait for a TLS server that never answers: the
// socket under the TLS stream is closed, and the next call opens another.
BOOST_AUTO_TEST_CASE(times_out_a_hung_tls_server_and_never_reuses_that_connection) {
  const auto cert = make_certificate();
  tls_server_context server_tls(cert);
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.tls = &server_tls.ctx;
  srv.script = [](int n) { return n == 1 ? step{step::hang} : step{}; };
  auto trust = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  trust->add_certificate_authority(asio::buffer(cert.cert_pem));
  client_t c(quick().max_retries(0).attempt_timeout(2s).pool(rhttp::connection_pool_options{}.tls_context(trust)),
             clock);
  const auto to = rhttp::endpoint::https("127.0.0.1", srv.port());
  completion<result_t> done;
  spawn(io, call(c, to, get()), done);
  BOOST_REQUIRE(run_until(io, [&] { return srv.requests == 1 && clock.pending() == 1; }));
  clock.advance(2s - 1ms);
  run_ready(io);
  BOOST_TEST(!done.done());
  BOOST_TEST(clock.pending() == 1u);
  clock.advance(1ms);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST((error_of(done) == resilience::error::timeout));
  BOOST_TEST(c.pool().open_connections(to) == 0u);

  completion<result_t> next;
  spawn(io, call(c, to, get()), next);
  BOOST_REQUIRE(run_until(io, [&] { return next.done(); }));
  BOOST_TEST(status_of(next) == 200u);
  BOOST_TEST(srv.accepted == 2);
}

BOOST_AUTO_TEST_CASE(a_get_dropped_without_close_notify_is_retried_a_post_is_not) {
  const auto cert = make_certificate();
  tls_server_context server_tls(cert);
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.tls = &server_tls.ctx;
  srv.script = [](int n) { return n == 1 || n == 3 ? step{step::drop} : step{}; };
  auto trust = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  trust->add_certificate_authority(asio::buffer(cert.cert_pem));
  std::vector<error_code> retried;
  client_t c(quick()
                 .pool(rhttp::connection_pool_options{}.tls_context(trust))
                 .on_retry([&](const rhttp::client_retry_event& e) { retried.push_back(e.error); }),
             clock);
  const auto to = rhttp::endpoint::https("127.0.0.1", srv.port());
  completion<result_t> got;
  spawn(io, call(c, to, get()), got);
  BOOST_REQUIRE(run_until(io, [&] { return got.done(); }));
  BOOST_TEST(status_of(got) == 200u);
  BOOST_TEST(srv.requests == 2);
  BOOST_REQUIRE(retried.size() == 1u);
  BOOST_TEST(std::string(retried[0].category().name()) == "asio.ssl.stream");  // stream_truncated
  // The same end of stream after a POST without a key: it may have been acted on.
  completion<result_t> posted;
  spawn(io, call(c, to, post("order")), posted);
  BOOST_REQUIRE(run_until(io, [&] { return posted.done(); }));
  BOOST_TEST(std::string(error_of(posted).category().name()) == "asio.ssl.stream");
  BOOST_TEST(srv.requests == 3);
  BOOST_TEST(retried.size() == 1u);
}

BOOST_AUTO_TEST_CASE(an_untrusted_certificate_is_refused_and_not_retried) {
  const auto cert = make_certificate();
  tls_server_context server_tls(cert);
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.tls = &server_tls.ctx;
  auto empty_trust = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);  // trusts nothing
  client_t c(quick().pool(rhttp::connection_pool_options{}.tls_context(empty_trust)), clock);
  completion<result_t> done;
  spawn(io, call(c, rhttp::endpoint::https("127.0.0.1", srv.port()), get()), done);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  const error_code ec = error_of(done);
  BOOST_TEST(std::string(ec.category().name()).rfind("asio.ssl", 0) == 0);
  BOOST_TEST(srv.accepted == 1);  // not retried
  BOOST_TEST(srv.requests == 0);

}

BOOST_AUTO_TEST_CASE(cancelled_during_the_handshake_ends_aborted_and_gives_the_place_back) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.silent = true;  // the handshake never gets an answer
  client_t c(quick(), clock);
  const auto to = rhttp::endpoint::https("127.0.0.1", srv.port());
  completion<result_t> done;
  asio::cancellation_signal cancel;
  spawn(io, call(c, to, get()), done, &cancel);
  BOOST_REQUIRE(run_until(io, [&] { return srv.accepted == 1; }));
  run_ready(io);
  BOOST_TEST(!done.done());
  BOOST_TEST(c.pool().open_connections(to) == 1u);
  cancel.emit(asio::cancellation_type::terminal);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST((error_of(done) == asio::error::operation_aborted));
  BOOST_TEST(c.pool().open_connections(to) == 0u);
}

BOOST_AUTO_TEST_CASE(the_attempt_timeout_ends_a_handshake_and_a_wait_for_a_connection) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.silent = true;
  client_t c(quick().max_retries(0).attempt_timeout(2s).pool(rhttp::connection_pool_options{}.max_connections_per_host(1)),
             clock);
  const auto to = rhttp::endpoint::https("127.0.0.1", srv.port());
  completion<result_t> handshaking, waiting;
  spawn(io, call(c, to, get()), handshaking);
  BOOST_REQUIRE(run_until(io, [&] { return srv.accepted == 1; }));
  spawn(io, call(c, to, get()), waiting);  // no place left: waits in the pool's queue
  // Two attempt timeouts, and the queued caller's wait (due at the end of time).
  BOOST_REQUIRE(run_until(io, [&] { return clock.pending() == 3; }));
  BOOST_TEST(c.pool().open_connections(to) == 1u);
  clock.advance(2s);
  BOOST_REQUIRE(run_until(io, [&] { return handshaking.done() && waiting.done(); }));
  BOOST_TEST((error_of(handshaking) == resilience::error::timeout));  // its time ran out opening a connection
  BOOST_TEST((error_of(waiting) == resilience::error::pool_exhausted));  // still queued for one
  BOOST_TEST(c.pool().open_connections(to) == 0u);
  BOOST_TEST(srv.accepted == 1);
  BOOST_TEST(clock.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(a_trusted_certificate_for_another_host_is_refused) {
  const auto cert = make_certificate("DNS:other.example");
  tls_server_context server_tls(cert);
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.tls = &server_tls.ctx;
  auto trust = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  trust->add_certificate_authority(asio::buffer(cert.cert_pem));
  client_t c(quick().pool(rhttp::connection_pool_options{}.tls_context(trust)), clock);
  completion<result_t> done;
  spawn(io, call(c, rhttp::endpoint::https("127.0.0.1", srv.port()), get()), done);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST(std::string(error_of(done).category().name()).rfind("asio.ssl", 0) == 0);
  BOOST_TEST(srv.accepted == 1);
  BOOST_TEST(srv.requests == 0);
}

// verify_peer(false) takes a certificate nothing vouches for (here
// self-signed, for another host, and trusted by no one): a test server's.
BOOST_AUTO_TEST_CASE(verify_peer_false_accepts_a_certificate_no_one_trusts) {
  const auto cert = make_certificate("DNS:other.example");
  tls_server_context server_tls(cert);
  for (const bool verify : {true, false}) {
    asio::io_context io;
    manual_clock clock;
    server srv(io);
    srv.tls = &server_tls.ctx;
    auto no_trust = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
    client_t c(quick().pool(rhttp::connection_pool_options{}.tls_context(no_trust).verify_peer(verify)), clock);
    completion<result_t> done;
    spawn(io, call(c, rhttp::endpoint::https("127.0.0.1", srv.port()), get()), done);
    BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
    if (verify) {
      BOOST_TEST(std::string(error_of(done).category().name()).rfind("asio.ssl", 0) == 0);
      BOOST_TEST(srv.requests == 0);
    } else {
      BOOST_TEST(status_of(done) == 200u);
      BOOST_TEST(srv.requests == 1);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
