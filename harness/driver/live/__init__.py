"""What a run shows and hears while it goes: the progress line and its counters, the driver's
self-check, the signals."""
