// The document's reader and the one table of keys per options type: each
// key reads through the C++ setter (which checks it) and writes back through
// the getter, so that defaults and ranges live in the options alone.
#pragma once

#include <resilience/config.hpp>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <map>
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
template <class O, std::size_t N>
void read_fields(O& o, const boost::json::object& object, const std::string& path, const field<O> (&table)[N],
                 const document_reader& r, key_list also_known = {}) {
  std::vector<std::string_view> known;
  for (const auto& f : table) known.push_back(f.key);
  known.insert(known.end(), also_known.begin(), also_known.end());
  r.only_keys(object, path, known);
  for (const auto& f : table)
    if (const auto* value = object.if_contains(f.key)) f.read(o, *value, path + "." + std::string(f.key), r);
}

template <class O, std::size_t N>
boost::json::object write_fields(const O& o, const field<O> (&table)[N]) {
  boost::json::object out;
  for (const auto& f : table) {
    boost::json::value v = f.write(o);
    if (!v.is_null()) out[f.key] = std::move(v);
  }
  return out;
}

}  // namespace resilience::config::detail
