"""Draws agentic sessions from a workload profile: seeded, byte-identical for the same inputs.

Each main session has its own random stream (`default_rng([seed, 1, index])`), so the first N
sessions of a 2,000-session trace equal an N-session trace of the same seed, and its subagents
are drawn from the same stream right after it. Only token *counts* are drawn; content (token ids,
text) is materialized later by `harness.trace.content`, which is why 10,000 sessions take seconds.

Shape of a main session: a task message, then turns whose new input (tool results) grows the
context until the drawn turn count or `max_context_tokens` ends it. A session that has subagents
starts them in groups of at most `parallelism` after some of its turns (never the last); the next
turn joins the group and its new input begins with their final outputs. Subagents start when the
spawning turn's response ends (the driver's rule), so their `arrival_s` is the parent's arrival.
"""

from __future__ import annotations

import numpy as np

from harness.trace import tool_set
from harness.trace.model import Mode, Session, Trace, TraceHeader, Turn
from harness.trace.profile import Dist, HumanPause, Profile, Subagents
from harness.trace.strata import Strata

# 2: main sessions' subagent share, subagent counts and turn counts are stratified over the
# session index (harness.trace.strata): the same seed draws another trace than version 1 did
GENERATOR_VERSION = 2


def _draw(rng: np.random.Generator, d: Dist, n: int) -> np.ndarray:
    x = d.median * np.exp(d.sigma * rng.standard_normal(n))
    return np.clip(x, d.min, np.inf if d.max is None else d.max)


def think_samples(profile: Profile, n: int = 100_000, seed: int = 0) -> np.ndarray:
    """Gaps the profile's think model draws, main-session and subagent gaps mixed in the share
    of turns they have in the profile (lognormal means, before clipping): what `trace stats`
    shows beside a trace's own gaps."""
    rng = np.random.default_rng([seed, 4])
    sub = profile.subagents

    def mean_turns(d: Dist) -> float:
        return d.median * float(np.exp(d.sigma**2 / 2)) - 1  # gaps: turns after the first

    main_gaps = mean_turns(profile.turns)
    sub_gaps = sub.probability * sub.count.mean * mean_turns(sub.turns)
    n_main = int(round(n * main_gaps / (main_gaps + sub_gaps))) if main_gaps + sub_gaps > 0 else n
    main = _thinks(rng, profile.think_s, n_main + 1, profile.human_pause)[1:]
    return np.concatenate((np.array(main), _draw(rng, sub.think_s, n - n_main)))


def _tokens(raw: np.ndarray, scale: float) -> np.ndarray:
    return np.maximum(1, np.rint(raw * scale)).astype(np.int64)


def _thinks(
    rng: np.random.Generator, d: Dist, n: int, pause: HumanPause | None = None
) -> list[float]:
    """Think time before each turn; the first turn is sent at the session's start. With a human
    pause model, each gap is a person's break with its probability, else tool execution."""
    gaps = _draw(rng, d, n - 1)
    if (
        pause is not None and pause.probability > 0
    ):  # no extra draws otherwise: same bytes as before
        human = rng.random(n - 1) < pause.probability
        gaps = np.where(human, _draw(rng, pause.duration, n - 1), gaps)
    return [0.0] + np.round(gaps, 3).tolist()


def _cap_turns(base: float, inputs: np.ndarray, outputs: np.ndarray, cap: float) -> int:
    """Turns whose prompt (base + earlier inputs and outputs + own input) stays within `cap`."""
    prompt = base + np.cumsum(inputs) + np.concatenate(([0.0], np.cumsum(outputs)[:-1]))
    over = np.flatnonzero(prompt > cap)
    return max(1, int(over[0]) if over.size else len(inputs))


class _SessionDraw:
    """Raw (unscaled) counts of one session; `shape` is the profile or its `subagents` part."""

    def __init__(
        self,
        rng: np.random.Generator,
        shape: Profile | Subagents,
        base: float,
        cap: float,
        turns_z: float | None = None,
    ):
        raw = _draw(rng, shape.turns, 1)[0]  # drawn also when stratified: the stream stays put
        if turns_z is not None:
            d = shape.turns
            raw = np.clip(
                d.median * np.exp(d.sigma * turns_z), d.min, np.inf if d.max is None else d.max
            )
        n = max(1, int(np.rint(raw)))
        inputs = np.concatenate(
            (_draw(rng, shape.first_input_tokens, 1), _draw(rng, shape.new_input_tokens, n - 1))
        )
        outputs = _draw(rng, shape.output_tokens, n)
        n = _cap_turns(base, inputs, outputs, cap)
        self.inputs, self.outputs = inputs[:n], outputs[:n]
        self.thinks = _thinks(rng, shape.think_s, n, getattr(shape, "human_pause", None))

    def __len__(self) -> int:
        return len(self.inputs)

    def context_after(self, k: int) -> float:
        return float(np.sum(self.inputs[: k + 1]) + np.sum(self.outputs[: k + 1]))

    def turns(
        self, scale: float, joined: dict[int, int], spawns: dict[int, list[str]]
    ) -> tuple[Turn, ...]:
        """Scaled turns; `joined[k]` report tokens are added to turn k's new input."""
        inputs = _tokens(self.inputs, scale).tolist()
        outputs = _tokens(self.outputs, scale).tolist()
        return tuple(
            Turn(i + joined.get(k, 0), o, t, tuple(spawns.get(k, ())))
            for k, (i, o, t) in enumerate(zip(inputs, outputs, self.thinks, strict=True))
        )


