// Placeholder: the throttling benchmark arrives with the strategy.
