"""`vllm bench serve --save-result --save-detailed`: one JSON object with per-request lists.

The detailed lists are parallel, one entry per request: `start_times` (the client's
perf_counter at send, s), `ttfts`, `itls` (the gaps between streamed chunks), `latencies` (send
to the last chunk), `input_lens`, `output_lens`, `queue_times` (waiting for the client's
concurrency limit) and `errors` ("" when the request succeeded).
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.errors import InputError
from harness.importers.common import NO_TRACE, Imported, chunk_times, need, record
from harness.schema import Record

NOTES = [
    "vLLM's ITL is every gap between streamed chunks, not divided by the chunk's tokens; chunk_tokens "
    "are not in the export, so each chunk counts as one token and our ITL here equals vLLM's",
    "vLLM's E2EL ends at the last streamed chunk; t_done here is that time, so E2EL matches vLLM's, "
    "not ours (which ends when the stream closes)",
    "prompt_tokens are vLLM's client-side prompt lengths (input_lens), not a server usage report",
    "cached_tokens: vLLM bench does not record them; the server hit rate is not available",
    NO_TRACE,
    "sessions: vLLM bench sends independent requests; each is imported as its own one-turn session",
]
LISTS = ("start_times", "ttfts", "itls", "latencies", "input_lens", "output_lens", "errors")


def read(path: Path) -> Imported:
    if path.is_dir():
        found = sorted(path.glob("*.json"))
        if len(found) != 1:
            raise InputError(
                f"expected one result .json in the folder, found {len(found)}", path=path
            )
        path = found[0]
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read ({exc})", path=path) from exc
    lists = {
        k: need(result, k, path, "run vllm bench serve with --save-result --save-detailed")
        for k in LISTS
    }
    n = len(lists["start_times"])
    if any(len(v) != n for v in lists.values()):
        raise InputError("the per-request lists have different lengths", path=path)
    queue = result.get("queue_times") or [0.0] * n
    t0 = min(lists["start_times"]) if n else 0.0
    records = [_record(i, lists, queue[i], t0) for i in range(n)]
    settings = {
        k: result.get(k)
        for k in (
            "date",
            "backend",
            "model_id",
            "tokenizer_id",
            "num_prompts",
            "request_rate",
            "burstiness",
            "max_concurrency",
        )
    }
    return Imported("vllm-bench", path, records, list(NOTES), meta=settings)


def _record(i: int, lists: dict, queue_time: float | None, t0: float) -> Record:
    t_sent = lists["start_times"][i] - t0
    error = lists["errors"][i]
    ok = not error
    times = chunk_times(t_sent + lists["ttfts"][i], lists["itls"][i]) if ok else []
    return record(
        request_id=f"vllm-{i}",
        session_id=f"vllm-{i}",
        t_scheduled=t_sent - (queue_time or 0.0),
        t_sent=t_sent,
        t_first_token=times[0] if times else None,
        t_last_token=times[-1] if times else None,
        t_done=t_sent + lists["latencies"][i] if ok else t_sent + max(lists["latencies"][i], 0.0),
        chunk_times=times,
        prompt_tokens_expected=lists["input_lens"][i],
        prompt_tokens=lists["input_lens"][i],
        completion_tokens=lists["output_lens"][i] if ok else None,
        status="ok" if ok else "error",
        error=None if ok else {"class": error.split(":", 1)[0][:80] or "error", "message": error},
    )
