"""`harness record`: a capture proxy that turns an agent's traffic into a trace (docs/record.md)."""
