"""Serving the reference engine: the async step loop, tokenizer, chat template, OpenAI-compatible
HTTP server with Prometheus `/metrics`, and the `harness serve` / `harness engine calibrate` verbs.

Imports the engine core (`harness.engine`) and nothing above it (see docs/architecture.md).
"""
