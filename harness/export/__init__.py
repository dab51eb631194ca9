"""Results where teams already look: a run's live Prometheus metrics, runs logged to MLflow, and
the JSON Schemas of summary.json and the records (docs/export.md)."""
