// resilience/properties.hpp — per-call data that the op and every stage
// share, under typed keys.
//
//   inline constexpr resilience::property_key<bool> request_sent{"request_sent"};
//   inline constexpr resilience::property_key<bool> idempotent{"idempotent"};
//
//   resilience::properties props;           // the call's own, in the caller's frame
//   props.set(idempotent, true);
//   co_await call_backend(op, resilience::context{}.with(props));
//
//   // The op marks what it did:   ctx.set(request_sent, true);
//   // a classifier reads it:
//   //   [](const auto& o, const resilience::context& ctx) {
//   //     return o.failed() && (ctx.value_or(idempotent, false) || !ctx.value_or(request_sent, false)); }
//
// A key is an object with static storage: its address is its identity, its
// type the value's type, its name for people. Values that are small and
// trivially copyable (flags, counts, durations) are kept inline, so setting
// them allocates nothing; others take one allocation each. A call with no
// properties pays nothing: the context carries a null pointer.
//
// The properties outlive the call's stages (they are the caller's), so what
// the op marked survives a timeout or a deadline that ended it, for the
// classifier and for the caller. One call at a time: the op and the stages
// of a call run on its executor, one after another; sharing one properties
// object between concurrent calls is a data race.
#pragma once

#include <array>
#include <cstddef>
#include <cstring>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace resilience {

template <class T>
class property_key {
 public:
  using value_type = T;

  explicit constexpr property_key(const char* name) noexcept : name_(name) {}
  // A copy would be another key: the address is the identity.
  property_key(const property_key&) = delete;
  property_key& operator=(const property_key&) = delete;

  constexpr const char* name() const noexcept { return name_; }

 private:
  const char* name_;
};

class properties {
 public:
  static constexpr std::size_t inline_slots = 4;
  static constexpr std::size_t inline_bytes = 16;

  properties() noexcept = default;
  // Stages and ops refer to it through the context: it stays where it is.
  properties(const properties&) = delete;
  properties& operator=(const properties&) = delete;
  ~properties() { clear(); }

  // Sets or replaces the value under `key`.
  template <class T, class V>
  void set(const property_key<T>& key, V&& value)
    requires std::is_constructible_v<T, V&&>
  {
    if constexpr (fits_inline<T>) {
      slot* s = find_slot(&key);
      // Set while every slot was taken: it stays on the heap.
      if (!s && find_node<T>(&key) == nullptr) s = free_slot();
      if (s) {
        const T v(std::forward<V>(value));
        s->key = &key;
        std::memcpy(s->bytes, &v, sizeof(T));
        return;
      }
    }
    if (auto* n = find_node<T>(&key)) {
      n->value = T(std::forward<V>(value));
      return;
    }
    heap_ = new typed_node<T>(&key, heap_, std::forward<V>(value));
  }

  // The value under `key`, or null; valid until it is set, erased or
  // cleared.
  template <class T>
  const T* find(const property_key<T>& key) const noexcept {
    if constexpr (fits_inline<T>) {
      if (const slot* s = find_slot(&key)) return std::launder(reinterpret_cast<const T*>(s->bytes));
    }
    if (const auto* n = find_node<T>(&key)) return &n->value;
    return nullptr;
  }

  template <class T>
  T value_or(const property_key<T>& key, T fallback) const {
    const T* v = find(key);
    return v ? *v : std::move(fallback);
  }

  template <class T>
  bool contains(const property_key<T>& key) const noexcept {
    return find(key) != nullptr;
  }

  template <class T>
  bool erase(const property_key<T>& key) noexcept {
    if constexpr (fits_inline<T>) {
      if (slot* s = find_slot(&key)) {
        s->key = nullptr;
        return true;
      }
    }
    for (node** p = &heap_; *p; p = &(*p)->next) {
      if ((*p)->key == &key) {
        node* n = *p;
        *p = n->next;
        n->destroy(n);
        return true;
      }
    }
    return false;
  }

  std::size_t size() const noexcept {
    std::size_t n = 0;
    for (const slot& s : inline_) n += s.key != nullptr;
    for (const node* h = heap_; h; h = h->next) ++n;
    return n;
  }
  bool empty() const noexcept { return size() == 0; }

  // Replaces these properties with copies of `other`'s (a hedge's own set,
  // see hedging.hpp). Throws std::invalid_argument, leaving these empty, when
  // a value's type cannot be copied.
  void copy_from(const properties& other) {
    if (this == &other) return;
    clear();
    inline_ = other.inline_;
    node** tail = &heap_;
    for (const node* h = other.heap_; h; h = h->next) {
      if (!h->clone) {
        clear();
        throw std::invalid_argument("properties::copy_from: a value's type cannot be copied");
      }
      *tail = h->clone(h);
      tail = &(*tail)->next;
    }
  }

  // Exchanges the contents of two sets; allocates nothing.
  void swap(properties& other) noexcept {
    std::swap(inline_, other.inline_);
    std::swap(heap_, other.heap_);
  }

  void clear() noexcept {
    for (slot& s : inline_) s.key = nullptr;
    while (heap_) {
      node* n = heap_;
      heap_ = n->next;
      n->destroy(n);
    }
  }

 private:
  template <class T>
  static constexpr bool fits_inline = std::is_trivially_copyable_v<T> && sizeof(T) <= inline_bytes &&
                                      alignof(T) <= alignof(std::max_align_t) && alignof(T) <= 16;

  struct slot {
    const void* key = nullptr;
    alignas(16) unsigned char bytes[inline_bytes];
  };
  struct node {
    const void* key;
    node* next;
    void (*destroy)(node*) noexcept;
    node* (*clone)(const node*);  // null when the value cannot be copied
  };
  template <class T>
  struct typed_node : node {
    template <class V>
    typed_node(const void* k, node* n, V&& v)
        : node{k, n, &destroy_typed, clone_fn()}, value(std::forward<V>(v)) {}
    static void destroy_typed(node* n) noexcept { delete static_cast<typed_node*>(n); }
    static node* (*clone_fn())(const node*) {
      if constexpr (std::is_copy_constructible_v<T>) {
        return [](const node* n) -> node* {
          return new typed_node(n->key, nullptr, static_cast<const typed_node*>(n)->value);
        };
      } else {
        return nullptr;
      }
    }
    T value;
  };

  slot* find_slot(const void* key) noexcept {
    for (slot& s : inline_)
      if (s.key == key) return &s;
    return nullptr;
  }
  const slot* find_slot(const void* key) const noexcept {
    for (const slot& s : inline_)
      if (s.key == key) return &s;
    return nullptr;
  }
  slot* free_slot() noexcept { return find_slot(nullptr); }
  template <class T>
  typed_node<T>* find_node(const void* key) const noexcept {
    for (node* h = heap_; h; h = h->next)
      if (h->key == key) return static_cast<typed_node<T>*>(h);
    return nullptr;
  }

  std::array<slot, inline_slots> inline_{};
  node* heap_ = nullptr;
};

}  // namespace resilience
