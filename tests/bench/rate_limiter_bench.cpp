// Placeholder: the rate_limiter benchmark arrives with the strategy.
