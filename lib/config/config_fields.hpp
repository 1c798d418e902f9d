// The document's reader and the one table of keys per options type: each
// key reads through the C++ setter (which checks it) and writes back through
// the getter, so that defaults and ranges live in the options alone.
#pragma once

#include <resilience/config.hpp>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace resilience::config::detail {

// What the document's values are read through: typed access that fails with
// the value's path and place.
struct document_reader {
  std::string_view text;
  const code_hooks* hooks = nullptr;
  std::map<std::string, std::size_t, std::less<>> positions;  // path -> offset of its value

  std::pair<std::uint32_t, std::uint32_t> line_column(std::size_t offset) const;
  [[noreturn]] void fail(const std::string& path, std::string reason) const;

  std::string_view string_at(const boost::json::value& v, const std::string& path) const;
  bool bool_at(const boost::json::value& v, const std::string& path) const;
  double number_at(const boost::json::value& v, const std::string& path) const;
  std::uint64_t unsigned_at(const boost::json::value& v, const std::string& path, std::uint64_t max) const;
  duration duration_at(const boost::json::value& v, const std::string& path) const;
  const boost::json::object& object_at(const boost::json::value& v, const std::string& path) const;
  // Fails at the first key of `object` not in `known`, listing them.
  void only_keys(const boost::json::object& object, const std::string& path,
                 std::span<const std::string_view> known) const;
};

using key_list = std::span<const std::string_view>;

// A setter's std::invalid_argument as a reason under a path that names the option.
std::string setter_reason(const std::exception& e, std::string_view path);

// Parses `text` into `out` (an object), filling the reader's positions;
// throws config::error for anything not JSON, a duplicate key, a non-object.
std::size_t read_document(std::string_view text, boost::json::value& out, document_reader& reader);

// One key of options type O: read (through the setter) and write (from the getter).
template <class O>
struct field {
  std::string_view key;
  void (*read)(O&, const boost::json::value&, const std::string& path, const document_reader&);
  boost::json::value (*write)(const O&);
  key_list subkeys{};  // an object's keys (docs/config.md lists them under this key)
};

// A setter's value type read from JSON, and written back.
template <class V>
V read_value(const boost::json::value& v, const std::string& path, const document_reader& r) {
  if constexpr (std::is_same_v<V, bool>) {
    return r.bool_at(v, path);
  } else if constexpr (std::is_same_v<V, duration>) {
    return r.duration_at(v, path);
  } else if constexpr (std::is_integral_v<V>) {
    return static_cast<V>(r.unsigned_at(v, path, std::numeric_limits<V>::max()));
  } else if constexpr (std::is_floating_point_v<V>) {
    return r.number_at(v, path);
  } else {
    static_assert(sizeof(V) == 0, "no JSON form for this option's type");
  }
}
template <class V>
boost::json::value write_value(const V& v) {
  if constexpr (std::is_same_v<V, duration>) {
    return boost::json::value(format_duration(v));
  } else {
    return boost::json::value(v);
  }
}

// A key whose setter takes one value and whose getter returns it:
// get(const O&) -> V, set(const O&, V) -> O. Both stateless lambdas.
template <class O, class Get, class Set>
constexpr field<O> option(std::string_view key, Get, Set) {
  using V = std::remove_cvref_t<std::invoke_result_t<Get, const O&>>;
  return {key,
          [](O& o, const boost::json::value& v, const std::string& path, const document_reader& r) {
            const V value = read_value<V>(v, path, r);
            try {
              o = Set{}(std::as_const(o), value);
            } catch (const std::invalid_argument& e) {
              r.fail(path, setter_reason(e, path));
            }
          },
          [](const O& o) { return write_value(Get{}(o)); }};
}

// A key with a reader and writer of its own (an object, a choice of names).
template <class O, class Read, class Write>
constexpr field<O> custom(std::string_view key, Read, Write, key_list subkeys = {}) {
  return {key,
          [](O& o, const boost::json::value& v, const std::string& path, const document_reader& r) {
            try {
              Read{}(o, v, path, r);
            } catch (const config::error&) {
              throw;
            } catch (const std::invalid_argument& e) {
              r.fail(path, setter_reason(e, path));
            }
          },
          [](const O& o) { return boost::json::value(Write{}(o)); },
          subkeys};
}

