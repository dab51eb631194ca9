"""The runners: one step on torch, or its time from a cost model."""
