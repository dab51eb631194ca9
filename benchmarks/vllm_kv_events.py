"""Where the cache model parts from a real vLLM run, settled by vLLM's own KV cache events.

    .venv/bin/python -m benchmarks.vllm_kv_events record VLLM_DIR OUT --pages 146 --seed 886208
    .venv/bin/python -m benchmarks.vllm_kv_events compare RUN EVENTS --pages 146

`record` starts vLLM as `whatif_vllm_check.py` does (its functions) at `--pages`, with
`--kv-events-config` publishing to a subscriber bound on 127.0.0.1 (vLLM's venv python runs
`subscribe`, so pyzmq is vLLM's, not ours), runs the check's scenario at `--seed` into OUT/run,
stops vLLM, writes OUT/events.jsonl (every batch: its sequence number, when it came, its msgpack
bytes as base64; and vLLM's KV usage from /metrics, polled), then compares. `compare` replays
the run once exactly (`harness.whatif.predict.exact_replay`, the `predicted_self_exact` row),
logging every block the model hashes or drops (`PageMap.listener`) and its free queue at every
step (`Replay.observe`), and sets that beside vLLM's BlockStored / BlockRemoved events, matched
by content: a block is its token prefix (the model's chained block hash, rebuilt for vLLM's
blocks from their token ids and parent hashes) and its KV group's kind. At the exact replay's
first parting it prints which of that request's blocks each side held, and for every block one
side had dropped, the step that dropped it on each side: what each admitted and evicted there,
in order, and the free pages each had (vLLM's from its usage gauge, sampled).

vLLM 0.32 (vllm/v1/core/block_pool.py): BlockStored when a block is hashed (at schedule), a
sliding group's only inside its request's window mask; BlockRemoved only when a hashed block
leaves the hash map, i.e. when a free one is popped for reuse (`_maybe_evict_cached_block`):
freeing a block sends nothing, so neither does reusing an unhashed one.
"""

from __future__ import annotations

import argparse
import base64
import inspect
import json
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import msgpack

from benchmarks.vllm_kv_parting import Event, Sides, account, replay_logged
from benchmarks.whatif_vllm_check import Log, run_scenario, start_vllm, stop_vllm
from harness.engine.prefix_lookup import ROOT_HASH, block_hash

TOPIC = "kv"


def subscribe(endpoint: str, topic: str, out: str, metrics: str) -> None:
    """Write every event batch published to `endpoint` (bound here) to `out` as it comes, and
    vLLM's KV usage (`metrics`, its /metrics) four times a second, until SIGTERM. Runs in vLLM's
    venv (`record` ships this function's source): nothing but pyzmq and the standard library."""
    import base64
    import json
    import signal
    import time
    import urllib.request

    import zmq

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    sock = zmq.Context.instance().socket(zmq.SUB)
    sock.bind(endpoint)
    sock.setsockopt(zmq.SUBSCRIBE, topic.encode())
    polled = 0.0
    with open(out, "w") as f:
        while not stop:
            if sock.poll(50):
                _, seq, payload = sock.recv_multipart()
                line = {"seq": int.from_bytes(seq, "big"), "t_recv": time.time()}
                line["payload"] = base64.b64encode(payload).decode()
                f.write(json.dumps(line) + "\n")
            if time.time() - polled >= 0.25:
                polled = time.time()
                try:
                    with urllib.request.urlopen(metrics, timeout=1) as r:
                        text = r.read().decode()
                except OSError:
                    continue
                for row in text.splitlines():
                    if row.startswith("vllm:kv_cache_usage_perc"):
                        f.write(json.dumps({"t_recv": polled, "kv_usage": float(row.split()[-1])}))
                        f.write("\n")
            f.flush()
    sock.close(linger=0)


# ---- vLLM's events ---------------------------------------------------------------------------


def decode_batch(payload: bytes) -> tuple[float, list[dict]]:
    """vLLM's KVEventBatch (msgspec msgpack, array-like): its time and its events, each a map
    with its `type` (BlockStored, BlockRemoved, AllBlocksCleared)."""
    ts, events, *_ = msgpack.unpackb(payload, raw=False)
    return float(ts), list(events)


def read_events(
    path: Path,
) -> tuple[list[tuple[int, float, list[dict]]], list[tuple[float, float]]]:
    """OUT/events.jsonl: the batches (seq, time, events) and the KV usage samples (time, usage)."""
    batches, usage = [], []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if "payload" in row:
            ts, events = decode_batch(base64.b64decode(row["payload"]))
            batches.append((row["seq"], ts, events))
        else:
            usage.append((row["t_recv"], row["kv_usage"]))
    return batches, usage


