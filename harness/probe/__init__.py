"""Probes of what a server really does, measured from outside (`harness probe cache`)."""
