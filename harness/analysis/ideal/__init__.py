"""The ideal prefix cache of a run: what an infinite cache would have hit, per request, from the
run's trace and its records in send order, counted in the server's blocks and tokens."""
