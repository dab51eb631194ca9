"""The driver's per-chunk work on a stream of OpenAI completion events: parsing the SSE framing
and decoding each event, against splitting the same bytes on blank lines (the floor).

    .venv/bin/python -m pytest benchmarks/micro -p no:cacheprovider
"""

from __future__ import annotations

import orjson
import pytest

from harness.driver.http.sse import SSEParser

EVENT = orjson.dumps({"choices": [{"index": 0, "text": " word", "finish_reason": None}]})
STREAM = b"".join(b"data: " + EVENT + b"\n\n" for _ in range(512)) + b"data: [DONE]\n\n"
READS = [STREAM[i : i + 1400] for i in range(0, len(STREAM), 1400)]  # one TCP segment a read


def _split_baseline() -> int:
    rest, n = b"", 0
    for data in READS:
        *events, rest = (rest + data).split(b"\n\n")
        n += len(events)
    return n


def _parse() -> int:
    parser, n = SSEParser(), 0
    for data in READS:
        for event in parser.feed(data):
            if event != b"[DONE]":
                orjson.loads(event)
            n += 1
    return n


@pytest.mark.benchmark(group="sse")
def test_split_baseline(timed):
    assert timed(_split_baseline) == 513


@pytest.mark.benchmark(group="sse")
def test_parse_and_decode(timed):
    assert timed(_parse) == 513
