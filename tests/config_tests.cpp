// Policies from a configuration document (config.hpp): every key read through
// its setter and written back, errors placed at their line and column, a
// corpus of refused documents, and reloads: atomic, whole or not at all,
// keeping the shared state of unchanged policies, under load from threads.
#include "support.hpp"

#include <resilience/config.hpp>
#include <resilience/config_watch.hpp>

#include <boost/asio/io_context.hpp>

#include <csignal>
#include <cstdio>
#include <filesystem>

#include <atomic>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
namespace config = resilience::config;

namespace {

// Every key of every section, none at its default.
const char* const config_every_key = R"({
  "retry_budget": {
    "ratio": { "kind": "ratio", "ratio": 0.25, "window": "20s", "min_retries_per_second": 5 },
    "tokens": { "kind": "token", "max_tokens": 20, "token_ratio": 0.5 }
  },
  "breaker": {
    "db": { "consecutive_failures": 7, "failure_ratio": 0.3, "slow_calls": { "threshold": "2s", "ratio": 0.8 },
            "time_window": { "span": "30s", "buckets": 15 }, "minimum_calls": 12, "open_duration": "7s",
            "half_open_judged_by_ratio": 0, "half_open_permits": 3, "successes_to_close": 2,
            "half_open_limit": "none", "slow_only_above_threshold": true, "judge_every_call": true,
            "probe_strictly_after_break": true }
  },
  "bulkhead": { "db": { "max_concurrent": 4, "max_queue": 8, "max_wait": "150ms" } },
  "rate_limiter": {
    "api": { "token_bucket": { "tokens": 50, "per": "1s", "burst": 60 }, "max_wait": "20ms", "max_queue": 9 },
    "window": { "sliding_window": { "limit": 30, "window": "1m", "segments": 6 } }
  },
  "adaptive_throttle": { "api": { "k": 1.5, "window": "1m" } },
  "timeout": { "db": { "limit": "250ms", "cancellation": "partial" } },
  "retry": {
    "pricing": { "max_attempts": 5, "backoff": { "shape": "exponential", "base": "20ms", "factor": 3, "cap": "2s" },
                 "jitter": "equal", "time_limit": "4s", "fit_to_time_left": false, "budget_refusal_as_error": true,
                 "budget": "ratio" },
    "linear": { "backoff": { "shape": "linear", "initial": "10ms", "step": "5ms", "cap": "1s" } },
    "constant": { "backoff": { "shape": "constant", "delay": "1.5s" }, "jitter": "none" },
    "decorrelated": { "backoff": { "shape": "decorrelated", "base": "10ms", "cap": "1s" }, "jitter": "none" }
  },
  "hedging": { "search": { "max_attempts": 3, "delay": "40ms", "budget": "tokens" } }
})";

std::string config_refusal(std::string_view text) {
  try {
    config::parse(text);
  } catch (const config::error& e) {
    return e.what();
  }
  return "accepted";
}

