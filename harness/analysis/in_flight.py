"""Tasks and requests in flight over a run, as the step functions the measured window was chosen
from (`window.task_spans`, `window.request_spans`), on the run clock: what the report draws."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.analysis.window import level, request_spans, task_spans


@dataclass(frozen=True)
class InFlight:
    """Each level holds from its time to the next one's (seconds on the run clock)."""

    task_times: np.ndarray
    tasks: np.ndarray
    request_times: np.ndarray
    requests: np.ndarray


def in_flight(records: pd.DataFrame) -> InFlight:
    task_times, tasks = level(*task_spans(records))
    request_times, requests = level(*request_spans(records))
    return InFlight(task_times, tasks, request_times, requests)
