"""The reference engine core: config, requests, KV blocks, CPU tier, scheduler, model, runners.

Imports nothing of the harness above it (serving, driver, trace, analysis); see docs/architecture.md.
"""
