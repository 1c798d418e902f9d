#include <resilience/chaos.hpp>
#include <resilience/detail/with_option.hpp>

namespace resilience {

chaos_options chaos_options::rate(double r) const {
  // Written so that NaN fails too.
  if (!(r >= 0.0 && r <= 1.0)) throw std::invalid_argument("chaos_options::rate: must be in [0, 1]");
  return resilience::detail::with_option(*this, &chaos_options::rate_, r);
}

chaos_options chaos_options::inject_if(std::function<bool(const context&)> predicate) const {
  if (!predicate) throw std::invalid_argument("chaos_options::inject_if: predicate must not be empty");
  return resilience::detail::with_option(*this, &chaos_options::predicate_, std::move(predicate));
}

chaos_options chaos_options::random(random_source source) const {
  return resilience::detail::with_option(*this, &chaos_options::random_, std::move(source));
}

chaos_options chaos_options::on_injected(std::function<void(const chaos_injection&)> hook) const {
  return resilience::detail::with_option(*this, &chaos_options::on_injected_, std::move(hook));
}

bool chaos_options::decide(const context& ctx) const {
  if (rate_ == 0.0) return false;
  if (predicate_ && !predicate_(ctx)) return false;
  // No draw at the ends of the range: a rate of 0 or 1 leaves the sequence
  // of a shared seeded source to the stages that need it.
  if (rate_ == 1.0) return true;
  return random_.next_unit() < rate_;
}

basic_chaos<detail::inject_error> chaos_error(error_code ec, chaos_options options) {
  if (!ec.failed()) throw std::invalid_argument("chaos_error: error must be a failure, not success");
  return {{{}, ec}, std::move(options)};
}

basic_chaos<detail::inject_latency<steady_clock>> chaos_latency(duration latency, chaos_options options) {
  if (latency <= duration::zero()) throw std::invalid_argument("chaos_latency: latency must be positive");
  return {{{}, latency, steady_clock{}}, std::move(options)};
}

}  // namespace resilience
