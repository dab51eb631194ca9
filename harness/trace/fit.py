"""A workload profile fitted to a trace (a recording of your agents, or any corpus): more of the
same traffic at any scale and seed (`harness trace fit`).

Each of the profile's distributions is a lognormal fitted to the trace's values: the median,
the spread of their logarithms (positive values), and the observed min and max as its bounds.
Main sessions give `turns`, `first_input_tokens` (turn 0's input), `new_input_tokens` (later
turns', joins left out: a join's input holds its subagents' reports, which the generator adds
itself), `output_tokens` and `think_s`; subagents their own set. System prompts: as many as the
trace's main sessions use (by `system_id`), their lengths fitted. Subagents: the share of main
sessions with any, how many they start, fork or spawn (`mix` with the fork share when both
happen), the most started after one turn; the share is asked of the sessions the turn count
lets have any (two turns or more), so a drawn trace has the fitted share. Arrivals: Poisson at the main sessions' mean rate.
`human_pause` stays off: the fitted `think_s` holds every gap, people's included.

`recording_targets` are the trace's own figures as fidelity targets (`trace.stats.fidelity`),
so a trace drawn from the profile can be checked against the one it was fitted to.
"""

from __future__ import annotations

import math

import numpy as np
import yaml

from harness.trace import tool_set
from harness.trace.generate import generate
from harness.trace.model import Session, Trace
from harness.trace.profile import Profile, validate_profile
from harness.trace.stats import StatTarget, compute_stats, fidelity


def dist(values) -> dict:
    """A lognormal `Dist` fitted to `values`: median, log-space sigma, observed bounds."""
    a = np.asarray([float(v) for v in values], dtype=float)
    if a.size == 0:
        return {"median": 1.0, "sigma": 0.0, "min": 1.0, "max": 1.0}
    positive = a[a > 0]
    sigma = float(np.std(np.log(positive))) if positive.size > 1 else 0.0
    return {
        "median": round(float(np.median(a)), 3),
        "sigma": round(min(sigma, 5.0), 3),
        "min": round(float(a.min()), 3),
        "max": round(float(a.max()), 3),
    }


def _joins(s: Session) -> set[int]:
    return {k + 1 for k, t in enumerate(s.turns) if t.spawns}


def _shape(sessions: list[Session]) -> dict:
    later = [t for s in sessions for k, t in enumerate(s.turns) if k > 0 and k not in _joins(s)]
    return {
        "turns": dist([len(s.turns) for s in sessions]),
        "first_input_tokens": dist([s.turns[0].new_input_tokens for s in sessions]),
        "new_input_tokens": dist([t.new_input_tokens for t in later] or [1]),
        "output_tokens": dist([t.output_tokens for s in sessions for t in s.turns]),
        "think_s": dist([t.think_s for s in sessions for t in s.turns[1:]] or [0.0]),
    }


def _multi_turn(turns: dict) -> float:
    """The share of main sessions drawn with two turns or more (the generator starts subagents
    only after a turn that is not the last): the turn count rounds a clipped lognormal."""
    if turns["max"] < 1.5:
        return 0.0
    if turns["min"] >= 1.5:
        return 1.0
    if turns["sigma"] == 0:
        return 1.0 if turns["median"] >= 1.5 else 0.0
    z = math.log(1.5 / turns["median"]) / turns["sigma"]
    return 0.5 * math.erfc(z / math.sqrt(2))


def _subagents(trace: Trace, mains: list[Session], turns: dict) -> dict:
    subs = [s for s in trace.sessions if s.parent is not None]
    kids = [len(trace.children.get(s.id, [])) for s in mains]
    with_kids = [n for n in kids if n]
    forks = sum(s.mode == "fork" for s in subs)
    mode = "mix" if 0 < forks < len(subs) else ("fork" if forks else "spawn")
    groups = [len(t.spawns) for s in trace.sessions for t in s.turns if t.spawns]
    shape = _shape(subs) if subs else _shape(mains)
    del shape["turns"]
    share, multi = len(with_kids) / len(mains), _multi_turn(turns)
    return {  # the share asked of the generator: of the sessions long enough to have any
        "probability": round(min(1.0, share / multi) if multi > 0 else share, 4),
        "count": {
            "mean": max(1.0, float(np.mean(with_kids))) if with_kids else 1.0,
            "max": max(with_kids, default=1),
        },
        "mode": mode,
        "fork_fraction": round(forks / len(subs), 4) if subs else 0.5,
        "parallelism": max(groups, default=1),
        "turns": dist([len(s.turns) for s in subs] or [1]),
        **shape,
    }


