// Placeholder: the retry_budget benchmark arrives with the strategy.
