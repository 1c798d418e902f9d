// resilience/http/http.hpp — the HTTP integration (Boost.Beast) in one include.
#pragma once

#include <resilience/http/classifier.hpp>
#include <resilience/http/deadline_header.hpp>
#include <resilience/http/deadline_format.hpp>
#include <resilience/http/retry_after.hpp>
#include <resilience/http/retry_after_delay.hpp>