def _arrival(mains: list[Session]) -> dict:
    times = sorted(s.arrival_s for s in mains)
    span = times[-1] - times[0] if times else 0.0
    if len(times) < 2 or span <= 0:
        return {"process": "all_at_once", "rate_per_s": 1.0}
    return {"process": "poisson", "rate_per_s": round((len(times) - 1) / span, 6)}


def _prompt_max(trace: Trace) -> int:
    """The longest prompt a main session reached (its context, as the generator counts it)."""
    longest = 0
    for s in trace.main_sessions:
        total = s.system_tokens
        for t in s.turns:
            total += t.new_input_tokens
            longest = max(longest, total)
            total += t.output_tokens
    return longest


def system_tokens(values, tools: bool) -> dict:
    """The system prompts' sizes; with tool-shaped turns, none under the least that holds a
    tool schema (a one-line instruction the agent sent as its system part is raised to it),
    so a profile fitted to a recording always draws."""
    fitted = dist(values)
    if tools:
        least = float(tool_set.least_system_tokens())
        fitted = {k: max(v, least) if k != "sigma" else v for k, v in fitted.items()}
    return fitted


def fit_profile(trace: Trace, *, name: str, source: str) -> Profile:
    mains = trace.main_sessions
    if not mains:
        raise ValueError("the trace has no main session to fit")
    systems = {s.system_id: s.system_tokens for s in mains}
    shape = _shape(mains)
    tools = any(
        t.prompt is not None and any(m.calls for m in t.prompt.messages)
        for s in trace.sessions
        for t in s.turns
    )
    doc = {
        "name": name,
        "description": f"fitted by harness trace fit to {source}: {len(mains)} main sessions, "
        f"{trace.num_requests} requests",
        "sessions": len(mains),
        "arrival": _arrival(mains),
        "system_prompts": {"count": len(systems), "tokens": system_tokens(systems.values(), tools)},
        **shape,
        "max_context_tokens": max(1, 2 * _prompt_max(trace)),
        "subagents": _subagents(trace, mains, shape["turns"]),
        "content": "code" if tools else "words",
        "turn_form": "tools" if tools else "plain",
    }
    return validate_profile(doc, source=source)


def recording_targets(stats: dict) -> tuple[StatTarget, ...]:
    """A trace's own figures as fidelity targets: what a trace drawn from its profile must show."""

    def median(key: str) -> float:
        return float(stats[key]["p50"] or 0.0)

    return (
        StatTarget(
            "turns_per_main_session",
            "turns per main session (median)",
            median("turns_per_main_session"),
            "median",
        ),
        StatTarget(
            "prompt_tokens", "prompt tokens per request (median)", median("prompt_tokens"), "median"
        ),
        StatTarget(
            "output_tokens", "output tokens per request (median)", median("output_tokens"), "median"
        ),
        StatTarget(
            "ideal_cache_hit",
            "ideal prefix reuse, token-weighted",
            float(stats["ideal_cache_hit"]),
            "mean",
        ),
        StatTarget(
            "main_sessions_with_subagents",
            "main sessions with >= 1 subagent",
            float(stats["main_sessions_with_subagents"]),
            "mean",
        ),
        StatTarget(
            "subagents_per_parent",
            "subagents per main session with any (mean)",
            float(stats["subagents_per_parent"]),
            "mean",
        ),
        StatTarget(
            "think_s",
            "think time before a request, s (median)",
            median("think_s"),
            "median",
            tolerance=0.10,
        ),
    )


def check(profile: Profile, fitted: dict, *, sessions: int, seed: int) -> tuple[dict, list[dict]]:
    """Draw `sessions` main sessions from the profile; their stats, and the fidelity rows of
    those stats against the fitted trace's own (`fitted`: its `compute_stats`)."""
    drawn = generate(profile, seed=seed, sessions=sessions)
    stats = compute_stats(drawn, block_size=fitted["block_size"])
    return stats, fidelity(stats, targets=recording_targets(fitted))


def profile_yaml(profile: Profile, source: str) -> str:
    """The profile as a workload file (every field written), with where it came from."""
    head = f'# Fitted by `harness trace fit` to {source} (docs/record.md, "Replay and fit").\n'
    return head + yaml.safe_dump(profile.model_dump(mode="json"), sort_keys=False)
