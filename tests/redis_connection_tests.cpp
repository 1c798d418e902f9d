// resilience/redis/connection.hpp, against a real redis-server started by
// each test.
#include "support_redis.hpp"

#include <resilience/redis/connection.hpp>
#include <resilience/testing/redis_server.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>

namespace asio = boost::asio;
namespace redis = resilience::redis;
using namespace std::chrono_literals;
using resilience::error_code;
using resilience::testing::redis_server;
using resilience::test::command;
using resilience::test::run_until;

BOOST_AUTO_TEST_SUITE(redis_connection)

BOOST_AUTO_TEST_CASE(options_refuse_bad_values_where_they_enter) {
  BOOST_CHECK_THROW(redis::connection_options{}.tcp("", 6379), std::invalid_argument);
  BOOST_CHECK_THROW(redis::connection_options{}.tcp("h", 0), std::invalid_argument);
  BOOST_CHECK_THROW(redis::connection_options{}.unix_socket(""), std::invalid_argument);
  BOOST_CHECK_THROW(redis::connection_options{}.command_timeout(0ms), std::invalid_argument);
  BOOST_CHECK_THROW(redis::connection_options{}.connect_timeout(-1ms), std::invalid_argument);
  BOOST_CHECK_THROW(redis::connection_options{}.database(-1), std::invalid_argument);
  BOOST_CHECK_THROW(redis::connection_options{}.user("", "pw"), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_command_gets_its_reply_and_a_stopped_server_an_error) {
  redis_server server;
  asio::io_context io;
  redis::connection c{io.get_executor(), server.connection()};
  auto pong = command(io, c, {"PING"});
  BOOST_TEST((pong.type == redis::reply::kind::status));
  BOOST_TEST(pong.text == "PONG");
  BOOST_TEST(c.connected());
  auto arr = command(io, c, {"EVAL", "return {1, 'two', {3}}", "0"});
  BOOST_TEST_REQUIRE(arr.elements.size() == 3u);
  BOOST_TEST(arr.elements[0].integer == 1);
  BOOST_TEST(arr.elements[1].text == "two");
  BOOST_TEST(arr.elements[2].elements[0].integer == 3);
  BOOST_TEST(command(io, c, {"NOSUCHCOMMAND"}).is_error());

  server.kill();
  std::optional<error_code> failed;
  c.async_command({"PING"}, [&](error_code ec, redis::reply) { failed = ec; });
  run_until(io, [&] { return failed.has_value(); });
  BOOST_TEST(failed->failed());
  // And back, on the next command after it returns.
  server.start();
  std::optional<error_code> again;
  c.async_command({"PING"}, [&](error_code ec, redis::reply) { again = ec; });
  run_until(io, [&] { return again.has_value(); });
  BOOST_TEST(!*again, again->message());
}

BOOST_AUTO_TEST_CASE(a_paused_server_times_the_command_out_and_the_late_reply_is_dropped) {
  redis_server server;
  asio::io_context io;
  redis::connection c{io.get_executor(), server.connection().command_timeout(30ms)};
  command(io, c, {"PING"});
  server.pause();
  std::optional<error_code> late;
  c.async_command({"PING"}, [&](error_code ec, redis::reply) { late = ec; });
  run_until(io, [&] { return late.has_value(); });
  BOOST_TEST((*late == resilience::error::timeout));
  server.resume();
  // The late PONG arrives first and belongs to nobody; the next reply is ours.
  BOOST_TEST(command(io, c, {"ECHO", "mine"}).text == "mine");
}

BOOST_AUTO_TEST_CASE(auth_is_sent_on_connect_and_a_wrong_password_is_an_error) {
  redis_server server{{"--requirepass", "sesame"}};
  asio::io_context io;
  redis::connection good{io.get_executor(), server.connection().password("sesame")};
  BOOST_TEST(command(io, good, {"PING"}).text == "PONG");
  redis::connection bad{io.get_executor(), server.connection().password("wrong")};
  std::optional<error_code> refused;
  bad.async_command({"PING"}, [&](error_code ec, redis::reply) { refused = ec; });
  run_until(io, [&] { return refused.has_value(); });
  BOOST_TEST(refused->failed());
}

BOOST_AUTO_TEST_CASE(a_command_of_no_words_is_refused_and_an_idle_connection_closed_by_redis_is_reopened) {
  redis_server server;
  asio::io_context io;
  redis::connection c{io.get_executor(), server.connection()};
  std::optional<error_code> empty;
  c.async_command({}, [&](error_code ec, redis::reply) { empty = ec; });
  run_until(io, [&] { return empty.has_value(); });
  BOOST_TEST((*empty == asio::error::invalid_argument));
  command(io, c, {"CLIENT", "SETNAME", "victim"});
  // Redis drops the idle connection (as its `timeout`, or a proxy, would).
  redis::connection admin{io.get_executor(), server.connection()};
  command(io, admin, {"CLIENT", "KILL", "SKIPME", "yes", "TYPE", "normal"});
  BOOST_TEST(command(io, c, {"PING"}).text == "PONG");  // no error: the EOF was read first
}

BOOST_AUTO_TEST_CASE(cancelling_a_command_ends_it_at_once_and_destroying_the_context_frees_the_rest) {
  redis_server server;
  auto io = std::make_unique<asio::io_context>();
  std::optional<redis::connection> c(std::in_place, io->get_executor(), server.connection().command_timeout(10s));
  command(*io, *c, {"PING"});
  server.pause();
  asio::cancellation_signal cancel;
  std::optional<error_code> ended;
  c->async_command({"PING"}, asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec, redis::reply) { ended = ec; }));
  io->poll();
  cancel.emit(asio::cancellation_type::terminal);
  run_until(*io, [&] { return ended.has_value(); });
  BOOST_TEST((*ended == asio::error::operation_aborted));
  // One more in flight, then the connection and the context go: its handler
  // is freed uncalled.
  bool ran = false;
  const auto handler_alive = std::make_shared<int>(0);
  c->async_command({"PING"}, [&ran, handler_alive](error_code, redis::reply) { ran = true; });
  io->poll();
  BOOST_TEST(handler_alive.use_count() > 1);
  c.reset();
  io.reset();
  BOOST_TEST(!ran, "a handler ran after its connection and context were gone");
  BOOST_TEST(handler_alive.use_count() == 1, "the command's handler was not freed");
  server.resume();
}

BOOST_AUTO_TEST_SUITE_END()
