"""Scale-out on Ray: one replay sharded over 2 workers of a local Ray cluster against a real
local server, compared with a single-process run of the same trace; a worker killed mid-run; the
unsupported combinations. Ray runs only inside a loopback-only network namespace
(tests/distributed/netns.py); the Ray part is one script (tests/distributed/ray_runs.py) run once
for the module, since starting Ray costs ~10 s."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.analysis import metrics
from harness.analysis.histograms import histogram_of, read_histograms
from harness.analysis.ideal.walk import with_ideal
from harness.analysis.loader import load_run
from harness.analysis.summary import analyze
from harness.distributed.shard import plan_shards
from harness.driver.config import ReplayConfig
from harness.trace.native import read_trace
from tests.distributed.netns import ray_problem, run_isolated
from tests.driver.helpers import load_manifest, load_records
from tests.waits import HANG_S

ROOT = Path(__file__).resolve().parents[1]
CLOSED = ReplayConfig(load="closed", concurrency=4)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, dict]:
    problem = ray_problem()
    if problem:
        pytest.skip(f"Ray tests need a loopback-only network namespace and Ray: {problem}")
    out = tmp_path_factory.mktemp("ray")
    done = run_isolated(["-m", "tests.distributed.ray_runs", str(out)], timeout=HANG_S, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return out, json.loads((out / "results.json").read_text())


def worker_of(out: Path, config: ReplayConfig) -> dict[str, int]:
    """Main session id -> worker, as the coordinator planned it (the plan is deterministic)."""
    plan = plan_shards(read_trace(out / "small.trace.jsonl"), config, 2)
    return {sid: sh.worker for sh in plan.shards for sid in sh.mains}


def root(rec: dict) -> str:
    return rec["session_id"].split(".")[0]  # the test trace names subagents <main>.s<k>


@pytest.mark.slow
def test_ray_stays_on_loopback(runs):
    _, res = runs
    assert res["node_ip"] == "127.0.0.1" and res["interfaces"] == ["lo"]


@pytest.mark.slow
@pytest.mark.parametrize("load", ["closed", "open"])
def test_same_records_and_sessions_as_one_process(runs, load):
    out, res = runs
    local, ray = load_records(out / f"{load}-local"), load_records(out / f"{load}-ray")
    assert len(ray) == len(local) == res[f"{load}_ray"]["requests"] == 46
    assert sorted(r["request_id"] for r in ray) == sorted(r["request_id"] for r in local)
    assert {r["session_id"] for r in ray} == {r["session_id"] for r in local}
    assert res[f"{load}_ray"]["sessions_started"] == res[f"{load}_local"]["sessions_started"]
    assert all(r["status"] == "ok" for r in ray)
    assert {r["run_id"] for r in ray} == {load}
    key = ("prompt_tokens_expected", "output_tokens_expected", "parent_session_id", "agent")
    expected = {r["request_id"]: [r[k] for k in key] for r in local}
    assert all([r[k] for k in key] == expected[r["request_id"]] for r in ray)
    # records are what the workers sent, appended once: nothing rewrites them after the run
    assert not list((out / f"{load}-ray").glob("*.tmp"))
    # one ideal prefix cache across workers, as in one process: every prompt after the very
    # first reuses at least the shared system prompt (per-worker caches would miss it twice);
    # the analyzer computes it from the run folder's trace and the records in send order
    ideal = {
        name: with_ideal(load_run(out / f"{load}-{name}"))[0]["cached_tokens_ideal"].sum()
        for name in ("local", "ray")
    }
    assert ideal["ray"] == ideal["local"] > 0


@pytest.mark.slow
def test_run_folder_and_manifest(runs):
    out, res = runs
    m = load_manifest(out / "closed-ray")
    assert m["status"] == "complete" and m["workers_lost"] == 0
    assert m["execution"] == {"backend": "ray", "workers": 2, "requested": 2}
    assert [w["status"] for w in m["workers"]] == ["finished", "finished"]
    assert sum(w["requests"] for w in m["workers"]) == m["counts"]["requests"] == 46
    assert sum(w["sessions"] for w in m["workers"]) == 10
    assert len({w["pid"] for w in m["workers"]}) == 2  # two processes did the work
    # each worker sampled its own event loop; the analyzer judges the worst (docs/metrics.md)
    client = json.loads((out / "closed-ray" / "client.json").read_text())
    assert [w["worker"] for w in client["workers"]] == [0, 1]
    assert {w["pid"] for w in client["workers"]} == {w["pid"] for w in m["workers"]}
    assert all(w["loop_lag"]["t"] and len(w["cpu"]["t"]) >= 2 for w in client["workers"])
    judged = analyze(load_run(out / "closed-ray")).summary["client"]
    assert [w["worker"] for w in judged["workers"]] == [0, 1] and judged["loop_lag_s"]["count"] > 0
    for key in ("trace_sha256", "t0_wall", "duration_s", "target", "endpoints", "scenario"):
        assert m[key] is not None, key
    # the API key never reaches a run folder, nor Ray's session files (logs, spilled objects)
    for folder in (out, Path(res["ray_session_dir"])):
        files = [p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()]
        assert files, folder
        for path in files:
            assert b"sk-SECRET" not in path.read_bytes(), path


@pytest.mark.slow
def test_session_order_within_each_worker(runs):
    out, _ = runs
    recs = load_records(out / "closed-ray")
    by_session: dict[str, list[dict]] = {}
    for r in recs:
        by_session.setdefault(r["session_id"], []).append(r)
    for turns in by_session.values():
        turns.sort(key=lambda r: r["turn"])
        assert [r["turn"] for r in turns] == list(range(len(turns)))
        for a, b in zip(turns, turns[1:], strict=False):  # strictly one turn after the other
            assert b["t_sent"] >= a["t_done"]
    for sid, turns in by_session.items():  # subagents: after their fork turn; the parent joins
        if "." in sid:
            parent = {r["turn"]: r for r in by_session[root(turns[0])]}
            assert turns[0]["t_sent"] >= parent[0]["t_done"]
            assert parent[1]["t_sent"] >= turns[-1]["t_done"]
    owner = worker_of(out, CLOSED)
    plan = plan_shards(read_trace(out / "small.trace.jsonl"), CLOSED, 2)
    for shard in plan.shards:  # each worker started its main sessions in trace order
        starts = [by_session[sid][0]["t_scheduled"] for sid in shard.mains]
        assert starts == sorted(starts), shard.worker
    assert len(set(owner.values())) == 2


@pytest.mark.slow
def test_open_loop_keeps_the_schedule_on_one_clock(runs):
    out, res = runs
    local, ray = load_records(out / "open-local"), load_records(out / "open-ray")
    first = {
        r["session_id"]: r["t_scheduled"] for r in local if r["agent"] == "main" and r["turn"] == 0
    }
    got = {
        r["session_id"]: r["t_scheduled"] for r in ray if r["agent"] == "main" and r["turn"] == 0
    }
    assert got == first  # one arrival draw for the run, split across workers
    owner = worker_of(out, ReplayConfig(load="open", session_rate=25.0, seed=3))
    assert len({owner[s] for s in got}) == 2
    # Every worker's times are on the coordinator's run clock: moved to perf_counter with the
    # manifest's origin, a record's send is before the server got the request, and its end
    # after (a worker on its own clock would be off by the 0.5 s start lead, more than a request
    # lasts here)
    t0 = load_manifest(out / "open-ray")["t0_perf_counter"]
    for r in ray:
        got = res["server_recv"][r["request_id"]]
        assert t0 + r["t_sent"] <= got <= t0 + r["t_done"], (r, got - t0)
    # never early beyond timer granularity (an event loop's timers may fire up to ~1 ms early)
    assert all(r["t_sent"] >= r["t_scheduled"] - 0.002 for r in ray)


@pytest.mark.slow
def test_histograms_merged_from_workers_equal_the_pooled_ones(runs):
    out, res = runs
    assert res["e2e_status"] == "complete"
    run = load_run(out / "e2e")
    pooled = read_histograms(out / "e2e")  # what `harness run` wrote from all the records
    owner = worker_of(out, CLOSED)
    ok = run.ok
    tasks = run.records.loc[ok.index, "session_id"].map(lambda s: owner[s.split(".")[0]])
    merged: dict = {}
    for w in (0, 1):
        part = ok[tasks.to_numpy() == w]
        assert len(part) > 0
        per = metrics.request_metrics(part, metrics.itl_of(part))
        for name in ("ttft", "tpot", "e2el"):
            merged.setdefault(name, []).append(histogram_of(per[name].to_numpy()))
    for name, parts in merged.items():
        h = parts[0]
        h.add(parts[1])
        assert h.get_total_count() == pooled[name].get_total_count() > 0
        assert np.array_equal(np.asarray(h.counts), np.asarray(pooled[name].counts)), name
    m = load_manifest(out / "e2e")
    assert m["execution"]["backend"] == "ray" and len(m["workers"]) == 2


@pytest.mark.slow
def test_a_lost_worker_is_reported_and_the_run_finishes(runs):
    out, res = runs
    loss = res["loss"]
    assert loss["status"] == "partial" and loss["workers_lost"] == 1
    lost, alive = loss["workers"]
    assert lost["status"] == "lost" and "ActorDiedError" in lost["error"]
    assert alive["status"] == "finished" and alive["requests"] == alive["planned_requests"]
    assert 0 < lost["requests"] < lost["planned_requests"]
    recs = load_records(out / "loss")
    assert len(recs) == loss["requests"] == lost["requests"] + alive["requests"]
    lost_recs = [r for r in recs if r["status"] == "error"]
    assert lost_recs and all(r["error"]["class"] == "WorkerLost" for r in lost_recs)
    assert len(lost_recs) == lost["lost_requests"] == loss["errors_by_class"]["WorkerLost"]
    assert all(r["t_done"] >= r["t_sent"] for r in lost_recs)
    assert len({r["request_id"] for r in recs}) == len(recs)
    m = load_manifest(out / "loss")
    assert m["status"] == "partial" and m["workers"][0]["status"] == "lost"
    assert m["counts"]["by_status"] == loss["by_status"]


@pytest.mark.slow
def test_ctrl_c_interrupts_every_worker(runs):
    out, res = runs
    r = res["sigint"]
    assert r["status"] == "interrupted"
    assert r["by_status"].get("cancelled", 0) > 0 and r["by_status"].get("ok", 0) > 0
    assert r["requests"] < 8 * 5  # it stopped sending
    m = load_manifest(out / "sigint")
    assert m["status"] == "interrupted" and m["counts"] == {
        k: r[k] for k in ("requests", "by_status", "errors_by_class")
    }
    assert {w["status"] for w in m["workers"]} == {"interrupted"}
    assert len(load_records(out / "sigint")) == r["requests"]


@pytest.mark.slow
def test_max_duration_stops_every_worker_on_the_shared_clock(runs):
    out, res = runs
    r = res["bounded"]
    assert r["status"] == "complete" and r["stopped_by"] == "max_duration"
    recs = load_records(out / "bounded")
    assert len(recs) == r["requests"] > 0
    # Sending stops at 1 s on the shared clock. A loop turn under way at the stop may still send
    # one turn per slot (its callback before the stop's): at most one per session, four in all.
    # A worker stopping on a later clock of its own would go on sending its sessions' turns.
    late = [x["session_id"] for x in recs if x["t_scheduled"] >= 1.0]
    assert len(late) <= 4 and len(set(late)) == len(late), late
    assert {x["status"] for x in recs} <= {"ok", "cancelled"}
    assert load_manifest(out / "bounded")["stopped_by"] == "max_duration"


@pytest.mark.slow
def test_an_unreachable_target_is_one_line(runs):
    _, res = runs
    error = res["unreachable_error"]
    assert error and "\n" not in error and "every Ray worker failed" in error
    assert not error.startswith("TargetError")


# ---- harness run --workers through the CLI (tests/distributed/cli_runs.py) ----------------------


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory) -> tuple[Path, dict]:
    problem = ray_problem()
    if problem:
        pytest.skip(f"Ray tests need a loopback-only network namespace and Ray: {problem}")
    out = tmp_path_factory.mktemp("ray-cli")
    done = run_isolated(["-m", "tests.distributed.cli_runs", str(out)], timeout=HANG_S, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return out, json.loads((out / "results.json").read_text())


@pytest.mark.slow
def test_workers_started_beside_a_harness_folder_import_this_harness(cli_run):
    """`harness run --workers 2` from a folder holding a decoy `harness` package: Ray puts the
    driver's working directory first on its workers' path; the workers still run this one."""
    out, res = cli_run
    assert "decoy" not in res["stderr"], res["stderr"][-2000:]
    assert res["killed"] is not None, res["stderr"][-2000:]  # a worker ran: it had records
    recs = load_records(out / "run")
    assert sum(r["status"] == "ok" for r in recs) >= 6


@pytest.mark.slow
def test_a_run_that_lost_a_worker_exits_3_in_one_line(cli_run):
    out, res = cli_run
    assert res["exit_code"] == 3, res["stderr"][-2000:]
    why = [line for line in res["stderr"].splitlines() if line.startswith("harness: exit")]
    assert why == [
        "harness: exit 3: the run is partial: a load worker was lost or it was not closed"
    ]
    m = load_manifest(out / "run")
    assert m["status"] == "partial" and m["stopped_by"] == "worker_lost"
    assert [w["status"] for w in m["workers"]].count("lost") == 1
    assert "Traceback" not in res["stderr"]


# ---- errors, without starting Ray -------------------------------------------------------------


@pytest.mark.slow
def test_in_process_engine_with_ray_is_a_one_line_error(tmp_path):
    """`harness run` of the in-process quickstart with --workers: exit 2, one line, no Ray."""
    problem = ray_problem()
    cmd = [
        "-m",
        "harness",
        "run",
        str(ROOT / "scenarios" / "quickstart.yaml"),
        "--workers",
        "2",
        "--set",
        "workload.sessions=1",
        "-o",
        str(tmp_path / "run"),
    ]
    # inside the namespace too, so that even a regression that started Ray stays on loopback
    done = (
        subprocess.run(
            [sys.executable, *cmd],
            capture_output=True,
            text=True,
            timeout=HANG_S,
            cwd=ROOT,
            check=False,
        )
        if problem
        else run_isolated(cmd, timeout=HANG_S, cwd=ROOT)
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "HTTP target" in lines[0] and "execution.backend" in lines[0]


def test_run_replay_distributed_refuses_an_engine_config(tmp_path):
    import asyncio

    from harness.distributed import run_replay_distributed
    from harness.engine.config import EngineConfig
    from harness.errors import InputError
    from tests.driver.helpers import sess, trace

    with pytest.raises(InputError, match="needs an HTTP target") as err:
        asyncio.run(
            run_replay_distributed(
                trace(sess("a", [(8, 2, 0.0)])), EngineConfig(), CLOSED, tmp_path, workers=2
            )
        )
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_without_ray_the_error_says_how_to_get_it(tmp_path):
    code = (
        "import sys, asyncio; sys.modules['ray'] = None\n"
        "from harness.distributed import run_replay_distributed\n"
        "from harness.driver.config import ReplayConfig\n"
        "from harness.driver.http import HTTPTargetConfig\n"
        "from tests.driver.helpers import sess, trace\n"
        "tc = HTTPTargetConfig(endpoints=('http://127.0.0.1:9',), model='m')\n"
        "asyncio.run(run_replay_distributed(trace(sess('a', [(8, 2, 0.0)])), tc, ReplayConfig(),"
        f" {str(tmp_path)!r}, workers=2))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode != 0
    assert "pip install 'agentic-harness[ray]'" in done.stderr.strip().splitlines()[-1]


# ---- the plan (pure; no Ray) ------------------------------------------------------------------


def _families(n: int):
    from tests.distributed.traces import small_trace

    return small_trace(mains=n, turns=3)


def test_plan_keeps_families_together_and_balances_requests():
    tr = _families(10)
    plan = plan_shards(tr, ReplayConfig(load="closed", concurrency=4), 3)
    assert [sh.concurrency for sh in plan.shards] == [2, 1, 1]
    mains = [sid for sh in plan.shards for sid in sh.mains]
    assert sorted(mains) == sorted(s.id for s in tr.main_sessions)  # each main exactly once
    order = [s.id for s in tr.main_sessions]
    for sh in plan.shards:
        assert sh.mains == sorted(sh.mains, key=order.index)  # trace order within a shard
        assert sh.requests == sum(len(m.turns) for sid in sh.mains for m in tr.family(sid))
    per_slot = [sh.requests / sh.concurrency for sh in plan.shards]
    assert max(per_slot) - min(per_slot) <= 7  # within one family's size (3 + 2 x 2 turns)
    assert plan_shards(tr, ReplayConfig(load="closed", concurrency=4), 3) == plan  # deterministic


def test_plan_clamps_workers_and_splits_counts():
    from harness.distributed.shard import shard_config

    tr = _families(10)
    assert len(plan_shards(tr, ReplayConfig(load="closed", concurrency=2), 8).shards) == 2
    assert (
        len(plan_shards(_families(3), ReplayConfig(load="open", session_rate=1.0), 8).shards) == 3
    )
    config = ReplayConfig(
        load="closed", concurrency=4, max_sessions=6, max_requests=20, warmup_requests=5
    )
    plan = plan_shards(tr, config, 2)
    assert plan.stopped_by == "max_sessions" and sum(len(sh.mains) for sh in plan.shards) == 6
    configs = [shard_config(config, plan, sh) for sh in plan.shards]
    assert sum(c.max_requests for c in configs) == 20
    assert sum(c.warmup_requests for c in configs) == 5
    assert all(c.max_sessions is None and c.concurrency == 2 for c in configs)


def test_open_loop_plan_is_the_single_process_schedule():
    from harness.driver.load import arrivals

    tr = _families(12)
    config = ReplayConfig(load="open", session_rate=3.0, seed=5)
    plan = plan_shards(tr, config, 3)
    whole = {s.id: t for t, s in arrivals(tr.main_sessions, config)}
    for sh in plan.shards:
        assert [t for t, _ in sh.starts] == sorted(t for t, _ in sh.starts)
        assert all(whole[sid] == t for t, sid in sh.starts)
        assert sorted(sid for _, sid in sh.starts) == sorted(sh.mains)


def test_loopback_endpoints_are_refused_on_a_multi_node_cluster():
    from harness.distributed.cluster import check_reachable_from_nodes
    from harness.errors import InputError

    class Cluster:  # what the check reads of `ray`: the node table
        def __init__(self, alive: int) -> None:
            self.alive = alive

        def nodes(self) -> list[dict]:
            return [{"Alive": True}] * self.alive + [{"Alive": False}]

    check_reachable_from_nodes(Cluster(1), ["http://127.0.0.1:8000/v1"])
    check_reachable_from_nodes(Cluster(3), ["http://10.1.2.3:8000/v1"])
    for url in ("http://127.0.0.1:8000/v1", "http://localhost:1", "http://[::1]:80"):
        with pytest.raises(InputError, match="loopback address but the Ray cluster has 3 nodes"):
            check_reachable_from_nodes(Cluster(3), [url])


def test_the_workers_target_keeps_encode():
    """Replay encodes a body before it stamps t_sent when its target has `encode`; the worker's
    announcing wrapper passes it through, so a worker's TTFT does not count the encoding."""
    import asyncio

    from harness.distributed.worker import _Announcing

    class _Target:
        name, endpoints = "openai-http", ("http://x",)

        def encode(self, req):
            return (b"{}",)

    assert _Announcing(_Target(), asyncio.Event()).encode(None) == (b"{}",)