struct config_recorded : resilience::event_sink {
  std::vector<resilience::event_kind> kinds;
  void on_event(const resilience::event& e) noexcept override { kinds.push_back(e.kind); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(config_document)

BOOST_AUTO_TEST_CASE(every_key_reaches_its_option) {
  const auto s = config::parse(config_every_key);
  const auto& retry = s->retry("pricing").options();
  BOOST_TEST(retry.max_attempts == 5u);
  BOOST_TEST((retry.delays.kind() == resilience::backoff::shape::exponential));
  BOOST_TEST((retry.delays.first() == 20ms));
  BOOST_TEST(retry.delays.factor() == 3.0);
  BOOST_TEST((retry.delays.cap() == 2s));
  BOOST_TEST((retry.delays.jitter_kind() == resilience::jitter::equal));
  BOOST_TEST((retry.time_limit == 4s));
  BOOST_TEST(!retry.fit_to_time_left);
  BOOST_TEST(s->retry("pricing").budget_refusal_is_error());
  BOOST_TEST((s->retry("pricing").budget().budget == s->budget("ratio").budget), "the named budget, shared");
  BOOST_TEST((s->retry("constant").options().delays.first() == 1500ms));
  BOOST_TEST((s->retry("linear").options().delays.step() == 5ms));

  const auto& b = s->breaker("db").options();
  BOOST_TEST(b.consecutive_failures() == 7u);
  BOOST_TEST(*b.failure_ratio() == 0.3);
  BOOST_TEST((b.slow_call_threshold() == 2s));
  BOOST_TEST(*b.slow_call_ratio() == 0.8);
  BOOST_TEST((b.window() == resilience::breaker_options::window_kind::time));
  BOOST_TEST((b.time_window() == 30s));
  BOOST_TEST(b.buckets() == 15u);
  BOOST_TEST(b.minimum_calls() == 12u);
  BOOST_TEST((b.fixed_open_duration() == 7s));
  BOOST_TEST(b.half_open_permits() == 3u);
  BOOST_TEST(b.successes_to_close() == 2u);
  BOOST_TEST((b.half_open_limit() == resilience::duration::max()));
  BOOST_TEST(b.strict_slow_threshold());
  BOOST_TEST(b.judges_every_call());
  BOOST_TEST(b.probes_strictly_after_break());

  BOOST_TEST(s->bulkhead("db").options().max_concurrent() == 4u);
  BOOST_TEST(s->bulkhead("db").options().max_queue() == 8u);
  BOOST_TEST((s->bulkhead("db").options().max_wait() == 150ms));
  const auto& api = s->rate_limiter("api").options();
  BOOST_TEST(api.tokens() == 50u);
  BOOST_TEST(api.burst() == 60u);
  BOOST_TEST((api.max_wait() == 20ms));
  BOOST_TEST(api.max_queue() == 9u);
  BOOST_TEST(s->rate_limiter("window").options().segments() == 6u);
  BOOST_TEST(s->adaptive_throttle("api").options().k() == 1.5);
  BOOST_TEST((s->timeout("db").limit() == 250ms));
  BOOST_TEST((s->timeout("db").cancellation_type() == boost::asio::cancellation_type::partial));
  BOOST_TEST(s->hedging("search").max_attempts() == 3u);
  BOOST_TEST((s->hedging("search").delay() == 40ms));
  BOOST_TEST(static_cast<bool>(s->hedging("search").budget()));
  BOOST_CHECK_THROW(s->retry("nope"), std::out_of_range);
}

// The mapping both ways: what a snapshot writes (every option, defaults
// included) reads back to the same options and the same text.
BOOST_AUTO_TEST_CASE(a_snapshot_writes_every_option_and_reads_it_back) {
  const auto first = config::parse(config_every_key);
  const std::string text = first->document_text();
  const auto second = config::parse(text);
  BOOST_TEST(second->document_text() == text);
  BOOST_TEST((second->retry("pricing").options() == first->retry("pricing").options()));
  BOOST_TEST((second->breaker("db").options().slow_call_ratio() == first->breaker("db").options().slow_call_ratio()));
  // A breaker without a failure ratio says so, rather than leaving the key
  // out (which would mean the default, 0.5).
  const auto none = config::parse(R"({"breaker": {"b": {"failure_ratio": null, "consecutive_failures": 3}}})");
  BOOST_TEST(!config::parse(none->document_text())->breaker("b").options().failure_ratio().has_value());
}

// A name_key finds the same entries as the name, in every snapshot after it.
BOOST_AUTO_TEST_CASE(a_name_key_finds_what_the_name_finds) {
  const config::name_key pricing{"pricing"}, db{"db"}, absent{"absent"};
  BOOST_TEST(config::name_key{"pricing"}.index() == pricing.index(), "one key per name");
  const auto s = config::parse(config_every_key);
  BOOST_TEST(&s->retry(pricing) == &s->retry("pricing"));
  BOOST_TEST(&s->breaker(db) == &s->breaker("db"));
  BOOST_TEST(&s->bulkhead(db) == &s->bulkhead("db"));
  BOOST_TEST(&s->timeout(db) == &s->timeout("db"));
  BOOST_TEST(&s->budget(config::name_key{"ratio"}) == &s->budget("ratio"));
  BOOST_CHECK_THROW(s->retry(db), std::out_of_range);  // a breaker, not a retry, is named db
  BOOST_CHECK_THROW(s->retry(absent), std::out_of_range);
  const config::name_key later{"made_after_the_parse"};
  BOOST_CHECK_THROW(s->timeout(later), std::out_of_range);
}

// What a document leaves out is the C++ default: an empty entry is the
// default-constructed options, written out in full.
BOOST_AUTO_TEST_CASE(an_empty_entry_is_the_cpp_default) {
  const auto s = config::parse(R"({"retry": {"a": {}}, "breaker": {"b": {}}, "bulkhead": {"c": {}}})");
  BOOST_TEST((s->retry("a").options() == resilience::retry_policy{}.options()));
  BOOST_TEST(s->breaker("b").options().minimum_calls() == resilience::breaker_options{}.minimum_calls());
  BOOST_TEST(s->bulkhead("c").options().max_concurrent() == resilience::bulkhead_options{}.max_concurrent());
  const std::string text = s->document_text();
  for (const char* key : {"\"max_attempts\":3", "\"jitter\":\"full\"", "\"time_limit\":\"none\"", "\"minimum_calls\":20",
                          "\"max_concurrent\":10"})
    BOOST_TEST(text.find(key) != std::string::npos, key << " in " << text);
}

BOOST_AUTO_TEST_CASE(durations_are_read_and_written_exactly) {
  BOOST_TEST((config::parse_duration("250ms") == 250ms));
  BOOST_TEST((config::parse_duration("1.5m") == 90s));
  BOOST_TEST((config::parse_duration("2h") == 7200s));
  BOOST_TEST((config::parse_duration("7us") == 7us));
  BOOST_TEST((config::parse_duration("none", true) == resilience::duration::max()));
  BOOST_TEST(config::format_duration(90s) == "90s");
  BOOST_TEST(config::format_duration(1500ms) == "1500ms");
  BOOST_TEST(config::format_duration(2h) == "2h");
  BOOST_TEST(config::format_duration(0ms) == "0s");
  for (const char* bad : {"", "ms", "10", "10 ms", "-1s", "1.s", ".5s", "1.2.3s", "1e3ms", "5d", "1.0000000001s",
                          "99999999999h"})
    BOOST_CHECK_THROW(config::parse_duration(bad), std::invalid_argument);
  BOOST_CHECK_THROW(config::parse_duration("none"), std::invalid_argument);
}

// Each refused document names the path, the line and column of the value at
// fault, and the rule, as the C++ setter would.
BOOST_AUTO_TEST_CASE(refused_documents_say_where_and_why) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "(document) at 1:1: not JSON"},
      {"{", "(document) at 1:2: not JSON"},
      {"[]", "a document must be an object"},
      {"{\"retry\": {\"a\": {\"max_attempts\": 1,}}}", "(document) at 1:36: not JSON"},
      {"{\"retries\": {}}", "retries at 1:13: unknown section (known: retry_budget, breaker"},
      {"{\"retry\": []}", "retry at 1:11: must be an object"},
      {"{\"retry\": {\"a\": 3}}", "retry.a at 1:17: must be an object"},
      {"{\"retry\": {\"\": {}}}", "retry. at 1:16: a policy needs a name"},
      {"{\"retry\": {\"a\": {\"max_attempts\": 0}}}", "retry.a.max_attempts at 1:34: must be at least 1"},
      {"{\"retry\": {\"a\": {\"max_attempts\": -1}}}", "retry.a.max_attempts at 1:34: must not be negative"},
      {"{\"retry\": {\"a\": {\"max_attempts\": 1.5}}}", "retry.a.max_attempts at 1:34: must be a whole number"},
      {"{\"retry\": {\"a\": {\"max_attempts\": \"3\"}}}", "retry.a.max_attempts at 1:34: must be a whole number"},
      {"{\"retry\": {\"a\": {\"max_attempts\": 4294967296}}}", "retry.a.max_attempts at 1:34: must be at most 4294967295"},
      {"{\"retry\": {\"a\": {\"max_atempts\": 3}}}", "retry.a.max_atempts at 1:33: unknown key (known: max_attempts,"},
      {"{\"retry\": {\"a\": {\"time_limit\": 5}}}", "retry.a.time_limit at 1:32: must be a string such as"},
      {"{\"retry\": {\"a\": {\"time_limit\": \"5 s\"}}}", "retry.a.time_limit at 1:32: must be a duration such as"},
      {"{\"retry\": {\"a\": {\"time_limit\": \"0s\"}}}", "retry.a.time_limit at 1:32: must be positive"},
      {"{\"retry\": {\"a\": {\"fit_to_time_left\": 1}}}", "retry.a.fit_to_time_left at 1:38: must be true or false"},
      {"{\"retry\": {\"a\": {\"jitter\": \"half\"}}}", "retry.a.jitter at 1:28: must be one of none, full"},
      {"{\"retry\": {\"a\": {\"backoff\": {}}}}", "retry.a.backoff.shape at 1:29: is required"},
      {"{\"retry\": {\"a\": {\"backoff\": {\"shape\": \"cubic\"}}}}", "retry.a.backoff.shape at 1:39: must be constant"},
      {"{\"retry\": {\"a\": {\"backoff\": {\"shape\": \"exponential\"}}}}", "retry.a.backoff.base at 1:29: is required"},
      {"{\"retry\": {\"a\": {\"backoff\": {\"shape\": \"exponential\", \"base\": \"1s\", \"factor\": 0.5}}}}",
       "retry.a.backoff at 1:29: factor must be finite and >= 1"},
      {"{\"retry\": {\"a\": {\"backoff\": {\"shape\": \"constant\", \"delay\": \"1s\", \"cap\": \"2s\"}}}}",
       "retry.a.backoff.cap at 1:73: not a number of the shape constant"},
      {"{\"retry\": {\"a\": {\"budget\": \"missing\"}}}", "retry.a.budget at 1:28: no retry_budget named \"missing\""},
      {"{\"retry_budget\": {\"b\": {\"kind\": \"leaky\"}}}", "retry_budget.b.kind at 1:33: must be ratio or token"},
      {"{\"retry_budget\": {\"b\": {\"kind\": \"token\"}}}", "retry_budget.b at 1:24: a token budget needs"},
      {"{\"retry_budget\": {\"b\": {\"kind\": \"token\", \"max_tokens\": 2000, \"token_ratio\": 1}}}",
       "retry_budget.b at 1:24: max_tokens must be in [1, 1000]"},
      {"{\"retry_budget\": {\"b\": {\"ratio\": 11}}}", "retry_budget.b.ratio at 1:34: must be in (0, 10]"},
      {"{\"breaker\": {\"b\": {\"failure_ratio\": 1.5}}}", "breaker.b.failure_ratio at 1:37: must be in (0, 1]"},
      {"{\"breaker\": {\"b\": {\"count_window\": 10, \"minimum_calls\": 20}}}", "breaker.b at 1:19: "},
      {"{\"breaker\": {\"b\": {\"slow_calls\": {\"threshold\": \"1s\"}}}}", "breaker.b.slow_calls at 1:34: needs both"},
      {"{\"breaker\": {\"b\": {\"time_window\": {\"span\": \"1s\", \"bucket\": 3}}}}",
       "breaker.b.time_window.bucket at 1:60: unknown key (known: span, buckets)"},
      {"{\"bulkhead\": {\"b\": {\"max_concurrent\": 0}}}", "bulkhead.b.max_concurrent at 1:39: must be in [1, 2^31 - 1]"},
      {"{\"rate_limiter\": {\"r\": {\"token_bucket\": {\"tokens\": 5}}}}", "rate_limiter.r.token_bucket at 1:41: needs tokens and per"},
      {"{\"timeout\": {\"t\": {}}}", "timeout.t.limit at 1:19: is required"},
      {"{\"timeout\": {\"t\": {\"limit\": \"0ms\"}}}", "timeout.t.limit at 1:29: duration must be positive"},
      {"{\"timeout\": {\"t\": {\"limit\": \"1s\", \"cancellation\": \"all\"}}}", "timeout.t.cancellation at 1:51: must be one of"},
      {"{\"hedging\": {\"h\": {\"max_attempts\": 9}}}", "hedging.h.max_attempts at 1:36: must be in [1, 5]"},
      {"{\"retry\": {\"a\": {}, \"a\": {}}}", "retry.a at 1:21: given twice"},
      {"{\"retry\": {\"a\": {\"max_attempts\": 2}},\n  \"bulkhead\": {\"b\": {\"max_wait\": \"never\"}}}",
       "bulkhead.b.max_wait at 2:34: must be a duration such as"},
  };
  static_assert(std::size(cases) >= 30);
  for (const auto& [document, expected] : cases) {
    const std::string what = config_refusal(document);
    BOOST_TEST(what.find(expected) == 0u, document << "\n  gave: " << what << "\n  want: " << expected);
  }
}

