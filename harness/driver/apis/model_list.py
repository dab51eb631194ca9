"""A server's model list as the harness reads it: the cards by model name, each with the name
under `id` (what the preflight checks the run's model against, and `context_limit.model_len`
reads). Each API entry names the reader of its own list (`API.model_list`); this one reads
OpenAI's `{"data": [{"id": ...}, ...]}`, which vLLM, SGLang and the reference engine serve."""

from __future__ import annotations


def openai_models(listing: object) -> dict[str, dict]:
    """The cards of an OpenAI `/v1/models` answer by id (empty when it holds none, or another
    shape)."""
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return {}
    return {m["id"]: m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)}
