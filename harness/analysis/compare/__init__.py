"""Runs against runs: a baseline against a candidate (`changes`), a series in run order (`trend`)."""
