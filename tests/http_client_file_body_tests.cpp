// The HTTP client with a request body other than the common ones
// (client_calls.cpp compiles the calls for empty_body and string_body once):
// a file_body, whose calls this file instantiates, as a user's file would
// (about 500 MB and 20 s of compile at -O2, hence a file of its own).
#include "http_client_support.hpp"

BOOST_AUTO_TEST_SUITE(http_client_file_body)

BOOST_AUTO_TEST_CASE(a_retried_file_body_is_sent_whole_again) {
  asio::io_context io;
  manual_clock clock;
  server srv(io);
  srv.script = [](int n) { return n == 1 ? step{step::respond, 503} : step{}; };
  const std::string path = "http_client_tests_file_body.txt";
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << "the file's contents";
  }
  bhttp::request<bhttp::file_body> put{bhttp::verb::put, "/upload", 11};
  beast::error_code ec;
  put.body().open(path.c_str(), beast::file_mode::scan, ec);
  BOOST_REQUIRE(!ec);
  put.prepare_payload();
  client_t c(quick(), clock);
  completion<result_t> done;
  spawn(io, call(c, srv.at(), std::move(put)), done);
  BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
  BOOST_TEST(status_of(done) == 200u);
  BOOST_REQUIRE(srv.seen.size() == 2u);
  BOOST_TEST(srv.seen[0].body() == "the file's contents");
  BOOST_TEST(srv.seen[1].body() == "the file's contents");
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_SUITE_END()
