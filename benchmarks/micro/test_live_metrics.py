"""The live metrics' fold (harness/export/) against the driver's own per-reply work it rides on:
256 replies of 32 tokens each parsed from their SSE stream and decoded (the baseline), and the
same 256 finished records folded into the metrics (a batch fold of their inter-token gaps
included). The ratio is the fold's share of that part of the driver's CPU.

    .venv/bin/python -m pytest benchmarks/micro -p no:cacheprovider
"""

from __future__ import annotations

import orjson
import pytest

from harness.driver.http.sse import SSEParser
from harness.export.run_metrics import RunLabels, RunMetrics
from harness.schema import new_record

REPLIES, TOKENS = 256, 32
EVENT = orjson.dumps({"choices": [{"index": 0, "delta": {"content": " word"}}]})
STREAM = b"".join(b"data: " + EVENT + b"\n\n" for _ in range(TOKENS)) + b"data: [DONE]\n\n"


def _record():
    times = [1.05 + 0.02 * i for i in range(TOKENS)]
    rec = new_record(
        request_id="r",
        session_id="s",
        turn=0,
        endpoint="http://127.0.0.1:8000",
        t_sent=1.0,
        t_done=1.7,
        chunk_times=times,
        chunk_tokens=[1] * TOKENS,
        prompt_tokens=1400,
        completion_tokens=TOKENS,
        cached_tokens=1300,
        status="ok",
    )
    rec["t_first_token"], rec["t_last_token"] = times[0], times[-1]
    return rec


RECORDS = [_record() for _ in range(REPLIES)]


def _parse_baseline() -> int:
    n = 0
    for _ in range(REPLIES):
        parser = SSEParser()
        for event in parser.feed(STREAM):
            if event != b"[DONE]":
                orjson.loads(event)
                n += 1
    return n


def _fold() -> int:
    metrics = RunMetrics(RunLabels("bench", "chat"))
    for rec in RECORDS:
        metrics.observe(rec)
    return sum(sum(s.status.values()) for s in metrics.snapshot().values())


@pytest.mark.benchmark(group="live-metrics")
def test_parse_baseline(timed):
    assert timed(_parse_baseline) == REPLIES * TOKENS


@pytest.mark.benchmark(group="live-metrics")
def test_fold(timed):
    assert timed(_fold) == REPLIES