// Reads `object` into `o` key by key, in the table's order (some setters
// depend on others); an unknown key is an error listing the known ones.
template <class O>
using field_table = std::type_identity_t<std::span<const field<O>>>;

template <class O>
void read_fields(O& o, const boost::json::object& object, const std::string& path, field_table<O> table,
                 const document_reader& r, key_list also_known = {}) {
  std::vector<std::string_view> known;
  for (const auto& f : table) known.push_back(f.key);
  known.insert(known.end(), also_known.begin(), also_known.end());
  r.only_keys(object, path, known);
  for (const auto& f : table)
    if (const auto* value = object.if_contains(f.key)) f.read(o, *value, path + "." + std::string(f.key), r);
}

template <class O>
boost::json::object write_fields(const O& o, field_table<O> table) {
  boost::json::object out;
  for (const auto& f : table) {
    boost::json::value v = f.write(o);
    if (!v.is_null()) out[f.key] = std::move(v);
  }
  return out;
}

// The entries of a section: f(name, its object, its path).
template <class F>
void for_each_entry(const boost::json::object& doc, std::string_view section, const document_reader& r, F f) {
  const auto* value = doc.if_contains(section);
  if (!value) return;
  const std::string path(section);
  for (const auto& [name, entry] : r.object_at(*value, path)) {
    const std::string entry_path = path + "." + std::string(name);
    if (name.empty()) r.fail(entry_path, "a policy needs a name");
    f(std::string(name), r.object_at(entry, entry_path), entry_path);
  }
}

// "section.key" and "section.key.inner" for document_keys(); `extra`: keys
// an entry takes beyond its table.
template <class O, std::size_t N>
void add_keys(std::vector<std::string>& out, std::string_view section, const field<O> (&table)[N],
              key_list extra = {}) {
  const std::string prefix = std::string(section) + ".";
  for (const auto k : extra) out.push_back(prefix + std::string(k));
  for (const auto& f : table) {
    out.push_back(prefix + std::string(f.key));
    for (const auto sub : f.subkeys) out.push_back(prefix + std::string(f.key) + "." + std::string(sub));
  }
}

// A key's getter and setter, as stateless lambdas.
#define RESILIENCE_OPTION(O, key, getter, setter) \
  option<O>(                                     \
      key, [](const O& o) { return o.getter; }, [](const O& o, auto v) { return o.setter(v); })

// -- what the core sections (snapshot.cpp) lend to sections that nest them --

inline constexpr std::string_view backoff_keys[] = {"shape", "delay", "initial", "step", "factor", "cap"};
inline constexpr std::string_view budget_kind_key[] = {"kind"};  // ratio (the default) or token

// A backoff schedule: {"shape": ..., and that shape's numbers}.
backoff read_backoff(const boost::json::value& v, const std::string& path, const document_reader& r);
boost::json::value write_backoff(const backoff& b);
jitter jitter_named(std::string_view name);

// gRFC A6's two numbers, as a document gives them.
struct token_budget_settings {
  std::uint32_t max_tokens = 0;
  double token_ratio = 0;
  token_budget_settings with_max_tokens(std::uint32_t n) const { return {n, token_ratio}; }
  token_budget_settings with_token_ratio(double r) const { return {max_tokens, r}; }
};

std::span<const field<breaker_options>> breaker_table();
std::span<const field<adaptive_throttle_options>> throttle_table();
std::span<const field<retry_ratio_budget_options>> ratio_budget_table();
std::span<const field<token_budget_settings>> token_budget_table();

struct shared_objects;

// The sections of the HTTP library (http_sections.cpp), or none when it is
// not built (no_http_sections.cpp): their names, their keys, and their reader,
// which runs after the core sections.
key_list http_section_names();
void add_http_keys(std::vector<std::string>& out);
// Each http_client and http_server entry, for the snapshot's name_key slots.
using slot_adder = std::function<void(entry_kind, const std::string& name, const void* entry)>;
void add_http_slots(const shared_objects& objects, const slot_adder& add);
// The HTTP sections' live state for the status page: each upstream's
// replicas (ejected, in flight, latency) under "upstreams".
void add_http_status(const shared_objects& objects, boost::json::object& out);
void read_http_sections(const boost::json::object& doc, const document_reader& r, const shared_objects* previous,
                        shared_objects& out);

}  // namespace resilience::config::detail
