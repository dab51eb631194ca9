"""The report's figures (matplotlib Figures, no pyplot): latency, cache, load, sessions and trends."""
