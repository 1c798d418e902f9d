// The sections of a document, each a table of keys over its C++ options, and
// the snapshot that owns what they build; live_config's atomic swap.
#include "shared_objects.hpp"

#include <boost/json/serialize.hpp>

#include <deque>
#include <stdexcept>
#include <variant>

namespace resilience::config {
namespace detail {
namespace json = boost::json;

// -- names of enumerations ------------------------------------------------

constexpr jitter jitters[] = {jitter::none, jitter::full, jitter::equal, jitter::decorrelated_clamped,
                              jitter::decorrelated_v2};

jitter jitter_named(std::string_view name) {
  for (const jitter j : jitters)
    if (name == to_string(j)) return j;
  throw std::invalid_argument("must be one of none, full, equal, decorrelated_clamped, decorrelated_v2");
}

using boost::asio::cancellation_type;
constexpr std::pair<cancellation_type, std::string_view> cancellations[] = {
    {cancellation_type::terminal, "terminal"}, {cancellation_type::partial, "partial"}, {cancellation_type::total, "total"}};

cancellation_type cancellation_named(std::string_view name) {
  for (const auto& [type, text] : cancellations)
    if (name == text) return type;
  throw std::invalid_argument("must be one of terminal, partial, total");
}
std::string_view name_of(cancellation_type type) {
  for (const auto& [t, text] : cancellations)
    if (t == type) return text;
  return "terminal";
}

constexpr std::pair<backoff::shape, std::string_view> shapes[] = {{backoff::shape::constant, "constant"},
                                                                  {backoff::shape::linear, "linear"},
                                                                  {backoff::shape::exponential, "exponential"},
                                                                  {backoff::shape::decorrelated, "decorrelated"}};

// -- the keys of objects within an entry, and of entries beyond their table -

constexpr std::string_view slow_call_keys[] = {"threshold", "ratio"};
constexpr std::string_view time_window_keys[] = {"span", "buckets"};
constexpr std::string_view token_bucket_keys[] = {"tokens", "per", "burst"};
constexpr std::string_view sliding_window_keys[] = {"limit", "window", "segments"};
constexpr std::string_view timeout_limit_key[] = {"limit"};  // required: a timeout has no default
constexpr std::string_view budget_name_key[] = {"budget"};  // retry, hedging: a retry_budget's name

// -- a backoff schedule: {"shape": ..., and that shape's numbers} ----------

// The factories' own defaults for what the document leaves out: only the
// first delay is required.
backoff read_backoff(const json::value& v, const std::string& path, const document_reader& r) {
  const auto& o = r.object_at(v, path);
  const auto* shape_value = o.if_contains("shape");
  if (!shape_value) r.fail(path + ".shape", "is required: constant, linear, exponential or decorrelated");
  const std::string_view shape = r.string_at(*shape_value, path + ".shape");
  const auto want = [&](std::string_view key) -> const json::value& {
    const auto* value = o.if_contains(key);
    if (!value) r.fail(path + "." + std::string(key), "is required for the shape " + std::string(shape));
    return *value;
  };
  const auto optional_duration = [&](std::string_view key, duration fallback) {
    const auto* value = o.if_contains(key);
    return value ? r.duration_at(*value, path + "." + std::string(key)) : fallback;
  };
  std::vector<std::string_view> keys;
  const auto build = [&]() -> backoff {
    if (shape == "constant") {
      keys = {"shape", "delay"};
      return backoff::constant(r.duration_at(want("delay"), path + ".delay"));
    }
    if (shape == "linear") {
      keys = {"shape", "initial", "step", "cap"};
      const duration initial = r.duration_at(want("initial"), path + ".initial");
      const duration step = r.duration_at(want("step"), path + ".step");
      return backoff::linear(initial, step, optional_duration("cap", backoff::linear(initial, step).cap()));
    }
    if (shape == "exponential") {
      keys = {"shape", "base", "factor", "cap"};
      const duration base = r.duration_at(want("base"), path + ".base");
      const backoff defaults = backoff::exponential(base);
      const auto* factor = o.if_contains("factor");
      return backoff::exponential(base, factor ? r.number_at(*factor, path + ".factor") : defaults.factor(),
                                  optional_duration("cap", defaults.cap()));
    }
    if (shape == "decorrelated") {
      keys = {"shape", "base", "cap"};
      return backoff::decorrelated(r.duration_at(want("base"), path + ".base"),
                                   r.duration_at(want("cap"), path + ".cap"));
    }
    r.fail(path + ".shape", "must be constant, linear, exponential or decorrelated (a custom schedule is code)");
  };
  backoff b = [&] {
    try {
      return build();
    } catch (const std::invalid_argument& e) {
      if (dynamic_cast<const config::error*>(&e)) throw;
      r.fail(path, setter_reason(e, path));
    }
  }();
  for (const auto& [key, value] : o) {
    bool known = false;
    for (const auto k : keys) known = known || k == std::string_view(key);
    if (!known) r.fail(path + "." + std::string(key), "not a number of the shape " + std::string(shape));
  }
  return b;
}

json::value write_backoff(const backoff& b) {
  json::object o;
  for (const auto& [s, name] : shapes)
    if (s == b.kind()) o["shape"] = name;
  switch (b.kind()) {
    case backoff::shape::constant: o["delay"] = format_duration(b.first()); break;
    case backoff::shape::linear:
      o["initial"] = format_duration(b.first());
      o["step"] = format_duration(b.step());
      o["cap"] = format_duration(b.cap());
      break;
    case backoff::shape::exponential:
      o["base"] = format_duration(b.first());
      o["factor"] = b.factor();
      o["cap"] = format_duration(b.cap());
      break;
    case backoff::shape::decorrelated:
      o["base"] = format_duration(b.first());
      o["cap"] = format_duration(b.cap());
      break;
    case backoff::shape::custom: return json::value(nullptr);  // code, not data
  }
  return o;
}

// -- the tables --------------------------------------------------------------
const field<retry_policy> retry_fields[] = {
    RESILIENCE_OPTION(retry_policy, "max_attempts", options().max_attempts, max_attempts),
    custom<retry_policy>(
        "backoff",
        [](retry_policy& p, const json::value& v, const std::string& path, const document_reader& r) {
          p = p.backoff(read_backoff(v, path, r));
        },
        [](const retry_policy& p) { return write_backoff(p.options().delays); }, backoff_keys),
    custom<retry_policy>(
        "jitter",
        [](retry_policy& p, const json::value& v, const std::string& path, const document_reader& r) {
          p = p.jitter(jitter_named(r.string_at(v, path)));
        },
        [](const retry_policy& p) { return json::value(to_string(p.options().delays.jitter_kind())); }),
    RESILIENCE_OPTION(retry_policy, "time_limit", options().time_limit, time_limit),
    RESILIENCE_OPTION(retry_policy, "fit_to_time_left", options().fit_to_time_left, fit_to_time_left),
    RESILIENCE_OPTION(retry_policy, "budget_refusal_as_error", budget_refusal_is_error(), budget_refusal_as_error),
};

const field<hedging_policy> hedging_fields[] = {
    RESILIENCE_OPTION(hedging_policy, "max_attempts", max_attempts(), max_attempts),
    RESILIENCE_OPTION(hedging_policy, "delay", delay(), delay),
};

const field<basic_timeout<>> timeout_fields[] = {
    custom<basic_timeout<>>(
        "cancellation",
        [](basic_timeout<>& t, const json::value& v, const std::string& path, const document_reader& r) {
          t = t.cancellation(cancellation_named(r.string_at(v, path)));
        },
        [](const basic_timeout<>& t) { return json::value(name_of(t.cancellation_type())); }),
};

const field<breaker_options> breaker_fields[] = {
    // 0 is the default: off (the setter takes 1 and up).
    custom<breaker_options>(
        "consecutive_failures",
        [](breaker_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          if (const auto n = static_cast<std::uint32_t>(r.unsigned_at(v, path, UINT32_MAX)); n != 0)
            o = o.consecutive_failures(n);
        },
        [](const breaker_options& o) { return json::value(o.consecutive_failures()); }),
    // "none" (or null): no failure ratio (a breaker judged by consecutive failures or slow calls alone).
    custom<breaker_options>(
        "failure_ratio",
        [](breaker_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          const bool none = v.is_null() || (v.is_string() && v.get_string() == "none");
          o = none ? o.no_failure_ratio() : o.failure_ratio(r.number_at(v, path));
        },
        [](const breaker_options& o) {
          return o.failure_ratio() ? json::value(*o.failure_ratio()) : json::value("none");
        }),
    custom<breaker_options>(
        "slow_calls",
        [](breaker_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          const auto& s = r.object_at(v, path);
          r.only_keys(s, path, slow_call_keys);
          const auto* threshold = s.if_contains("threshold");
          const auto* ratio = s.if_contains("ratio");
          if (!threshold || !ratio) r.fail(path, "needs both threshold and ratio");
          o = o.slow_calls(r.duration_at(*threshold, path + ".threshold"), r.number_at(*ratio, path + ".ratio"));
        },
        [](const breaker_options& o) {
          if (!o.slow_call_ratio()) return json::value();
          return json::value(json::object{{"threshold", format_duration(o.slow_call_threshold())},
                                          {"ratio", *o.slow_call_ratio()}});
        },
        slow_call_keys),
    custom<breaker_options>(
        "count_window",
        [](breaker_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          o = o.count_window(static_cast<std::uint32_t>(r.unsigned_at(v, path, UINT32_MAX)));
        },
        [](const breaker_options& o) {
          return o.window() == breaker_options::window_kind::count ? json::value(o.count_window()) : json::value();
        }),
    custom<breaker_options>(
        "time_window",
        [](breaker_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          const auto& w = r.object_at(v, path);
          r.only_keys(w, path, time_window_keys);
          const auto* span = w.if_contains("span");
          if (!span) r.fail(path + ".span", "is required");
          const duration d = r.duration_at(*span, path + ".span");
          const auto* buckets = w.if_contains("buckets");
          o = buckets ? o.time_window(d, static_cast<std::uint32_t>(r.unsigned_at(*buckets, path + ".buckets", UINT32_MAX)))
                      : o.time_window(d);
        },
        [](const breaker_options& o) {
          if (o.window() != breaker_options::window_kind::time) return json::value();
          return json::value(json::object{{"span", format_duration(o.time_window())}, {"buckets", o.buckets()}});
        },
        time_window_keys),
    RESILIENCE_OPTION(breaker_options, "minimum_calls", minimum_calls(), minimum_calls),
    RESILIENCE_OPTION(breaker_options, "open_duration", fixed_open_duration(), open_duration),
    // Before half_open_permits, which it sets.
    RESILIENCE_OPTION(breaker_options, "half_open_judged_by_ratio", judged_half_open_probes(), half_open_judged_by_ratio),
    RESILIENCE_OPTION(breaker_options, "half_open_permits", half_open_permits(), half_open_permits),
    RESILIENCE_OPTION(breaker_options, "successes_to_close", successes_to_close(), successes_to_close),
    RESILIENCE_OPTION(breaker_options, "half_open_limit", half_open_limit(), half_open_limit),
    RESILIENCE_OPTION(breaker_options, "slow_only_above_threshold", strict_slow_threshold(), slow_only_above_threshold),
    RESILIENCE_OPTION(breaker_options, "judge_every_call", judges_every_call(), judge_every_call),
    RESILIENCE_OPTION(breaker_options, "probe_strictly_after_break", probes_strictly_after_break(),
                      probe_strictly_after_break),
};

const field<bulkhead_options> bulkhead_fields[] = {
    RESILIENCE_OPTION(bulkhead_options, "max_concurrent", max_concurrent(), max_concurrent),
    RESILIENCE_OPTION(bulkhead_options, "max_queue", max_queue(), max_queue),
    RESILIENCE_OPTION(bulkhead_options, "max_wait", max_wait(), max_wait),
};

// A rate: {"tokens": n, "per": "1s", "burst": n} (burst: tokens by default)
// or a sliding window {"limit": n, "window": "1s", "segments": n}.
const field<rate_limiter_options> rate_limiter_fields[] = {
    custom<rate_limiter_options>(
        "token_bucket",
        [](rate_limiter_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          const auto& b = r.object_at(v, path);
          r.only_keys(b, path, token_bucket_keys);
          const auto* tokens = b.if_contains("tokens");
          const auto* per = b.if_contains("per");
          if (!tokens || !per) r.fail(path, "needs tokens and per");
          const auto n = static_cast<std::uint32_t>(r.unsigned_at(*tokens, path + ".tokens", UINT32_MAX));
          const duration d = r.duration_at(*per, path + ".per");
          const auto* burst = b.if_contains("burst");
          o = burst ? o.token_bucket(n, d, static_cast<std::uint32_t>(r.unsigned_at(*burst, path + ".burst", UINT32_MAX)))
                    : o.token_bucket(n, d);
        },
        [](const rate_limiter_options& o) {
          if (o.kind() != rate_limiter_options::algorithm::token_bucket) return json::value();
          return json::value(
              json::object{{"tokens", o.tokens()}, {"per", format_duration(o.per())}, {"burst", o.burst()}});
        },
        token_bucket_keys),
    custom<rate_limiter_options>(
        "sliding_window",
        [](rate_limiter_options& o, const json::value& v, const std::string& path, const document_reader& r) {
          const auto& w = r.object_at(v, path);
          r.only_keys(w, path, sliding_window_keys);
          const auto* limit = w.if_contains("limit");
          const auto* window = w.if_contains("window");
          const auto* segments = w.if_contains("segments");
          if (!limit || !window || !segments) r.fail(path, "needs limit, window and segments");
          o = o.sliding_window(static_cast<std::uint32_t>(r.unsigned_at(*limit, path + ".limit", UINT32_MAX)),
                               r.duration_at(*window, path + ".window"),
                               static_cast<std::uint32_t>(r.unsigned_at(*segments, path + ".segments", UINT32_MAX)));
        },
        [](const rate_limiter_options& o) {
          if (o.kind() != rate_limiter_options::algorithm::sliding_window) return json::value();
          return json::value(json::object{
              {"limit", o.limit()}, {"window", format_duration(o.window())}, {"segments", o.segments()}});
        },
        sliding_window_keys),
    RESILIENCE_OPTION(rate_limiter_options, "max_wait", max_wait(), max_wait),
    RESILIENCE_OPTION(rate_limiter_options, "max_queue", max_queue(), max_queue),
};

const field<adaptive_throttle_options> throttle_fields[] = {
    RESILIENCE_OPTION(adaptive_throttle_options, "k", k(), k),
    RESILIENCE_OPTION(adaptive_throttle_options, "window", window(), window),
};

const field<retry_ratio_budget_options> ratio_budget_fields[] = {
    RESILIENCE_OPTION(retry_ratio_budget_options, "ratio", ratio(), ratio),
    RESILIENCE_OPTION(retry_ratio_budget_options, "window", window(), window),
    RESILIENCE_OPTION(retry_ratio_budget_options, "min_retries_per_second", min_retries_per_second(),
                      min_retries_per_second),
};

// gRFC A6's two numbers; the budget has no defaults for them, so both are required.
const field<token_budget_settings> token_budget_fields[] = {
    RESILIENCE_OPTION(token_budget_settings, "max_tokens", max_tokens, with_max_tokens),
    RESILIENCE_OPTION(token_budget_settings, "token_ratio", token_ratio, with_token_ratio),
};

std::span<const field<breaker_options>> breaker_table() { return breaker_fields; }
std::span<const field<adaptive_throttle_options>> throttle_table() { return throttle_fields; }
std::span<const field<retry_ratio_budget_options>> ratio_budget_table() { return ratio_budget_fields; }
std::span<const field<token_budget_settings>> token_budget_table() { return token_budget_fields; }

}  // namespace detail
}  // namespace resilience::config

