// resilience/resilience.hpp — every public header of the library at once.
//
//   #include <resilience/resilience.hpp>
//   int v = co_await resilience::co_retry(op, resilience::retry_policy{}.max_attempts(4));
#pragma once

#include <resilience/adaptive_throttle.hpp>
#include <resilience/adaptive_timeout.hpp>
#include <resilience/any_pipeline.hpp>
#include <resilience/async_run.hpp>
#include <resilience/backoff.hpp>
#include <resilience/breaker_registry.hpp>
#include <resilience/bulkhead.hpp>
#include <resilience/chaos.hpp>
#include <resilience/circuit_breaker.hpp>
#include <resilience/classifier.hpp>
#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/deadline.hpp>
#include <resilience/error.hpp>
#include <resilience/fallback.hpp>
#include <resilience/hedging.hpp>
#include <resilience/metrics.hpp>
#include <resilience/outcome.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/prometheus.hpp>
#include <resilience/properties.hpp>
#include <resilience/retry_budget.hpp>
#include <resilience/random.hpp>
#include <resilience/rate_limiter.hpp>
#include <resilience/retry.hpp>
#include <resilience/timeout.hpp>
