"""vLLM's KV cache events beside the cache model's (benchmarks/vllm_kv_events.py): decoded from
a batch a real vLLM published, matched to the model's blocks by content, and the model's own
hash-map changes and steps as the exact replay sees them."""

import base64
import json
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from benchmarks import vllm_kv_events as kv
from benchmarks import vllm_kv_parting as parting
from harness.app.cli import main
from harness.engine.block_pool import BlockPool, hash_blocks
from harness.engine.sequence import Request, SamplingParams
from harness.whatif.predict import exact_replay

FIXTURE = Path(__file__).parent / "fixtures" / "vllm_kv_events.jsonl"


def _batches() -> list[tuple[int, float, list[dict]]]:
    return kv.read_events(FIXTURE)[0]


def _request(tokens: list[int]) -> Request:
    return Request("r", tokens, SamplingParams(max_tokens=1), 0.0)


def test_a_real_batch_decodes_to_its_events():
    batches, usage = kv.read_events(FIXTURE)
    assert batches and all(ts > 1.7e9 for _, ts, _ in batches)  # epoch seconds
    kinds = {e["type"] for _, _, events in batches for e in events}
    assert {"BlockStored", "BlockRemoved"} <= kinds
    stored = next(e for _, _, events in batches for e in events if e["type"] == "BlockStored")
    assert stored["block_size"] == 128 and isinstance(stored["block_hashes"][0], int)
    assert len(stored["token_ids"]) % 128 == 0 and stored["group_idx"] in range(6)
    assert all(0 <= u <= 1 for _, u in usage)


def test_vllm_blocks_match_the_models_by_content():
    # The model's hash of each block vLLM stored is the model's own for the same tokens: the
    # full-attention group names every block, and a sliding group's masked event (fewer hashes
    # than blocks) resolves through them.
    batches = _batches()
    content, full = kv.content_map(batches), kv.full_group(batches)
    full_events = [
        e
        for _, _, es in batches
        for e in es
        if e["type"] == "BlockStored" and e["group_idx"] == full
    ]
    first = next(e for e in full_events if e["parent_block_hash"] is None)
    ours = hash_blocks(_request(first["token_ids"]), 128, len(first["block_hashes"]))
    assert [content[h] for h in first["block_hashes"]] == ours
    masked = [
        e
        for _, _, es in batches
        for e in es
        if e["type"] == "BlockStored" and len(e["block_hashes"]) * 128 < len(e["token_ids"])
    ]
    assert masked and all(h in content for e in masked for h in e["block_hashes"])
    events = kv.vllm_events(batches, t0=0.0)
    assert sum(e.full for e in events if e.kind == "stored") == sum(
        len(e["block_hashes"]) for e in full_events
    )
    assert all(e.content is not None for e in events if e.kind == "stored")


def test_the_page_map_tells_its_listener_what_it_hashes_and_drops():
    pool, heard = BlockPool(4, 4), []
    a = _request(list(range(12)))
    pool.take(a, pool.find_prefix(a))
    assert pool.allocate_slots(a, 12)
    a.num_computed_tokens = 12
    pool.cache_blocks(a)  # no listener yet: nothing heard, nothing costs
    pool.pages.listener = lambda kind, block: heard.append((kind, block.group, block.hash))
    pool.free(a)
    b = _request(list(range(100, 112)))
    assert pool.allocate_slots(b, 12)  # 1 never-used page, then a's tail first: 2 evicted
    b.num_computed_tokens = 12
    pool.cache_blocks(b)
    hashes_a, hashes_b = hash_blocks(a, 4, 3), hash_blocks(b, 4, 3)
    assert heard[:2] == [("removed", 0, hashes_a[2]), ("removed", 0, hashes_a[1])]
    assert heard[2:] == [("stored", 0, h) for h in hashes_b]