// The reference documents every key the library reads, under its section's
// heading; a key added to a table without its line in the docs fails here.
BOOST_AUTO_TEST_CASE(the_reference_documents_every_key) {
  // This file is tests/config_tests.cpp of the source tree (an absolute path
  // in the build's commands, unity batches included).
  std::string path = __FILE__;
  path.replace(path.rfind("tests/config_tests.cpp"), std::string::npos, "docs/config.md");
  std::ifstream file(path);
  BOOST_REQUIRE(file);
  std::stringstream text;
  text << file.rdbuf();
  const std::string page = text.str();
  const auto keys = config::document_keys();
  BOOST_TEST(keys.size() > 50u);
  for (const auto& key : keys) {
    const std::size_t dot = key.find('.');
    const std::string heading = "\n### `" + key.substr(0, dot) + "`\n";
    const std::size_t from = page.find(heading);
    BOOST_REQUIRE_MESSAGE(from != std::string::npos, "no section " << heading);
    const std::size_t to = page.find("\n### ", from + 1);
    const std::string section = page.substr(from, to - from);
    BOOST_TEST(section.find("`" + key.substr(dot + 1) + "`") != std::string::npos, key << " is not documented");
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(config_reload)

BOOST_AUTO_TEST_CASE(a_reload_is_taken_whole_or_not_at_all) {
  config::live_config live{R"({"retry": {"a": {"max_attempts": 2}}})", "first.json"};
  config_recorded sink;
  live.events(sink);
  std::vector<config::reload_event> seen;
  live.on_reload([&](const config::reload_event& e) { seen.push_back(e); });
  const auto before = live.current();
  BOOST_TEST(before->version() == 1u);
  BOOST_TEST(before->source() == "first.json");

  const auto refused = live.reload(R"({"retry": {"a": {"max_attempts": 0}}, "timeout": {"t": {"limit": "1s"}}})");
  BOOST_TEST(!refused.accepted);
  BOOST_TEST(refused.reason.find("retry.a.max_attempts at 1:34") == 0u, refused.reason);
  BOOST_TEST(live.current() == before, "the running snapshot stays");
  BOOST_CHECK_THROW(live.current()->timeout("t"), std::out_of_range);

  const auto accepted = live.reload(R"({"retry": {"a": {"max_attempts": 4}}})", "second.json");
  BOOST_TEST(accepted.accepted);
  BOOST_TEST(live.current()->version() == 2u);
  BOOST_TEST(live.current()->retry("a").options().max_attempts == 4u);
  BOOST_TEST(before->retry("a").options().max_attempts == 2u, "a call holding the old snapshot keeps its policy");
  BOOST_TEST(live.reloads_accepted() == 1u);
  BOOST_TEST(live.reloads_rejected() == 1u);
  BOOST_TEST(seen.size() == 2u);
  BOOST_TEST((sink.kinds == std::vector{resilience::event_kind::config_rejected, resilience::event_kind::config_reloaded}));
}

// A breaker whose name and options stay keeps its state across a reload;
// one whose options change starts afresh; a budget likewise.
BOOST_AUTO_TEST_CASE(shared_state_survives_a_reload_where_its_options_stay) {
  const char* doc = R"({"breaker": {"db": {"consecutive_failures": 2}, "api": {"consecutive_failures": 2}},
                         "retry_budget": {"b": {"kind": "token", "max_tokens": 10, "token_ratio": 0.5}}})";
  config::live_config live{doc};
  for (const char* name : {"db", "api"})
    for (int i = 0; i < 2; ++i) live.current()->breaker(name).try_acquire().record(true);
  live.current()->budget("b").record(resilience::attempt_verdict::retryable_failure, true);
  BOOST_TEST((live.current()->breaker("db").state() == resilience::circuit_state::open));
  BOOST_TEST(live.reload(R"({"breaker": {"db": {"consecutive_failures": 2}, "api": {"consecutive_failures": 3}},
                             "retry_budget": {"b": {"kind": "token", "max_tokens": 10, "token_ratio": 0.5}},
                             "timeout": {"t": {"limit": "1s"}}})")
                 .accepted);
  BOOST_TEST((live.current()->breaker("db").state() == resilience::circuit_state::open), "unchanged: kept");
  BOOST_TEST((live.current()->breaker("api").state() == resilience::circuit_state::closed), "changed: afresh");
  const auto* tokens = static_cast<const resilience::retry_token_budget*>(live.current()->budget("b").budget);
  BOOST_TEST(tokens->tokens() == 9.0, "the budget kept its count");
}

