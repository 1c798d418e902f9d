// resilience/http/impl/client_upstream.hpp — the client's calls to an
// upstream's replicas (upstream.hpp): the route its attempts take, what
// they tell the upstream, and the work the upstream asks for in the
// background (a probe of an ejected replica's connection, a resolution of
// its name). Included at the end of resilience/http/impl/client.hpp; not to
// be included on its own.
#pragma once

namespace resilience::http {

namespace detail {

// How an attempt on a replica ended, as outlier detection counts it (Envoy
// without split_external_local_origin_errors): an answer by its status; a
// refusal here, a cancellation or the caller's deadline before anything
// was sent says nothing of the replica; any other failure is the
// replica's own (refused, reset, timed out).
template <class T>
replica_outcome replica_outcome_of(const outcome<T>& out, const context& ctx) {
  if (out.cancelled()) return replica_outcome::none;
  if (const auto* r = http::detail::response_of(out)) {
    const unsigned status = r->result_int();
    if (status >= 502 && status <= 504) return replica_outcome::gateway_error;
    return status >= 500 ? replica_outcome::server_error : replica_outcome::success;
  }
  const error_code ec = out.error();
  if (!ec || reached_no_server(ec)) return replica_outcome::none;
  if (ec == error::deadline_exceeded && !ctx.value_or(request_may_have_been_sent, false)) return replica_outcome::none;
  return replica_outcome::local_origin;
}

// A probe of an ejected replica's connection (upstream.hpp), and a
// resolution of the upstream's name: background work that holds the
// upstream, not the client. A frame destroyed before it reported (its
// io_context gone) leaves the upstream free to start another.
struct unfinished_background {
  std::function<void()> abandon;
  ~unfinished_background() {
    if (abandon) abandon();
  }
};

// Starts that work on `executor`, finished or not as it goes. Compiled in
// the library, not here: GCC 12 at -O2 and above puts the frame functions of
// co_spawn's entry point in the COMDAT group of the template it was inlined
// into, and a program instantiating that template too (any user of the
// client) keeps its own copy of the group while the library's data still
// refers to the discarded one: the link fails ("defined in discarded
// section").
void spawn_background(const boost::asio::any_io_executor& executor, boost::asio::awaitable<void> work);

template <class Clock>
boost::asio::awaitable<void> probe_replica(std::shared_ptr<upstream_core> core, std::shared_ptr<replica> r,
                                           Clock clock, duration bound) {
  namespace asio = boost::asio;
  using tcp = asio::ip::tcp;
  unfinished_background unfinished{[&core, &r] { core->probe_abandoned(*r); }};
  bool connected = false;
  try {
    const auto ex = co_await asio::this_coro::executor;
    const endpoint& to = r->to;
    connected = co_await basic_timeout<Clock>(bound, clock)([&]() -> asio::awaitable<bool> {
      tcp::socket socket(ex);
      error_code ec;
      const auto address = asio::ip::make_address(to.address.empty() ? to.host : to.address, ec);
      if (!ec) {
        std::tie(ec) = co_await socket.async_connect(tcp::endpoint(address, to.port), asio::as_tuple(asio::use_awaitable));
      } else {
        tcp::resolver resolver(ex);
        auto [rec, results] =
            co_await resolver.async_resolve(to.host, std::to_string(to.port), asio::as_tuple(asio::use_awaitable));
        if (rec) co_return false;
        tcp::endpoint reached;
        std::tie(ec, reached) = co_await asio::async_connect(socket, results, asio::as_tuple(asio::use_awaitable));
      }
      co_return !ec;
    });
  } catch (...) {
    connected = false;  // a bound that ran out, a cancellation: not connected
  }
  unfinished.abandon = nullptr;
  core->probed(*r, connected, clock.now());
}

template <class Clock>
boost::asio::awaitable<void> resolve_replicas(std::shared_ptr<upstream_core> core, Clock clock, duration bound) {
  namespace asio = boost::asio;
  using tcp = asio::ip::tcp;
  unfinished_background unfinished{[&core] { core->resolution_abandoned(); }};
  std::vector<std::string> addresses;
  try {
    const endpoint& name = *core->options().resolved_name();
    const auto ex = co_await asio::this_coro::executor;
    tcp::resolver resolver(ex);
    auto [ec, results] = co_await basic_timeout<Clock>(bound, clock)(
        [&]() -> asio::awaitable<std::tuple<error_code, tcp::resolver::results_type>> {
          co_return co_await resolver.async_resolve(name.host, std::to_string(name.port),
                                                    asio::as_tuple(asio::use_awaitable));
        });
    if (!ec) {
      for (const auto& entry : results) {
        std::string a = entry.endpoint().address().to_string();
        if (std::find(addresses.begin(), addresses.end(), a) == addresses.end()) addresses.push_back(std::move(a));
      }
    }
  } catch (...) {
    addresses.clear();  // resolved to nothing: the set stays as it is
  }
  unfinished.abandon = nullptr;
  core->resolved(addresses, clock.now());
}

}  // namespace detail

template <resilience::clock Clock>
template <class ResBody, class Held>
auto basic_client<Clock>::call_replicas(std::shared_ptr<detail::upstream_core> core, Held held, context parent,
                                        request_options options) -> boost::asio::awaitable<result<ResBody>> {
  // A name not resolved yet: its first call resolves it (later ones are
  // resolved again in the background).
  if (core->awaiting_resolution()) co_await detail::resolve_replicas(core, clock_, options_.pool().resolve_timeout());
  upstream_route route;
  route.key = "upstream:" + core->name();
  route.core = std::move(core);
  // A named endpoint, not a temporary: with `endpoint{}` here g++ 12 frees
  // the callee's copy of the string from this frame (found by memcheck).
  endpoint per_replica;
  co_return co_await call<ResBody>(std::move(per_replica), std::move(held), parent, options, &route);
}

template <resilience::clock Clock>
template <class Request>
error_code basic_client<Clock>::route_attempt(call_target<Request>& target, const context& ctx,
                                              const boost::asio::any_io_executor& executor, bool untried_only) {
  upstream_route& route = *target.route;
  const time_point now = clock_.now();
  detail::upstream_news news;
  auto picked = route.core->pick(now, {route.tried.data(), route.tried_count}, news);
  report_upstream(news, route.core, ctx, executor);
  if (!picked) return error::no_replica;
  const auto tried_end = route.tried.begin() + route.tried_count;
  if (untried_only && std::find(route.tried.begin(), tried_end, picked->id) != tried_end) {
    detail::upstream_news ignored;
    route.core->finished(*picked, detail::replica_outcome::none, {}, now, ignored);
    return error::no_replica;
  }
  if (route.tried_count < route.tried.size()) route.tried[route.tried_count++] = picked->id;
  route.attempt = ctx.attempt;
  route.current = std::move(picked);
  const endpoint& to = route.current->to;
  target.breaker = breakers_.breaker_for(route.current->key, now);
  target.throttle = throttles_ ? throttles_->for_key(route.current->key, now, [this] {
    return std::make_shared<resilience::detail::adaptive_throttle_core>(*options_.adaptive_throttle());
  }) : nullptr;
  if (route.tagged) route.tagged->retag(route.current->key);
  if (!route.host_given) target.req.set(boost::beast::http::field::host, to.authority());
  target.to = &to;
  target.key = &route.current->key;
  return {};
}

template <resilience::clock Clock>
void basic_client<Clock>::report_upstream(detail::upstream_news& news,
                                          const std::shared_ptr<detail::upstream_core>& core, const context& ctx,
                                          const boost::asio::any_io_executor& executor) {
  for (const auto& item : news.items) {
    event e{item.kind};
    e.host = item.host;
    e.delay = item.delay;
    ctx.report(e);
  }
  // The background work holds the upstream, not the client: it outlives
  // neither its io_context nor anything it refers to.
  for (auto& r : news.probes)
    detail::spawn_background(executor,
                             detail::probe_replica(core, std::move(r), clock_, options_.attempt_timeout()));
  if (news.resolve)
    detail::spawn_background(executor, detail::resolve_replicas(core, clock_, options_.pool().resolve_timeout()));
}

template <resilience::clock Clock>
template <class T>
void basic_client<Clock>::report_replica(upstream_route& route, const outcome<T>& out, time_point start,
                                         const context& ctx, const boost::asio::any_io_executor& executor) {
  if (!route.current) return;
  const time_point now = clock_.now();
  detail::upstream_news news;
  route.core->finished(*route.current, detail::replica_outcome_of(out, ctx), now - start, now, news);
  report_upstream(news, route.core, ctx, executor);
}

}  // namespace resilience::http
