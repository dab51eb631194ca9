"""Run folders logged to a real MLflow tracking store (SQLite, in a temporary folder) and read
back through MLflow's own client: parameters, metrics, tags, artifacts; no duplicate on
re-export; the verdict of a comparison that judged them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.analysis.summary import analyze_run
from harness.app.cli import main
from harness.schema import new_record
from tests.analysis.golden import GOLDEN_RECORDS, write_run

pytestmark = pytest.mark.slow  # MLflow creates its database's tables (seconds) per store

mlflow = pytest.importorskip("mlflow", reason="MLflow is the [mlflow] extra")


@pytest.fixture(scope="module")
def runs(simulated_run, tmp_path_factory) -> list[Path]:
    golden = tmp_path_factory.mktemp("golden") / "golden"
    write_run(golden, [new_record(**r) for r in GOLDEN_RECORDS])
    analyze_run(golden)
    return [simulated_run, golden]


@pytest.fixture(scope="module")
def store(runs, tmp_path_factory):
    """Both runs exported twice into one store: (tracking URI, the client)."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    for _ in range(2):
        assert main(["export", "mlflow", *map(str, runs), "--tracking-uri", uri]) == 0
    return uri, mlflow.MlflowClient(tracking_uri=uri)


def _runs_of(client, experiment: str = "agentic-harness"):
    exp = client.get_experiment_by_name(experiment)
    return {r.data.tags["harness.run_id"]: r for r in client.search_runs([exp.experiment_id])}


def test_each_folder_is_one_run_however_often_exported(store, runs):
    _, client = store
    exp = client.get_experiment_by_name("agentic-harness")
    assert len(client.search_runs([exp.experiment_id])) == len(runs)
    found = _runs_of(client)
    assert sorted(found) == sorted(
        json.loads((r / "manifest.json").read_text())["run_id"] for r in runs
    )


def test_parameters_metrics_and_artifacts_are_the_folders(store, simulated_run):
    _, client = store
    manifest = json.loads((simulated_run / "manifest.json").read_text())
    summary = json.loads((simulated_run / "summary.json").read_text())
    run = _runs_of(client)[manifest["run_id"]]
    params, metrics = run.data.params, run.data.metrics
    assert params["scenario"] == "quickstart"
    assert params["trace_sha256"] == manifest["trace_sha256"]
    assert params["harness_version"] == manifest["harness_version"]
    assert params["replay.load"] == "closed" and params["replay.concurrency"] == "4"
    assert metrics["ttft_s.p90"] == pytest.approx(summary["ttft_s"]["p90"])
    assert metrics["tpgs"] == pytest.approx(summary["tpgs"])
    assert metrics["cache_hit_rate"] == pytest.approx(summary["cache_hit_rate"])
    assert metrics["ideal_cache_hit_rate"] == pytest.approx(summary["ideal_cache_hit_rate"])
    assert metrics["goodput.fraction"] == pytest.approx(summary["goodput"]["fraction"])
    assert "cache.miss_share.cold" in metrics
    assert run.data.tags["harness.status"] == "complete"
    assert run.info.status == "FINISHED"
    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert names == {"summary.json", "report.html", "scenario.yaml"}
    # logged twice, each metric once: a re-export adds no point to an unchanged metric
    assert len(client.get_metric_history(run.info.run_id, "ttft_s.p90")) == 1


def test_a_verdict_tags_the_runs_it_judged(store, runs, tmp_path, capsys):
    uri, client = store
    base, cand = runs
    main(["compare", str(base), str(cand), "--format", "json"])
    verdict = tmp_path / "compare.json"
    verdict.write_text(capsys.readouterr().out)
    args = ["export", "mlflow", str(base), str(cand), "--tracking-uri", uri]
    assert main([*args, "--verdict", str(verdict)]) == 0
    found = _runs_of(client)
    judged = json.loads(verdict.read_text())["verdict"]
    for run_dir, role in ((base, "baseline"), (cand, "candidate")):
        run_id = json.loads((run_dir / "manifest.json").read_text())["run_id"]
        tags = found[run_id].data.tags
        assert (tags["harness.verdict"], tags["harness.verdict.role"]) == (judged, role)
        assert tags["harness.verdict.by"] == "compare"
    exp = client.get_experiment_by_name("agentic-harness")
    assert len(client.search_runs([exp.experiment_id])) == 2


def test_a_folder_without_a_summary_is_analysed_first(store, runs, tmp_path):
    uri, client = store
    copy = tmp_path / "copy"
    shutil.copytree(runs[1], copy)
    (copy / "summary.json").unlink()
    assert main(["export", "mlflow", str(copy), "--tracking-uri", uri, "--experiment", "x"]) == 0
    assert (copy / "summary.json").is_file()
    assert len(_runs_of(client, "x")) == 1


def test_simulate_logs_its_run_at_the_end(store, tmp_path):
    uri, client = store
    out = tmp_path / "run"
    sets = ["--set", "load.max_requests=20", "--set", "workload.sessions=2"]
    quickstart = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"
    args = ["simulate", str(quickstart), "-o", str(out), "--quiet", *sets]
    assert main([*args, "--mlflow-tracking-uri", uri, "--mlflow-experiment", "nightly"]) == 0
    assert list(_runs_of(client, "nightly")) == [out.name]
    # the artifacts beside the database, not in the folder the command ran in
    store_dir = Path(uri.removeprefix("sqlite:///")).parent
    assert (store_dir / "mlartifacts").is_dir() and not Path("mlruns").exists()
