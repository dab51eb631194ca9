"""The headers that tell a router which session a request belongs to, by family.

Routers and gateways read different headers; `target.session_headers` names the families to
send (default: `x-session-id`, the one sent before families existed):

- `x-session-id`: `X-Session-ID` (the sticky key: the root session's id for a subagent that
  follows its parent); a subagent adds `X-Parent-Session-ID` (OpenCode's name for its parent,
  which NVIDIA Dynamo also reads) and `X-Root-Session-ID`.
- `correlation`: `X-Correlation-ID`, AIPerf's per-conversation id (the sticky key).
- `dynamo`: NVIDIA Dynamo's `X-Dynamo-Session-ID` (the session's own id: one agent's chain of
  calls) and, for a subagent, `X-Dynamo-Parent-Session-ID`; Dynamo rebuilds the tree from them
  and binds each session to a worker only when its session affinity is on.
- `smg`: SGLang Model Gateway's `X-SMG-Routing-Key` (the sticky key), which pins a key to a
  worker under its manual policy or routing-key override.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.driver.target import RequestSpec


def _x_session_id(req: RequestSpec) -> dict[str, str]:
    headers = {"X-Session-ID": req.sticky_key}
    if req.parent_id is not None:
        headers["X-Parent-Session-ID"] = req.parent_id
        headers["X-Root-Session-ID"] = req.root_id or req.sticky_key
    return headers


def _dynamo(req: RequestSpec) -> dict[str, str]:
    headers = {"X-Dynamo-Session-ID": req.session_id}
    if req.parent_id is not None:
        headers["X-Dynamo-Parent-Session-ID"] = req.parent_id
    return headers


FAMILIES: dict[str, Callable[[RequestSpec], dict[str, str]]] = {
    "x-session-id": _x_session_id,
    "correlation": lambda req: {"X-Correlation-ID": req.sticky_key},
    "dynamo": _dynamo,
    "smg": lambda req: {"X-SMG-Routing-Key": req.sticky_key},
}


def session_headers(families: tuple[str, ...]) -> Callable[[RequestSpec], dict[str, str]]:
    """The function giving one request's session headers from the named families."""
    chosen = [FAMILIES[name] for name in families]
    if len(chosen) == 1:
        return chosen[0]

    def headers(req: RequestSpec) -> dict[str, str]:
        out: dict[str, str] = {}
        for family in chosen:
            out.update(family(req))
        return out

    return headers
