"""Was the host busy during a run? The one host screen, from the client self-check.

The driver samples, with its own CPU (`client.json`, harness.driver.live.selfcheck), how long
this process's threads waited on a run queue for a CPU, the host's load average and its stolen
CPU time; the analyzer summarizes them over the measured window (`summary.json` `client`). A run
is *busy* when its threads waited for a CPU more than `max_wait_share` of the time they wanted
one (`run_queue_wait_share`), or when more than `STEAL_SHARE` of the CPU time was stolen. The wait
share is the host's contention as the run felt it: the load average counts the run's own threads
(an in-process engine, the driver's loop) as much as other work's, and with autogroup scheduling
(one CPU share per session) a load average says little about the share this process got. Only a
run without a wait share (not Linux, a kernel without schedstats, a run recorded before it was
sampled) falls back on the load: other work's (the mean 1-minute load average over the run less
the process's own CPU share) above `max_load_per_cpu`, or a self-check that warned and blamed the
host. A busy run measured the host as much as the server: a gate leaves it out of the evidence
(and reruns it), a capacity search repeats its point, rather than judge on it.

This is the one host screen: `harness gate` screens its own runs with it, the verdicts screen
history with it (harness/analysis/compare/history.py), the calibration replays it and `harness
capacity` flags its runs with it, so a run counts in one exactly when it would count in another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from harness.analysis.client_check import STEAL_SHARE

# Others' load per CPU above which a run is busy. 1.0 is every core wanted by other work the whole
# run; past it the server's threads queue behind it. 3.0 leaves out what a shared 2-core build
# machine calls a bad minute and keeps its ordinary load (1-3 per CPU when measured): on such a host
# interleaving, not refusal, is what keeps the host out of the verdict (docs/metrics.md, "Gate").
MAX_LOAD_PER_CPU = 3.0
# The share of the time it wanted a CPU that the run's threads waited for one, above which it is
# busy: past 0.9 the process got under a tenth of the CPU time it asked for, so CPU-bound work
# took ten times what it takes on free CPUs and the run measured the host. Below it the gate keeps
# the run, and pairing and the wait correction (harness/analysis/compare/noise.py) answer for the
# host. An in-process simulated engine mostly sleeps and waits on every wake-up, so its share runs
# higher than a CPU-bound engine's on the same host (0.5-0.95 at a load average of 5-10 on 2 CPUs,
# measured; docs/metrics.md, "Gate").
MAX_WAIT_SHARE = 0.9


@dataclass(frozen=True)
class HostState:
    busy: bool
    wait_share: float | None  # None: not sampled (not Linux, no schedstat): the load decides
    others_load_per_cpu: float | None  # None: the host was not sampled (not Linux)
    steal_share: float | None
    blamed_host: bool  # the client self-check warned and blamed the host
    why: str | None  # one line when busy
    load_average: float | None = None  # the mean 1-minute load average over the run, all work

    def to_json(self) -> dict:
        return asdict(self)


def host_state(
    summary: Mapping[str, Any],
    *,
    max_load_per_cpu: float = MAX_LOAD_PER_CPU,
    max_wait_share: float = MAX_WAIT_SHARE,
) -> HostState:
    """The host during the run whose `summary.json` this is."""
    client = summary.get("client") or {}
    host = client.get("host_load") or {}
    wait = client.get("run_queue_wait_share")
    blamed = bool(client.get("warnings")) and client.get("cause") == "host"
    cpus = host.get("cpus")
    others = None
    if cpus:
        own = client.get("process_cpu_share")
        others = round(others_load(host["load1_mean"], own) / cpus, 3)
    steal = host.get("steal_share") if cpus else None
    state = HostState(False, wait, others, steal, blamed, None, host.get("load1_mean"))
    return judged(state, max_load_per_cpu=max_load_per_cpu, max_wait_share=max_wait_share)


def judged(state: HostState, *, max_load_per_cpu: float, max_wait_share: float) -> HostState:
    """`state`'s figures judged against these limits: busy, and why. A calibration re-judges
    its recorded runs with it, so its rates are those of the screen it is evaluated with."""
    wait, steal, others = state.wait_share, state.steal_share, state.others_load_per_cpu
    reasons = []
    if wait is not None and wait > max_wait_share:
        reasons.append(
            f"its threads waited for a CPU {wait:.0%} of the time > {max_wait_share:.0%}"
        )
    if steal is not None and steal > STEAL_SHARE:
        reasons.append(f"{steal:.0%} of CPU time stolen > {STEAL_SHARE:.0%}")
    if wait is None:  # no wait share: the load average and the self-check's blame decide
        if others is not None and others > max_load_per_cpu:
            reasons.append(f"other work's load {others:.2f} per CPU > {max_load_per_cpu:g}")
        if state.blamed_host:
            reasons.append("the client self-check blamed the host")
    why = "; ".join(reasons) or None
    return replace(state, busy=bool(reasons), why=why)


def busy_reason(
    summary: Mapping[str, Any],
    *,
    max_load_per_cpu: float = MAX_LOAD_PER_CPU,
    max_wait_share: float = MAX_WAIT_SHARE,
) -> str | None:
    """Why the run whose `summary.json` this is measured a busy host, or None: the screen."""
    state = host_state(summary, max_load_per_cpu=max_load_per_cpu, max_wait_share=max_wait_share)
    return f"host busy: {state.why}" if state.busy else None


def others_load(load1: float, own_cpu_share: float | None) -> float:
    """The load of work other than this process: a 1-minute load average less the process's own
    CPU share (its threads' average demand), never below 0."""
    return max(0.0, float(load1) - (own_cpu_share or 0.0))


@dataclass(frozen=True)
class Screen:
    """The screen's limits, as `harness gate`, `--calibrate` and `harness capacity` are given
    them (`--max-wait-share`, `--max-host-load`)."""

    max_wait_share: float = MAX_WAIT_SHARE
    max_load_per_cpu: float = MAX_LOAD_PER_CPU  # only for runs without a wait share

    def state(self, summary: Mapping[str, Any]) -> HostState:
        return host_state(
            summary, max_load_per_cpu=self.max_load_per_cpu, max_wait_share=self.max_wait_share
        )

    def rejudge(self, host: dict) -> HostState:
        """A recorded `HostState.to_json()` judged again against these limits."""
        state = HostState(
            False,
            host.get("wait_share"),
            host.get("others_load_per_cpu"),
            host.get("steal_share"),
            bool(host.get("blamed_host")),
            None,
            host.get("load_average"),
        )
        return judged(
            state, max_load_per_cpu=self.max_load_per_cpu, max_wait_share=self.max_wait_share
        )

    def why(self, summary: Mapping[str, Any]) -> str | None:
        return busy_reason(
            summary, max_load_per_cpu=self.max_load_per_cpu, max_wait_share=self.max_wait_share
        )

    def to_json(self) -> dict:
        return asdict(self)