@pytest.mark.slow
def test_the_exact_replay_is_watched_step_by_step(tmp_path):
    scenario = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"
    run = tmp_path / "run"
    sets = ["load.max_duration_s=6", "target.engine.options.num_gpu_blocks=150"]
    argv = ["simulate", str(scenario), "-o", str(run), "--quiet"]
    assert main([*argv, *(a for s in sets for a in ("--set", s))]) == 0
    log = parting.ModelLog()
    exact = exact_replay(run, {}, None, log.observe)
    assert exact.parting["first_parting"] is None  # a simulated run replays as itself
    assert len(log.steps) > 10 and all(
        a.t <= b.t for a, b in zip(log.steps, log.steps[1:], strict=False)
    )
    kinds = {e.kind for e in log.events}
    assert kinds == {"stored", "removed"} and all(e.content for e in log.events)
    assert max(len(s.free) for s in log.steps) <= 150


def test_a_steps_events_split_into_one_admission_each():
    # Two admissions in one step: the second's evictions come after the first's blocks, and a
    # third that evicts nothing starts where a group's block is no deeper than its last.
    where = {bytes([i]): (i % 4, [0]) for i in range(12)}
    sides = parting.Sides(None, None, [], [], 0, where=where)  # type: ignore[arg-type]

    def ev(kind: str, i: int, group: int = 0) -> parting.Event:
        return parting.Event(1.0, 7, kind, group == 0, group, bytes([i]))

    events = [ev("removed", 9), ev("stored", 0), ev("stored", 1), ev("stored", 1, 1)]
    events += [ev("removed", 10), ev("stored", 4), ev("stored", 5), ev("stored", 8)]
    got = parting.parts(sides, events)
    assert [(len(r), len(s)) for r, s in got] == [(1, 3), (1, 2), (0, 1)]


@pytest.mark.slow
def test_the_subscriber_writes_every_batch_it_is_sent(tmp_path):
    zmq = pytest.importorskip("zmq", reason="pyzmq (vLLM's venv has it; here via the [test] extra)")
    out, port = tmp_path / "events.jsonl", _free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    sub = kv.subscriber(Path(sys.executable), endpoint, out, "http://127.0.0.1:9/metrics")
    pub = zmq.Context.instance().socket(zmq.PUB)
    pub.connect(endpoint)  # as vLLM does with an endpoint that names a host
    payload = base64.b64decode(json.loads(FIXTURE.read_text().splitlines()[0])["payload"])
    try:
        for seq in range(1200):  # a PUB drops what it sends before the SUB joins (a slow start)
            pub.send_multipart((kv.TOPIC.encode(), seq.to_bytes(8, "big"), payload))
            time.sleep(0.05)
            if out.exists() and out.read_text().count("\n") >= 3:
                break
    finally:
        pub.close(linger=0)
        sub.send_signal(signal.SIGTERM)
        sub.wait(timeout=30)
    batches, _ = kv.read_events(out)
    assert len(batches) >= 3 and [b[0] for b in batches] == sorted(b[0] for b in batches)
    assert batches[0][2] == kv.decode_batch(payload)[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_request_looks_its_prefix_up_before_its_own_evictions():
    # Step 2: another request's allocation evicts c1 and it hashes d; then the request's own
    # allocation evicts c9 and it hashes its first uncached block p1. It looked [c0, p1] up just
    # before evicting c9: c0 still held once, c1 gone.
    def ev(kind: str, name: bytes, step: int) -> parting.Event:
        return parting.Event(float(step), step, kind, True, 0, name)

    events = [ev("stored", b"c0", 1), ev("stored", b"c1", 1), ev("removed", b"c1", 2)]
    events += [ev("stored", b"d", 2), ev("removed", b"c9", 2), ev("stored", b"p1", 2)]
    at = parting.admitted(events, [b"c0", b"p1"], cached=128, t_sent=0.0)
    assert at == 4
    now = parting.held(events, at)
    table, lost = parting.held_table([b"c0", b"p1"], now, {(True, b"c0"): 0})
    assert now[(True, b"c0")] == 1 and now[(True, b"c1")] == 0 and lost == [(True, b"c0")]
    assert table[0] == "    block 0: full vLLM 1 model 0; sliding vLLM 0 model 0"