// Hooks are code: the program adds them to each object a snapshot builds,
// once per object (a carried-over breaker keeps the hooks it was built with).
BOOST_AUTO_TEST_CASE(code_hooks_are_added_to_each_object_built) {
  std::vector<std::string> built;
  int transitions = 0;
  config::code_hooks hooks;
  hooks.breaker = [&](std::string_view name, resilience::breaker_options o) {
    built.emplace_back(name);
    return o.on_state_change([&](const resilience::state_change&) { ++transitions; });
  };
  config::live_config live{R"({"breaker": {"db": {"consecutive_failures": 1}, "api": {}}})", "doc", hooks};
  BOOST_TEST((built == std::vector<std::string>{"db", "api"}), "in the document's order");
  live.current()->breaker("db").try_acquire().record(true);
  BOOST_TEST(transitions == 1, "the hook the document could not give");
  BOOST_TEST(live.reload(R"({"breaker": {"db": {"consecutive_failures": 1}, "api": {"minimum_calls": 5}}})").accepted);
  BOOST_TEST((built == std::vector<std::string>{"db", "api", "api"}), "only the changed one is built again");
}

// Threads take the running snapshot and use its bulkhead and breaker while
// another thread reloads: every permit comes back to the object it came
// from, every snapshot stays whole for as long as it is held.
BOOST_AUTO_TEST_CASE(reloading_under_load_loses_nothing) {
  const auto document = [](int concurrent) {
    return R"({"bulkhead": {"b": {"max_concurrent": )" + std::to_string(concurrent) +
           R"(}}, "breaker": {"c": {}}, "retry": {"r": {"max_attempts": )" + std::to_string(concurrent % 5 + 1) +
           "}}}";
  };
  config::live_config live{document(8)};
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> calls{0}, broken{0};
  std::vector<std::shared_ptr<const config::snapshot>> held;
  std::vector<std::thread> callers;
  for (int t = 0; t < 3; ++t)
    callers.emplace_back([&] {
      while (!stop.load()) {
        const auto s = live.current();
        if (auto permit = s->bulkhead("b").try_acquire()) {
          auto call = s->breaker("c").try_acquire();
          if (s->retry("r").options().max_attempts < 1u) broken.fetch_add(1);  // Boost.Test asserts on one thread only
          if (call) call.record(false);
          calls.fetch_add(1);
        }
      }
    });
  for (int i = 0; i < 200; ++i) {
    held.push_back(live.current());
    BOOST_REQUIRE(live.reload(document(4 + i % 7)).accepted);
  }
  stop = true;
  for (auto& t : callers) t.join();
  BOOST_TEST(calls.load() > 0u);
  BOOST_TEST(broken.load() == 0u);
  for (const auto& s : held) BOOST_TEST(s->bulkhead("b").in_flight() == 0u, "every permit returned");
  BOOST_TEST(live.current()->version() == 201u);
}

