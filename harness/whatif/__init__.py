"""`harness whatif RUN_DIR --set KEY=VALUE`: a measured run's own requests replayed through the
reference engine's cache model (scheduler, block pool, prefix cache, CPU tier) at another pool,
offload or replica count, predicting its hit rate and TTFT (docs/engine.md, "What-if")."""