def content_map(batches: list[tuple[int, float, list[dict]]]) -> dict[int, bytes]:
    """vLLM's block hash -> the model's hash of the same token prefix, from every BlockStored
    that names each of its blocks (a full-attention group's always do; a sliding group's
    window mask leaves some out, and those are named by another group's event)."""
    content: dict[int, bytes] = {}
    for _, _, events in batches:
        for e in events:
            tokens = e.get("token_ids") or []
            if e["type"] != "BlockStored" or len(e["block_hashes"]) * e["block_size"] != len(
                tokens
            ):
                continue
            parent = (
                ROOT_HASH if e["parent_block_hash"] is None else content.get(e["parent_block_hash"])
            )
            if parent is None:
                continue
            size = e["block_size"]
            for j, h in enumerate(e["block_hashes"]):
                block = tokens[j * size : (j + 1) * size]
                parent = content[h] = block_hash(parent, _token_bytes(block))
    return content


def _token_bytes(tokens: list[int]) -> bytes:
    return b"".join(t.to_bytes(4, "little", signed=True) for t in tokens)


def full_group(batches: list[tuple[int, float, list[dict]]]) -> int:
    """vLLM's full-attention group: the one that hashes the most blocks (no window mask)."""
    stored: dict[int, int] = defaultdict(int)
    for _, _, events in batches:
        for e in events:
            if e["type"] == "BlockStored":
                stored[e["group_idx"]] += len(e["block_hashes"])
    return max(stored, key=lambda g: stored[g])


def vllm_events(batches: list[tuple[int, float, list[dict]]], t0: float) -> list[Event]:
    content, full = content_map(batches), full_group(batches)
    out = []
    for seq, ts, events in batches:
        for e in events:
            kind = {"BlockStored": "stored", "BlockRemoved": "removed"}.get(e["type"], "cleared")
            g = e.get("group_idx") or 0
            hashes = e.get("block_hashes") if kind != "cleared" else [None]
            for h in hashes or []:  # a sliding group's mask may leave none of its blocks
                out.append(Event(ts - t0, seq, kind, g == full, g, content.get(h)))
    return out


# ---- the commands -------------------------------------------------------------------------------


def subscriber(python: Path, endpoint: str, out: Path, metrics: str) -> subprocess.Popen:
    """`subscribe` in another interpreter (vLLM's venv: its pyzmq), from this function's source."""
    code = inspect.getsource(subscribe) + "\nimport sys\nsubscribe(*sys.argv[1:])\n"
    return subprocess.Popen([str(python), "-c", code, endpoint, TOPIC, str(out), metrics])


def record(args: argparse.Namespace) -> None:
    """vLLM at `--pages` publishing its KV events, the check's scenario at `--seed`, vLLM stopped."""
    args.out.mkdir(parents=True, exist_ok=True)
    log, endpoint = Log(args.out / "LOG"), f"tcp://127.0.0.1:{args.zmq_port}"
    metrics = f"http://127.0.0.1:{args.port}/metrics"
    sub = subscriber(
        args.vllm_dir / "v" / "bin" / "python", endpoint, args.out / "events.jsonl", metrics
    )
    events = {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": endpoint,
        "topic": TOPIC,
    }
    log(f"vLLM at {args.pages} pages, its KV events to {endpoint}")
    proc = None
    try:
        extra = ("--kv-events-config", json.dumps(events))
        proc = start_vllm(args.vllm_dir, args.port, args.max_len, args.pages, extra)
        got = run_scenario(args.out / "run", args.port, args.seed, args.max_prompt)
        log(f"run at {args.pages} pages, seed {args.seed}: {got}")
    finally:
        if proc is not None:
            stop_vllm(proc)
        time.sleep(2)  # the last batches
        sub.terminate()
        sub.wait(timeout=30)
        log("vLLM and the subscriber stopped")


def compare(run: Path, events: Path, pages: int, max_len: int) -> list[str]:
    batches, usage = read_events(events)
    t0 = json.loads((run / "manifest.json").read_text())["t0_wall"]
    exact, model = replay_logged(run, pages, max_len)
    sides = Sides(exact, model, vllm_events(batches, t0), [(t - t0, u) for t, u in usage], pages)
    for line in (run / "records.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("t_first_token") is not None:
            sides.first_tokens[r["request_id"]] = r["t_first_token"]
    head = [
        f"{run}: {len(batches)} vLLM event batches; exact replay {exact.parting['requests_as_measured']} "
        f"of {exact.parting['requests_compared']} requests as measured"
    ]
    return head + account(sides)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run vLLM with its KV events, then compare")
    rec.add_argument("vllm_dir", type=Path)
    rec.add_argument("out", type=Path)
    rec.add_argument("--seed", type=int, required=True)
    rec.add_argument("--port", type=int, default=18096)
    rec.add_argument("--zmq-port", type=int, default=5599)
    rec.add_argument("--max-prompt", type=int, default=2000)
    cmp = sub.add_parser("compare", help="a recorded run and its events, replayed exactly")
    cmp.add_argument("run", type=Path)
    cmp.add_argument("events", type=Path)
    for p in (rec, cmp):
        p.add_argument("--pages", type=int, required=True)
        p.add_argument("--max-len", type=int, default=2048)
    args = ap.parse_args()
    if args.command == "record":
        record(args)
        args.run, args.events = args.out / "run", args.out / "events.jsonl"
    print("\n".join(compare(args.run, args.events, args.pages, args.max_len)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