// A file replaced the way editors do (written aside, renamed over) is read
// again; a broken one is refused with the running policies kept; SIGHUP
// reads it too. The waits are for inotify and a signal to arrive, bounded so
// that a lost event fails the test instead of hanging it.
BOOST_AUTO_TEST_CASE(a_watched_file_is_reloaded_when_it_changes_and_on_sighup) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("resilience_config_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string file = (dir / "policies.json").string();
  const auto write = [&](const std::string& text) {
    const std::string aside = file + ".new";
    std::FILE* f = std::fopen(aside.c_str(), "w");
    BOOST_REQUIRE(f);
    std::fputs(text.c_str(), f);
    std::fclose(f);
    fs::rename(aside, file);
  };
  write(R"({"retry": {"a": {"max_attempts": 2}}})");
  boost::asio::io_context io;
  config::live_config live{config::read_file(file), file};
  const auto run_until = [&](auto done) {
    for (int i = 0; i < 100 && !done(); ++i) io.run_one_for(100ms);
    return done();
  };
  {
    config::file_watch watch{io.get_executor(), live, file};
    write(R"({"retry": {"a": {"max_attempts": 5}}})");
    BOOST_REQUIRE(run_until([&] { return live.reloads_accepted() == 1u; }));
    BOOST_TEST(live.current()->retry("a").options().max_attempts == 5u);
    BOOST_TEST(live.current()->source() == file);

    write(R"({"retry": {"a": {"max_attempts": 0}}})");
    BOOST_REQUIRE(run_until([&] { return live.reloads_rejected() == 1u; }));
    BOOST_TEST(live.current()->retry("a").options().max_attempts == 5u, "the running policies stay");
  }
  // Without inotify, the operator's signal.
  config::file_watch watch{io.get_executor(), live, file, {.file_changes = false, .sighup = true}};
  std::FILE* f = std::fopen(file.c_str(), "w");
  std::fputs(R"({"retry": {"a": {"max_attempts": 7}}})", f);
  std::fclose(f);
  io.poll();
  BOOST_TEST(live.reloads_accepted() == 1u, "no inotify: nothing yet");
  std::raise(SIGHUP);
  BOOST_REQUIRE(run_until([&] { return live.reloads_accepted() == 2u; }));
  BOOST_TEST(live.current()->retry("a").options().max_attempts == 7u);
  watch.stop();
  fs::remove(file);
  std::raise(SIGHUP);  // still caught by the stopped watch's set until it closes
  io.poll();
  BOOST_TEST(live.reloads_rejected() == 1u, "a stopped watch reloads nothing");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(config_status)

BOOST_AUTO_TEST_CASE(the_status_page_shows_each_object_s_live_state_and_actions_change_it) {
  const auto s = config::parse(R"({"breaker": {"db": {"consecutive_failures": 1}},
      "bulkhead": {"pool": {"max_concurrent": 2}},
      "retry_budget": {"t": {"kind": "token", "max_tokens": 4, "token_ratio": 0.5}, "r": {}}})",
                                "status.json");
  s->breaker("db").try_acquire().record(true);
  const auto permit = s->bulkhead("pool").try_acquire();
  const std::string json = config::status_json(*s);
  for (const char* part : {"\"version\":1", "\"source\":\"status.json\"", "\"db\":{\"state\":\"open\"", "\"failures\":1",
                           "\"in_flight\":1", "\"tokens\":4", "\"refusals\":0"})
    BOOST_TEST(json.find(part) != std::string::npos, part << " in " << json);
  const std::string html = config::status_html(*s);
  BOOST_TEST(html.find("<td>db</td>") != std::string::npos, html);
  BOOST_TEST(html.find("&quot;state&quot;:&quot;open&quot;") != std::string::npos, html);

  config::breaker_action(*s, "db", "reset");
  BOOST_TEST((s->breaker("db").state() == resilience::circuit_state::closed));
  config::breaker_action(*s, "db", "isolate");
  BOOST_TEST((s->breaker("db").state() == resilience::circuit_state::isolated));
  BOOST_CHECK_THROW(config::breaker_action(*s, "db", "explode"), std::invalid_argument);
  BOOST_CHECK_THROW(config::breaker_action(*s, "nope", "reset"), std::out_of_range);
}

BOOST_AUTO_TEST_SUITE_END()
