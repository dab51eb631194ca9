"""Was the host busy during a run? Others' load per CPU and stolen time, from the client self-check.

The driver samples the host with its own CPU (`client.json`, harness.driver.live.selfcheck); the
analyzer summarizes it over the measured window (`summary.json` `client.host_load`). The load
average and the run queue count this process too (an in-process engine, the driver's loop), so
the process's own CPU share is taken off: what is left is the load of *other* work, per CPU. A run
is *busy* when that passes `max_load_per_cpu`, when more than `STEAL_SHARE` of the CPU time was
stolen, or when the self-check blamed a late client on the host. A busy run measured the host as
much as the server: a gate leaves it out of the evidence (and reruns it) rather than judge on it.

This is the one host screen: `harness gate` screens its own runs with it and the verdicts screen
history with it (harness/analysis/compare/history.py), so a run counts in one exactly when it
would count in the other. A self-check `cause` of "host" alone does not make a run busy: the
cause is computed even when nothing was late (the load average there counts this process too),
so it is blame only when the self-check also warned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from harness.analysis.client_check import STEAL_SHARE

# Others' load per CPU above which a run is busy. 1.0 is every core wanted by other work the whole
# run; past it the server's threads queue behind it. 3.0 leaves out what a shared 2-core build
# machine calls a bad minute and keeps its ordinary load (1-3 per CPU when measured): on such a host
# interleaving, not refusal, is what keeps the host out of the verdict (docs/metrics.md, "Gate").
MAX_LOAD_PER_CPU = 3.0


@dataclass(frozen=True)
class HostState:
    busy: bool
    others_load_per_cpu: float | None  # None: the host was not sampled (not Linux)
    steal_share: float | None
    blamed_host: bool  # the client self-check warned and blamed the host
    why: str | None  # one line when busy

    def to_json(self) -> dict:
        return asdict(self)


def host_state(
    summary: Mapping[str, Any], *, max_load_per_cpu: float = MAX_LOAD_PER_CPU
) -> HostState:
    """The host during the run whose `summary.json` this is."""
    client = summary.get("client") or {}
    host = client.get("host_load")
    blamed = bool(client.get("warnings")) and client.get("cause") == "host"
    if not host or not host.get("cpus"):
        why = "the client self-check blamed the host" if blamed else None
        return HostState(blamed, None, None, blamed, why)
    others = others_load(host["load1_mean"], client.get("process_cpu_share")) / host["cpus"]
    steal = host.get("steal_share")
    reasons = []
    if others > max_load_per_cpu:
        reasons.append(
            f"other work's load {others:.2f} per CPU > {max_load_per_cpu:g} on {host['cpus']} CPUs"
        )
    if steal is not None and steal > STEAL_SHARE:
        reasons.append(f"{steal:.0%} of CPU time stolen > {STEAL_SHARE:.0%}")
    if blamed:
        reasons.append("the client self-check blamed the host")
    return HostState(bool(reasons), round(others, 3), steal, blamed, "; ".join(reasons) or None)


def busy_reason(
    summary: Mapping[str, Any], *, max_load_per_cpu: float = MAX_LOAD_PER_CPU
) -> str | None:
    """Why the run whose `summary.json` this is measured a busy host, or None: the screen."""
    state = host_state(summary, max_load_per_cpu=max_load_per_cpu)
    return f"host busy: {state.why}" if state.busy else None


def others_load(load1: float, own_cpu_share: float | None) -> float:
    """The load of work other than this process: a 1-minute load average less the process's own
    CPU share (its threads' average demand), never below 0."""
    return max(0.0, float(load1) - (own_cpu_share or 0.0))
