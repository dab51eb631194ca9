"""The fields AIPerf's Weka/AgentX loader requires, checked on a file written here.

Read from AIPerf's public loader models (its `WekaTrace`, `WekaNormalRequest` /
`WekaStreamingRequest` and `WekaSubagentEntry`): every model forbids unknown keys; a trace needs
`id`, `models`, `block_size` > 0, `hash_id_scope` = "local" and `requests`; a call needs `t`,
`type`, `model`, `in`, `out`; a subagent entry needs `t`, `type`, `agent_id`, `subagent_type`,
`status`, `requests` (calls only, no nested groups) and `models`. Our own check, not their code.
"""

from __future__ import annotations

_NUMBER = (int, float)
TRACE = {"id": str, "models": list, "block_size": int, "hash_id_scope": str, "requests": list}
TRACE_OPTIONAL = {"tool_tokens": int, "system_tokens": int, "totals": dict}
CALL = {"t": _NUMBER, "type": str, "model": str, "in": int, "out": int}
CALL_OPTIONAL = {"hash_ids": list, "input_types": list, "output_types": list, "stop": str,
                 "api_time": _NUMBER, "think_time": _NUMBER, "ttft": _NUMBER}  # fmt: skip
GROUP = {"t": _NUMBER, "type": str, "agent_id": str, "subagent_type": str, "status": str,
         "requests": list, "models": list}  # fmt: skip
GROUP_OPTIONAL = {"duration_ms": int, "total_tokens": int, "tool_use_count": int, "tool_tokens": int,
                  "system_tokens": int}  # fmt: skip


def _fields(obj: dict, required: dict, optional: dict, where: str) -> list[str]:
    problems = [f"{where}{k}: missing" for k in required if k not in obj]
    for key, value in obj.items():
        kind = required.get(key, optional.get(key))
        if kind is None:
            problems.append(f"{where}{key}: not a field of the format")
        elif isinstance(value, bool) or not isinstance(value, kind):
            problems.append(f"{where}{key}: wrong type {type(value).__name__}")
    return problems


def _call(obj: dict, where: str) -> list[str]:
    problems = _fields(obj, CALL, CALL_OPTIONAL, where)
    if obj.get("type") not in ("n", "s"):
        problems.append(f"{where}type: {obj.get('type')!r} is not 'n' or 's'")
    if obj.get("type") == "n" and "ttft" in obj:
        problems.append(f"{where}ttft: only streaming calls have it")
    return problems


def aiperf_problems(trace: dict) -> list[str]:
    """What AIPerf's loader would reject in one trace object (empty when it loads)."""
    problems = _fields(trace, TRACE, TRACE_OPTIONAL, "")
    if trace.get("hash_id_scope") != "local":
        problems.append("hash_id_scope: AIPerf reads 'local' only")
    if not isinstance(trace.get("block_size"), int) or trace["block_size"] <= 0:
        problems.append("block_size: must be > 0")
    for i, req in enumerate(trace.get("requests", [])):
        where = f"requests[{i}]."
        if req.get("type") != "subagent":
            problems += _call(req, where)
            continue
        problems += _fields(req, GROUP, GROUP_OPTIONAL, where)
        for j, inner in enumerate(req.get("requests", [])):
            problems += _call(inner, f"{where}requests[{j}].")
    return problems
