// Placeholder: the metrics benchmark arrives with the strategy.