namespace resilience::config {
namespace detail {

namespace {

constexpr std::string_view sections[] = {"retry_budget", "breaker",  "bulkhead", "rate_limiter",
                                         "adaptive_throttle", "timeout", "retry",    "hedging"};

// A kind of shared object: options read through `table`, the object built
// from them, or the previous snapshot's kept when its options are the same.
template <class Object, class O, std::size_t N, class Code = std::nullptr_t>
void read_shared(const json::object& doc, std::string_view section, const field<O> (&table)[N],
                 const document_reader& r, std::map<std::string, owned<Object>, std::less<>>& out,
                 const std::map<std::string, owned<Object>, std::less<>>* previous, json::object& written,
                 Code code = nullptr) {
  json::object section_out;
  for_each_entry(doc, section, r, [&](std::string name, const json::object& entry, const std::string& path) {
    O options{};
    read_fields(options, entry, path, table, r);
    json::value options_json = write_fields(options, table);
    std::shared_ptr<Object> object;
    if (previous)
      if (const auto kept = previous->find(name); kept != previous->end() && kept->second.options == options_json)
        object = kept->second.object;
    if (!object) {
      try {
        if constexpr (!std::is_same_v<Code, std::nullptr_t>) {
          if (r.hooks && r.hooks->*code) options = (r.hooks->*code)(name, std::move(options));
        }
        object = std::make_shared<Object>(options);
      } catch (const std::invalid_argument& e) {
        r.fail(path, setter_reason(e, path));
      }
    }
    section_out[name] = options_json;
    out.emplace(std::move(name), owned<Object>{std::move(object), std::move(options_json)});
  });
  if (!section_out.empty()) written[section] = std::move(section_out);
}

void read_budgets(const json::object& doc, const document_reader& r, shared_objects& out,
                  const shared_objects* previous, json::object& written) {
  json::object section_out;
  for_each_entry(doc, "retry_budget", r, [&](std::string name, const json::object& entry, const std::string& path) {
    const auto* kind_value = entry.if_contains("kind");
    const std::string_view kind = kind_value ? r.string_at(*kind_value, path + ".kind") : "ratio";
    json::object options_json;
    budget_entry made;
    if (kind == "ratio") {
      retry_ratio_budget_options o;
      read_fields(o, entry, path, ratio_budget_fields, r, budget_kind_key);
      options_json = write_fields(o, ratio_budget_fields);
      options_json["kind"] = "ratio";
      auto budget = std::make_shared<retry_ratio_budget>(o);
      made.ref = resilience::detail::budget_ref::to(*budget);
      made.object = std::move(budget);
    } else if (kind == "token") {
      token_budget_settings s;
      read_fields(s, entry, path, token_budget_fields, r, budget_kind_key);
      if (!entry.if_contains("max_tokens") || !entry.if_contains("token_ratio"))
        r.fail(path, "a token budget needs max_tokens and token_ratio");
      std::shared_ptr<retry_token_budget> budget;
      try {
        budget = std::make_shared<retry_token_budget>(s.max_tokens, s.token_ratio);
      } catch (const std::invalid_argument& e) {
        r.fail(path, setter_reason(e, path));
      }
      options_json = write_fields(s, token_budget_fields);
      options_json["kind"] = "token";
      made.ref = resilience::detail::budget_ref::to(*budget);
      made.object = std::move(budget);
    } else {
      r.fail(path + ".kind", "must be ratio or token");
    }
    made.options = options_json;
    if (previous)
      if (const auto kept = previous->budgets.find(name);
          kept != previous->budgets.end() && kept->second.options == made.options)
        made = kept->second;
    section_out[name] = std::move(options_json);
    out.budgets.emplace(std::move(name), std::move(made));
  });
  if (!section_out.empty()) written["retry_budget"] = std::move(section_out);
}

const resilience::detail::budget_ref& budget_named(const shared_objects& objects, const json::value& v,
                                                   const std::string& path, const document_reader& r) {
  const std::string_view name = r.string_at(v, path);
  const auto found = objects.budgets.find(name);
  if (found == objects.budgets.end()) r.fail(path, "no retry_budget named \"" + std::string(name) + "\"");
  return found->second.ref;
}

}  // namespace

void read_snapshot(std::string_view text, const shared_objects* previous, shared_objects& out, const code_hooks& hooks) {
  document_reader r{text, &hooks, {}};
  json::value root;
  read_document(text, root, r);
  const json::object& doc = root.get_object();
  std::vector<std::string_view> known_sections(std::begin(sections), std::end(sections));
  for (const auto s : http_section_names()) known_sections.push_back(s);
  for (const auto& [key, value] : doc) {
    bool known = false;
    for (const auto s : known_sections) known = known || s == std::string_view(key);
    if (!known) {
      std::string names;
      for (const auto s : known_sections) names += (names.empty() ? "" : ", ") + std::string(s);
      r.fail(std::string(key), "unknown section (known: " + names + ")");
    }
  }
  json::object& written = out.document;
  read_budgets(doc, r, out, previous, written);
  read_shared(doc, "breaker", breaker_fields, r, out.breakers, previous ? &previous->breakers : nullptr, written,
              &code_hooks::breaker);
  read_shared(doc, "bulkhead", bulkhead_fields, r, out.bulkheads, previous ? &previous->bulkheads : nullptr, written);
  read_shared(doc, "rate_limiter", rate_limiter_fields, r, out.rate_limiters,
              previous ? &previous->rate_limiters : nullptr, written);
  read_shared(doc, "adaptive_throttle", throttle_fields, r, out.throttles, previous ? &previous->throttles : nullptr,
              written);

  json::object timeouts;
  for_each_entry(doc, "timeout", r, [&](std::string name, const json::object& entry, const std::string& path) {
    const auto* limit = entry.if_contains("limit");
    if (!limit) r.fail(path + ".limit", "is required");
    std::optional<basic_timeout<>> t;
    try {
      t.emplace(r.duration_at(*limit, path + ".limit"));
    } catch (const config::error&) {
      throw;
    } catch (const std::invalid_argument& e) {
      r.fail(path + ".limit", setter_reason(e, path + ".limit"));
    }
    read_fields(*t, entry, path, timeout_fields, r, timeout_limit_key);
    json::object o = write_fields(*t, timeout_fields);
    o["limit"] = format_duration(t->limit());
    timeouts[name] = std::move(o);
    out.timeouts.emplace(std::move(name), std::move(*t));
  });
  if (!timeouts.empty()) written["timeout"] = std::move(timeouts);

  json::object retries;
  for_each_entry(doc, "retry", r, [&](std::string name, const json::object& entry, const std::string& path) {
    retry_policy p;
    read_fields(p, entry, path, retry_fields, r, budget_name_key);
    json::object o = write_fields(p, retry_fields);
    if (const auto* b = entry.if_contains("budget")) {
      p = p.budget(budget_named(out, *b, path + ".budget", r));
      o["budget"] = b->get_string();
    }
    retries[name] = std::move(o);
    out.retries.emplace(std::move(name), std::move(p));
  });
  if (!retries.empty()) written["retry"] = std::move(retries);

  json::object hedgings;
  for_each_entry(doc, "hedging", r, [&](std::string name, const json::object& entry, const std::string& path) {
    hedging_policy p;
    read_fields(p, entry, path, hedging_fields, r, budget_name_key);
    json::object o = write_fields(p, hedging_fields);
    if (const auto* b = entry.if_contains("budget")) {
      // The entry's budget_ref lives as long as the snapshot: a budget of budgets.
      p = p.budget(const_cast<resilience::detail::budget_ref&>(budget_named(out, *b, path + ".budget", r)));
      o["budget"] = b->get_string();
    }
    hedgings[name] = std::move(o);
    out.hedgings.emplace(std::move(name), std::move(p));
  });
  if (!hedgings.empty()) written["hedging"] = std::move(hedgings);

  read_http_sections(doc, r, previous, out);
}

}  // namespace detail

std::vector<std::string> document_keys() {
  using namespace detail;
  std::vector<std::string> keys;
  add_keys(keys, "retry_budget", ratio_budget_fields, budget_kind_key);
  add_keys(keys, "retry_budget", token_budget_fields);
  add_keys(keys, "breaker", breaker_fields);
  add_keys(keys, "bulkhead", bulkhead_fields);
  add_keys(keys, "rate_limiter", rate_limiter_fields);
  add_keys(keys, "adaptive_throttle", throttle_fields);
  add_keys(keys, "timeout", timeout_fields, timeout_limit_key);
  add_keys(keys, "retry", retry_fields, budget_name_key);
  add_keys(keys, "hedging", hedging_fields, budget_name_key);
  add_http_keys(keys);
  return keys;
}

snapshot::~snapshot() = default;

namespace {
template <class Map>
auto& entry(const Map& map, std::string_view kind, std::string_view name) {
  const auto found = map.find(name);
  if (found == map.end())
    throw std::out_of_range("config: no " + std::string(kind) + " named \"" + std::string(name) + "\"");
  return found->second;
}
}  // namespace

const retry_policy& snapshot::retry(std::string_view name) const { return entry(objects_->retries, "retry", name); }
const basic_timeout<>& snapshot::timeout(std::string_view name) const {
  return entry(objects_->timeouts, "timeout", name);
}
const hedging_policy& snapshot::hedging(std::string_view name) const {
  return entry(objects_->hedgings, "hedging", name);
}
circuit_breaker& snapshot::breaker(std::string_view name) const {
  return *entry(objects_->breakers, "breaker", name).object;
}
resilience::bulkhead& snapshot::bulkhead(std::string_view name) const {
  return *entry(objects_->bulkheads, "bulkhead", name).object;
}
resilience::rate_limiter& snapshot::rate_limiter(std::string_view name) const {
  return *entry(objects_->rate_limiters, "rate_limiter", name).object;
}
resilience::adaptive_throttle& snapshot::adaptive_throttle(std::string_view name) const {
  return *entry(objects_->throttles, "adaptive_throttle", name).object;
}
const resilience::detail::budget_ref& snapshot::budget(std::string_view name) const {
  return entry(objects_->budgets, "retry_budget", name).ref;
}
std::string snapshot::document_text() const { return boost::json::serialize(objects_->document); }

namespace {

// The interned names: every name_key and every entry's name, for the life
// of the process (names are few; a key must stay valid forever).
struct name_table {
  std::mutex guard;
  std::deque<std::string> names;  // stable addresses
  std::map<std::string_view, std::uint32_t, std::less<>> index;
};
name_table& names() {
  static name_table table;
  return table;
}

// Each entry by its name's key, for snapshot::find.
detail::entry_slots slots_of(const detail::shared_objects& o) {
  detail::entry_slots slots;
  const detail::slot_adder add = [&](detail::entry_kind kind, const std::string& name, const void* entry) {
    const std::uint32_t i = name_key(name).index();
    auto& of_kind = slots[static_cast<std::size_t>(kind)];
    if (of_kind.size() <= i) of_kind.resize(i + 1, nullptr);
    of_kind[i] = entry;
  };
  using k = detail::entry_kind;
  for (const auto& [name, p] : o.retries) add(k::retry, name, &p);
  for (const auto& [name, t] : o.timeouts) add(k::timeout, name, &t);
  for (const auto& [name, h] : o.hedgings) add(k::hedging, name, &h);
  for (const auto& [name, e] : o.breakers) add(k::breaker, name, e.object.get());
  for (const auto& [name, e] : o.bulkheads) add(k::bulkhead, name, e.object.get());
  for (const auto& [name, e] : o.rate_limiters) add(k::rate_limiter, name, e.object.get());
  for (const auto& [name, e] : o.throttles) add(k::adaptive_throttle, name, e.object.get());
  for (const auto& [name, e] : o.budgets) add(k::budget, name, &e.ref);
  detail::add_http_slots(o, add);
  return slots;
}

constexpr const char* kind_names[] = {"retry", "timeout", "hedging", "breaker", "bulkhead", "rate_limiter",
                                      "adaptive_throttle", "retry_budget", "http_client", "http_server", "upstream"};
static_assert(std::size(kind_names) == static_cast<std::size_t>(detail::entry_kind::count));

}  // namespace

name_key::name_key(std::string_view name) {
  name_table& t = names();
  const std::lock_guard lock(t.guard);
  if (const auto found = t.index.find(name); found != t.index.end()) {
    index_ = found->second;
    name_ = &t.names[index_];
    return;
  }
  index_ = static_cast<std::uint32_t>(t.names.size());
  name_ = &t.names.emplace_back(name);
  t.index.emplace(*name_, index_);
}

void snapshot::missing(kind which, const std::string& name) {
  throw std::out_of_range("config: no " + std::string(kind_names[static_cast<std::size_t>(which)]) + " named \"" + name +
                          "\"");
}

std::shared_ptr<const snapshot> parse(std::string_view text, std::string_view source, const snapshot* previous,
                                      std::uint64_t version, const code_hooks& hooks) {
  auto objects = std::make_unique<detail::shared_objects>();
  detail::read_snapshot(text, previous ? &snapshot_access::objects(*previous) : nullptr, *objects, hooks);
  auto slots = slots_of(*objects);
  auto s = snapshot_access::make();
  snapshot_access::fill(*s, version, std::string(source), std::move(objects), std::move(slots));
  return s;
}

live_config::live_config(std::string_view text, std::string_view source, code_hooks hooks)
    : hooks_(std::move(hooks)), current_(parse(text, source, nullptr, 1, hooks_)) {}

void live_config::on_reload(std::function<void(const reload_event&)> f) {
  const std::lock_guard lock(reloading_);
  on_reload_ = std::move(f);
}

void live_config::events(event_sink& sink) {
  const std::lock_guard lock(reloading_);
  events_ = &sink;
}

reload_event live_config::reload(std::string_view text, std::string_view source) {
  const std::lock_guard lock(reloading_);
  const auto running = current();
  reload_event e;
  e.source = std::string(source);
  try {
    auto next = parse(text, source, running.get(), running->version() + 1, hooks_);
    e.accepted = true;
    e.version = next->version();
    {
      const std::lock_guard swap(swapping_);
      current_.swap(next);
    }
    next.reset();  // the old snapshot: freed here if no call holds it, outside the lock
    accepted_.fetch_add(1, std::memory_order_relaxed);
  } catch (const error& refused) {
    e.version = running->version();
    e.reason = refused.what();
    rejected_.fetch_add(1, std::memory_order_relaxed);
  }
  report(e);
  return e;
}

reload_event live_config::refuse(std::string_view source, std::string reason) {
  const std::lock_guard lock(reloading_);
  reload_event e;
  e.source = std::string(source);
  e.version = current()->version();
  e.reason = std::move(reason);
  rejected_.fetch_add(1, std::memory_order_relaxed);
  report(e);
  return e;
}

void live_config::report(const reload_event& e) {
  if (events_) events_->on_event(event(e.accepted ? event_kind::config_reloaded : event_kind::config_rejected));
  if (on_reload_) on_reload_(e);
}

}  // namespace resilience::config
