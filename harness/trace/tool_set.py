"""A system prompt's tool set, scaled to fit inside it (`turn_form: tools`).

A profile's system prompt is "system prompt + tool schemas": the schemas' tokens count inside
`system_prompts.tokens`, and the system text is what is left. At full scale (thousands of
tokens) every tool fits whole. A scaled profile (agentx-cpu: x0.01, ~180 tokens) cannot hold
the full set (~1,700 pieces), so its set is scaled too, the way a small agent configures fewer,
terser tools: the schemas may take at most `TOOLS_SHARE` of the system prompt, in the richest
form that keeps the whole set (full, then short descriptions, then bare parameters), else the
most tools of `PRIORITY` that fit in the bare form. The rest stays system text, so every
request keeps a system prompt (a Messages body its `system`) and prompt lengths stay the trace's.

The choice is measured in pieces (`code_text.pieces_of`), never a tokenizer's tokens, so the
same trace calls the same tools with or without one. A system prompt too small for even one
bare schema is refused in one line (`ToolSetError`).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache

from harness.errors import ProfileError
from harness.trace import code_text, tool_calls

TOOLS_SHARE = 0.75  # at most this share of a system prompt's tokens are tool schemas
# which tools a scaled set keeps first: the ones the planner calls most (tool_calls.plan_call)
PRIORITY = ("Read", "Bash", "Edit", "Grep", "Task", "Write", "Glob")
FORMS = ("full", "short", "bare")


class ToolSetError(ProfileError):
    """A system prompt too small for any tool schema."""


def cost(tools: list[dict]) -> int:
    """The schemas' size in pieces: about their tokens for a common BPE tokenizer, or more."""
    return len(code_text.pieces_of(json.dumps(tools, ensure_ascii=False)))


def shaped(tool: dict, form: str) -> dict:
    """A schema in one of `FORMS`: as written, with its description's first sentence and no
    parameter descriptions, or with only its required parameters' names and types."""
    if form == "full":
        return tool
    f = tool["function"]
    params = f["parameters"]
    if form == "short":
        props = {
            k: {n: v for n, v in p.items() if n != "description"}
            for k, p in params["properties"].items()
        }
        first = f["description"].split(". ")[0].rstrip(".") + "."
        body = {"name": f["name"], "description": first}
    else:
        props = {
            k: {"type": params["properties"][k].get("type", "string")} for k in params["required"]
        }
        body = {"name": f["name"]}
    parameters = {"type": "object", "properties": props, "required": params["required"]}
    return {"type": "function", "function": {**body, "parameters": parameters}}


def _by_priority(tools: list[dict]) -> list[dict]:
    rank = {name: i for i, name in enumerate(PRIORITY)}
    return sorted(tools, key=lambda t: rank.get(t["function"]["name"], len(PRIORITY)))


@lru_cache(maxsize=256)
def _scaled(seed: int, system_id: str, system_tokens: int) -> str:
    tools = tool_calls.session_tools(seed, system_id)
    budget = TOOLS_SHARE * system_tokens
    for form in FORMS:
        whole = [shaped(t, form) for t in tools]
        if cost(whole) <= budget:
            return json.dumps(whole)
    kept: list[dict] = []
    for tool in _by_priority(tools):
        if cost([*kept, shaped(tool, "bare")]) <= budget:
            kept.append(shaped(tool, "bare"))
    if not kept:
        smallest = min(cost([shaped(t, "bare")]) for t in tools)
        raise ToolSetError(
            f"turn_form tools: system prompt {system_id} has {system_tokens} tokens, too few for "
            f"one tool schema ({smallest} pieces, at most {TOOLS_SHARE:.0%} of it): raise "
            "system_prompts.tokens (min) or the scale, or use turn_form: plain",
            field="system_prompts.tokens",
        )
    order = [t["function"]["name"] for t in tools]  # the catalog's order, as the full set has
    return json.dumps(sorted(kept, key=lambda t: order.index(t["function"]["name"])))


def least_system_tokens() -> int:
    """The smallest system prompt every tool set fits one schema into: each set holds the core
    tools, so the smallest core tool in its bare form within `TOOLS_SHARE` of it."""
    core = [t for t in tool_calls.CATALOG if t["function"]["name"] in tool_calls.CORE]
    return math.ceil(min(cost([shaped(t, "bare")]) for t in core) / TOOLS_SHARE)


def system_tools(seed: int, system_id: str, system_tokens: int) -> list[dict]:
    """The tool schemas every session with this system prompt sends (a fresh list)."""
    return json.loads(_scaled(seed, system_id, system_tokens))


@lru_cache(maxsize=256)  # once per system prompt: a turn's tool call asks it every time
def names(seed: int, system_id: str, system_tokens: int) -> frozenset[str]:
    return frozenset(t["function"]["name"] for t in system_tools(seed, system_id, system_tokens))
