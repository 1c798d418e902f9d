// resilience/http/impl/client.hpp — the coroutines of basic_client: a call
// (the retry around attempts), an attempt (the breaker's permit, a
// connection); the exchange on a connection is in client_exchange.hpp.
// Included at the end of resilience/http/client.hpp, which declares them and
// states the contract; not to be included on its own.
#pragma once

namespace resilience::http {

template <resilience::clock Clock>
client_options basic_client<Clock>::checked(client_options o) {
  if (o.attempt_timeout() > o.total_timeout())
    throw std::invalid_argument(
        "http::client_options::attempt_timeout: must not be longer than total_timeout (it could never fire)");
  if ((o.deadline_header() || o.deadline_margin_given()) && o.deadline_margin() >= o.attempt_timeout())
    throw std::invalid_argument(
        "http::client_options::deadline_margin: must be shorter than attempt_timeout (every attempt would tell "
        "the server it has no time left)");
  return o;
}

template <resilience::clock Clock>
template <class Request>
void basic_client<Clock>::checked(const destination& to, const Request& req) {
  if (const endpoint* single = to.single()) single->validate();
  if (req.method() == boost::beast::http::verb::connect)
    throw std::invalid_argument("http::client::request: CONNECT is not supported (it opens a tunnel)");
}

// Not a coroutine, and by reference: the request and the endpoint are moved
// once, into the call's frame.
template <resilience::clock Clock>
template <class ResBody, class Held>
auto basic_client<Clock>::call_to(destination&& to, Held&& held, const context& parent, request_options options)
    -> boost::asio::awaitable<result<ResBody>> {
  using H = std::remove_cvref_t<Held>;
  if (endpoint* single = to.single())
    return call<ResBody, H>(std::move(*single), std::forward<Held>(held), parent, options, nullptr);
  return call_replicas<ResBody, H>(to.shared_replicas(), std::forward<Held>(held), parent, options);
}

template <resilience::clock Clock>
auto basic_client<Clock>::budget_for(const std::string& key, time_point now) -> std::shared_ptr<host_budget> {
  return budgets_->for_key(key, now, [this] {
    return std::visit(
        [this](const auto& settings) -> std::shared_ptr<host_budget> {
          if constexpr (std::is_same_v<std::remove_cvref_t<decltype(settings)>, std::monostate>) {
            return nullptr;
          } else {
            return std::make_shared<host_budget>(options_, retry_, clock_, settings);
          }
        },
        options_.budget_per_host());
  });
}


// Its frame must stay within Asio's recycling limit (1,020 bytes, checked
// by tests/http_client_frames_tests.cpp): the caller's context is changed in
// place rather than copied, and the call's tally, breaker and throttle live
// in its target.
template <resilience::clock Clock>
template <class ResBody, class Held>
boost::asio::awaitable<typename basic_client<Clock>::template result<ResBody>> basic_client<Clock>::call(
    endpoint to, Held held, context ctx, request_options options, upstream_route* route) {
  namespace bhttp = boost::beast::http;
  auto& req = http::detail::request_of(held);
  // An upstream's replicas each get their own Host, unless the caller set one.
  if (route) {
    route->host_given = http::detail::holds(req, bhttp::field::host);
  } else if (!http::detail::holds(req, bhttp::field::host)) {
    req.set(bhttp::field::host, to.authority());
  }
  req.prepare_payload();
  // The caller's context goes on (its deadline, its sink, a deadline an
  // outer stage watches), with the call's own marks: its classifier must
  // read this request's, not those of another call made meanwhile under
  // the same caller's context.
  properties* const caller_props = ctx.props;
  properties props;
  props.set(http::idempotent, options.idempotent().value_or(ctx.value_or(http::idempotent, is_idempotent(req))));
  ctx.props = &props;
  ctx.attempt = 1;
  ctx.max_attempts = 1;
  ctx.clock = nullptr;  // the retry puts the client's own clock here
  // The total bound: the retry never waits past it, and each attempt's own
  // bound ends there at the latest.
  const time_point now = clock_.now();
  ctx.deadline = std::min({ctx.deadline, options.deadline(), saturating_add(now, options_.total_timeout())});
  // An upstream's key (its name) keys its retry budget; its replicas' keys
  // their breakers, throttles and holds, attempt by attempt.
  const std::string key = route ? route->key : to.key();
  detail::host_tagged_events tagged{options_.events() ? options_.events() : ctx.events, key};
  ctx.events = tagged.target() ? &tagged : nullptr;
  if (route) route->tagged = &tagged;
  const auto host_budget = budgets_ ? budget_for(key, now) : nullptr;
  const auto& policy = host_budget ? host_budget->policy : retry_;
  call_target<std::remove_reference_t<decltype(req)>> target{&to,     &key, req, nullptr, nullptr, {},
                                                             route, &policy.budget()};
  if (!route) {
    target.breaker = breakers_.breaker_for(key, now);
    if (throttles_)
      target.throttle = throttles_->for_key(key, now, [this] {
        return std::make_shared<resilience::detail::adaptive_throttle_core>(*options_.adaptive_throttle());
      });
  }
  // One pointer: attempts' frames stay small enough for Asio to recycle.
  auto attempt_op = [&target, this](const context& c) { return attempt<ResBody>(target, c); };
  auto res = co_await co_retry(std::move(attempt_op), std::cref(policy), ctx);
  // Cancelled at or past the deadline: by the caller's bound for that same
  // deadline (a server's handler bound), which is the deadline, not a stop.
  if (res.has_error() && res.error() == boost::asio::error::operation_aborted && ctx.has_deadline() &&
      clock_.now() >= ctx.deadline)
    res = error_code(error::deadline_exceeded);
  if (const auto& report = options_.on_call_finished()) {
    report(client_call_event{target.counts.attempts, res.has_error() ? res.error() : error_code{},
                             res.has_value() ? res->result_int() : 0u, req.method(), target.to,
                             clock_.now() - now, target.counts.held,
                             route ? route->core->name() : std::string_view{}});
  }
  // The caller learns whether this request may have reached the server (a
  // stage around it must not repeat a POST that did), added to what its
  // other calls left. Each attempt clears the mark for itself: after more
  // than one, an earlier one may have been sent.
  if (caller_props && (target.counts.attempts > 1 || ctx.value_or(request_may_have_been_sent, false)))
    caller_props->set(request_may_have_been_sent, true);
  co_return res;
}

template <resilience::clock Clock>
template <class ResBody, class Request>
auto basic_client<Clock>::attempt(call_target<Request>& target, const context& ctx)
    -> boost::asio::awaitable<result<ResBody>> {
  namespace asio = boost::asio;
  using T = result<ResBody>;
  const auto caller = co_await asio::this_coro::cancellation_state;
  if (caller.cancelled() != asio::cancellation_type::none) co_return error_code(asio::error::operation_aborted);
  ctx.set(request_may_have_been_sent, false);
  const auto executor = co_await asio::this_coro::executor;
  // An upstream's attempt goes to a replica its call has not tried, while
  // there is one.
  if (target.route) {
    if (const error_code none = route_attempt(target, ctx, executor, false)) co_return none;
  }
  // Once more from the top when the attempt finds its host held after it
  // took its permit (a 429 came while it waited for a connection): the
  // permit and the connection go back, and the wait is the call's, not the
  // attempt's, so it spends none of attempt_timeout().
  for (;;) {
    // Another call's Retry-After from this host (a later one may extend it
    // during the wait: looked at again after it).
    // One reading of the clock for both, unless the attempt waited.
    time_point start = clock_.now();
    if (holds_.find(*target.key, start)) {
      if (const error_code held = co_await wait_out_holds(*target.key, ctx, target.counts)) co_return held;
      start = clock_.now();
    }
    // The throttle first: one it admits that the breaker then refuses counts
    // for nothing, as it reached no server.
    error_code refused;
    breaker_permit permit;
    if (target.throttle && !resilience::detail::throttle_admits(*target.throttle, resilience::detail::coarse_now(clock_), ctx)) {
      refused = error::throttled;
    } else if (!(permit = target.breaker->try_acquire(ctx))) {
      refused = error::circuit_open;
    }
    // A replica refused here (its breaker, its throttle): another one, if
    // the call has one left to try.
    if (refused && target.route) {
      report_replica(*target.route, outcome<T>::from_error(refused), clock_.now(), ctx, executor);
      if (!route_attempt(target, ctx, executor, true)) continue;
    }
    if (refused) {
      // Throwing off before the refusal's own frame is entered: a hook that
      // cancelled the caller must not turn the refusal into a throw.
      const bool throws = co_await asio::this_coro::throw_if_cancelled();
      co_await asio::this_coro::throw_if_cancelled(false);
      co_return co_await refuse(refused, throws);
    }
    target.counts.attempts = ctx.attempt;

    // attempt_timeout(), or the call's deadline if that comes first.
    const time_point own = saturating_add(start, options_.attempt_timeout());
    const bool deadline_first = ctx.deadline <= own;
    const bounded_by bound{deadline_first ? ctx.deadline : own,
                           deadline_first ? error::deadline_exceeded : error::timeout};

    std::optional<outcome<T>> out;
    bool held = false;  // found its host held before sending: from the top
    try {
      // A request that may be sent twice takes an idle connection without
      // the peek (a syscall on every reuse): if the server had closed it, the
      // exchange fails before a byte of a response arrives, and the request
      // goes once more, on a connection checked or new, within this attempt.
      const bool replayable = ctx.value_or(http::idempotent, false);
      const asio::execution_context* const on = &asio::query(executor, asio::execution::context);
      time_point now = start;
      for (bool resend = false;; resend = true) {
        if (resend) {
          // Once more, on a connection looked at, within what is left of the attempt.
          now = clock_.now();
          if (caller.cancelled() != asio::cancellation_type::none) break;
          if (now >= bound.at) {
            out.emplace(outcome<T>::from_error(bound.reason));
            resilience::detail::report_expiry(ctx, bound.reason);
            break;
          }
        }
        std::optional<connection_lease> lease = pool_.reuse(*target.key, now, on, resend || !replayable);
        const bool unchecked = lease && !resend && replayable;
        if (!lease) {
          // No idle connection: a wait for one, or a new one, under a bound of
          // its own (the pool's wait is a coroutine, which no slot reaches).
          // (An attempt bound by nothing has time_point::max(): no
          // subtraction from it, which a clock before its epoch overflows.)
          refused = co_await acquire_into(
              lease, *target.to, ctx,
              resend && bound.at != time_point::max() ? bound.at - now : options_.attempt_timeout());
          now = clock_.now();
          if (refused)
            out.emplace(outcome<T>::from_error(
                resend && now >= bound.at && refused != error::pool_exhausted ? bound.reason : refused));
        }
        if (!lease || caller.cancelled() != asio::cancellation_type::none) break;
        if (now >= bound.at) {
          out.emplace(outcome<T>::from_error(bound.reason));
          resilience::detail::report_expiry(ctx, bound.reason);
          break;
        }
        // A 429 or 503 from this host may have come while this attempt
        // waited for its connection or tried one the server had closed.
        // (One atomic load while no host is held.)
        if (holds_.find(*target.key, now)) {
          lease->keep_alive(now);
          held = true;
          break;
        }
        const bool again = co_await exchange<ResBody>(*lease, target.req, ctx, bound, now, unchecked, executor, out);
        // Before the connection goes back to the pool, where a call waiting
        // for it (on another thread, perhaps) would not see the hold yet.
        if (out && options_.max_host_hold() > duration::zero()) note_hold(*target.key, *out);
        if (!again) break;
        // The resend is one request more for the server: the budget bounds
        // it as it bounds a retry (a server resetting every connection
        // would see each request twice). Refused, the reset is the outcome.
        if (!target.budget->allows_retry()) {
          ctx.report(resilience::detail::event_about(event_kind::budget_refused, *out, ctx.attempt));
          break;
        }
        out.reset();
      }
    } catch (...) {
      out.emplace(outcome<T>::from_current_exception());
    }
    if (caller.cancelled() != asio::cancellation_type::none) {
      out.emplace(outcome<T>::from_error(asio::error::operation_aborted));  // final, whatever the attempt did
    } else if (held) {
      permit.release();
      target.counts.attempts = ctx.attempt - 1;  // this one has not been made yet
      continue;
    }
    judge(permit, target.throttle.get(), *out, ctx);
    if (target.route) report_replica(*target.route, *out, start, ctx, executor);
    if (const auto& report = options_.on_attempt_finished()) {
      const auto* r = http::detail::response_of(*out);
      report(client_attempt_event{ctx.attempt, r ? error_code{} : out->error(), r ? r->result_int() : 0u,
                                  target.req.method(), target.to, clock_.now() - start,
                                  target.route ? std::string_view(target.route->core->name()) : std::string_view{}});
    }
    co_return resilience::detail::take(std::move(*out));
  }
}

template <resilience::clock Clock>
template <class T>
void basic_client<Clock>::judge(breaker_permit& permit, resilience::detail::adaptive_throttle_core* throttle,
                                const outcome<T>& out, const context& ctx) {
  if (out.cancelled()) {
    permit.release();
    return;
  }
  const bool failed = resilience::detail::classify(http::breaker_classifier{}, out, ctx);
  permit.record(failed, ctx);
  // The throttle judges the host by what reached it: an attempt that
  // ended here (no connection in time, the deadline) says nothing.
  const auto* r = http::detail::response_of(out);
  if (throttle && (r || ctx.value_or(request_may_have_been_sent, false)))
    throttle->record(resilience::detail::coarse_now(clock_), r && r->result_int() != 429 && r->result_int() < 500);
}

}  // namespace resilience::http

#include <resilience/http/impl/client_acquire.hpp>
#include <resilience/http/impl/client_exchange.hpp>
#include <resilience/http/impl/client_holds.hpp>
#include <resilience/http/impl/client_upstream.hpp>
