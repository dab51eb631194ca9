"""The report's figures (matplotlib and seaborn): latency, cache, load, sessions and trends."""
