"""agentic-harness: benchmark LLM servers under agentic (coding-agent) traffic."""

__version__ = "0.1.0"
