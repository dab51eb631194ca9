"""Run folders logged as MLflow runs (`harness export mlflow`, `--mlflow-tracking-uri`).

Each run folder becomes one MLflow run in the experiment, named by its run id and tagged with
its key (`mlflow_fields.run_key`): exporting the same folder again finds that run and updates
it (new metric values, tags, artifacts) instead of adding a second one. Parameters are set once:
a run's manifest does not change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException

from harness.analysis.loader import read_manifest, read_optional_json
from harness.errors import InputError
from harness.export import mlflow_fields as fields
from harness.schema import REPORT_FILE, SCENARIO_FILE, SUMMARY_FILE

DEFAULT_EXPERIMENT = "agentic-harness"
ARTIFACTS = (SUMMARY_FILE, REPORT_FILE, SCENARIO_FILE)
_ENDED = {"complete": "FINISHED", "partial": "FINISHED", "interrupted": "KILLED"}


def export_runs(
    run_dirs: Sequence[Path],
    tracking_uri: str,
    experiment: str = DEFAULT_EXPERIMENT,
    verdicts: Iterable[Path] = (),
) -> list[str]:
    """Log each run folder (which holds summary.json) into `experiment`; one line per run."""
    for name in ("mlflow", "alembic"):  # their INFO lines (database set-up) are not ours
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        client = MlflowClient(tracking_uri=tracking_uri)
        experiment_id = _experiment(client, experiment, tracking_uri)
        return [_export(client, experiment_id, Path(d), list(verdicts)) for d in run_dirs]
    except MlflowException as exc:
        raise InputError(f"MLflow at {tracking_uri}: {exc.message}", field="tracking URI") from None


def _experiment(client: MlflowClient, name: str, tracking_uri: str) -> str:
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    return client.create_experiment(name, artifact_location=_artifacts_beside(tracking_uri))


def _artifacts_beside(tracking_uri: str) -> str | None:
    """A local SQLite store keeps the artifacts beside its database (MLflow's own default is
    ./mlruns under whatever folder the command ran in); a server decides for itself."""
    prefix = "sqlite:///"
    if not tracking_uri.startswith(prefix):
        return None
    return (Path(tracking_uri[len(prefix) :]).resolve().parent / "mlartifacts").as_uri()


def _export(client: MlflowClient, experiment_id: str, run_dir: Path, verdicts: list[Path]) -> str:
    manifest = read_manifest(run_dir / "manifest.json", [])
    summary = read_optional_json(run_dir / SUMMARY_FILE)
    if summary is None:
        raise InputError(f"no {SUMMARY_FILE}: `harness analyze {run_dir}` first", path=run_dir)
    key = fields.run_key(manifest, run_dir)
    found = client.search_runs(
        [experiment_id], f"tags.`{fields.RUN_KEY_TAG}` = '{key}'", max_results=1
    )
    run_id = str(manifest.get("run_id", run_dir.name))
    tags = fields.tags(manifest, summary, run_dir) | fields.verdict_tags(run_dir, run_id, verdicts)
    if found:
        logged, existing = found[0].info.run_id, found[0].data
    else:
        logged, existing = client.create_run(experiment_id, run_name=run_id).info.run_id, None
    _log(client, logged, existing, fields.params(manifest), fields.metrics(summary), tags)
    for name in ARTIFACTS:
        if (run_dir / name).is_file():
            client.log_artifact(logged, str(run_dir / name))
    client.set_terminated(logged, _ENDED.get(str(manifest.get("status")), "FAILED"))
    return f"{run_dir}: {'updated' if found else 'logged'} as MLflow run {logged}"


def _log(client: MlflowClient, run_id: str, existing, params: dict, metrics: dict, tags: dict):
    """Parameters not yet set, metrics whose value changed, every tag; in batches of MLflow's
    limits (100 parameters, 100 tags, 1,000 metrics a call)."""
    known_params = existing.params if existing is not None else {}
    known_metrics = existing.metrics if existing is not None else {}
    now = int(time.time() * 1000)
    new_metrics = [Metric(k, v, now, 0) for k, v in metrics.items() if known_metrics.get(k) != v]
    new_params = [Param(k, v) for k, v in params.items() if k not in known_params]
    new_tags = [RunTag(k, v) for k, v in tags.items()]
    for i in range(0, max(len(new_params), len(new_tags), 1), 100):
        client.log_batch(
            run_id,
            metrics=new_metrics if i == 0 else [],
            params=new_params[i : i + 100],
            tags=new_tags[i : i + 100],
        )