class Generator:
    def __init__(self, profile: Profile, seed: int) -> None:
        self.p, self.seed, self.scale = profile, seed, profile.scale
        sys_rng = np.random.default_rng([seed, 3])
        raw = _draw(sys_rng, profile.system_prompts.tokens, profile.system_prompts.count)
        self.system_raw = raw
        self.system_tokens = _tokens(raw, self.scale).tolist()
        sub = profile.subagents
        self.strata = Strata(seed, sub.probability, sub.count.mean)

    def arrivals(self, n: int) -> list[float]:
        a = self.p.arrival
        if a.process == "all_at_once":
            return [0.0] * n
        if a.process == "constant":
            return [round(i / a.rate_per_s, 6) for i in range(n)]
        gaps = np.random.default_rng([self.seed, 2]).exponential(1.0 / a.rate_per_s, n)
        return np.round(np.concatenate(([0.0], np.cumsum(gaps[:-1]))), 6).tolist()

    def family(self, index: int, arrival: float, width: int) -> list[Session]:
        p, rng = self.p, np.random.default_rng([self.seed, 1, index])
        sid = f"s{index:0{width}d}"
        sys_j = int(rng.integers(p.system_prompts.count))
        base = float(self.system_raw[sys_j])
        main = _SessionDraw(rng, p, base, p.max_context_tokens, self.strata.turns_z(index))
        spawns: dict[int, list[str]] = {}
        joined: dict[int, int] = {}  # turn -> report tokens its new input starts with
        children: list[Session] = []
        for k, size in self._spawn_groups(rng, len(main), index):
            for _ in range(size):
                cid = f"{sid}.a{len(children) + 1}"
                child = self._child(rng, cid, sid, k, arrival, sys_j, base + main.context_after(k))
                children.append(child)
                spawns.setdefault(k, []).append(cid)
                joined[k + 1] = joined.get(k + 1, 0) + child.turns[-1].output_tokens
        turns = main.turns(self.scale, joined, spawns)
        return [Session(sid, arrival, self.system_tokens[sys_j], f"sys{sys_j}", turns), *children]

    def _spawn_groups(
        self, rng: np.random.Generator, n_turns: int, index: int
    ) -> list[tuple[int, int]]:
        """(spawning turn, subagents started after it); never after the last turn. Whether and
        how many are stratified over the session index (harness.trace.strata)."""
        sub = self.p.subagents
        rng.random()  # the draw that decided before version 2: the stream stays put
        if not self.strata.has_subagents(index) or n_turns < 2:
            return []
        count = self.strata.subagent_count(index, sub.count.max)
        sizes = []
        while count > 0:
            sizes.append(int(rng.integers(1, min(sub.parallelism, count) + 1)))
            count -= sizes[-1]
        sizes = sizes[: n_turns - 1]
        at = np.sort(rng.choice(n_turns - 1, size=len(sizes), replace=False)).tolist()
        return list(zip(at, sizes, strict=True))

    def _child(
        self, rng, cid: str, parent: str, k: int, arrival: float, sys_j: int, context: float
    ) -> Session:
        sub = self.p.subagents
        fork = sub.mode == "fork" or (sub.mode == "mix" and rng.random() < sub.fork_fraction)
        base = context if fork else float(self.system_raw[sys_j])
        turns = _SessionDraw(rng, sub, base, self.p.max_context_tokens).turns(self.scale, {}, {})
        mode: Mode = "fork" if fork else "spawn"
        sys_tokens = self.system_tokens[sys_j]
        return Session(
            cid, arrival, sys_tokens, f"sys{sys_j}", turns, parent=parent, fork_turn=k, mode=mode
        )


def generate(
    profile: Profile, *, seed: int = 1, sessions: int | None = None, scale: float | None = None
) -> Trace:
    """A trace of `sessions` main sessions (default: the profile's) drawn from `profile`."""
    if scale is not None:
        profile = profile.model_copy(update={"scale": scale})
    n = profile.sessions if sessions is None else sessions
    if n < 1:
        raise ValueError("sessions must be >= 1")
    gen = Generator(profile, seed)
    if profile.turn_form == "tools":  # a system prompt too small for any tool: refused here
        for j, tokens in enumerate(gen.system_tokens):
            tool_set.system_tools(seed, f"sys{j}", tokens)
    width = max(6, len(str(n - 1)))
    out: list[Session] = []
    for i, arrival in enumerate(gen.arrivals(n)):
        out.extend(gen.family(i, arrival, width))
    meta = {
        "generator": GENERATOR_VERSION,
        "sessions": n,
        "scale": profile.scale,
        "knobs": profile.knobs(),
    }
    header = TraceHeader(seed=seed, profile=profile.name, block_size=16, meta=meta)
    return Trace(header, tuple(out))
