// Placeholder: the hedging benchmark arrives with the strategy.
