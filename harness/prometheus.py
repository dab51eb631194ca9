"""Reading a Prometheus text exposition (the reference engine's `/metrics` or any vLLM server's).

Low-level: whoever scrapes a server's counters reads them with this, without importing the server.
"""

from __future__ import annotations

import re

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Samples of a Prometheus text exposition: (name, labels, value)."""
    samples = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None or line.startswith("#"):
            continue
        labels = dict(_LABEL.findall(m.group(2) or ""))
        samples.append((m.group(1), labels, float(m.group(3))))
    return samples


def cache_block_size(text: str) -> int | None:
    """The KV block size a vLLM-style server exports as the `block_size` label of
    `vllm:cache_config_info` (None when it exports none)."""
    for name, labels, _ in parse_prometheus(text):
        if name == "vllm:cache_config_info" and labels.get("block_size", "").isdigit():
            return int(labels["block_size"])
    return None


def metric_total(text: str, name: str, **labels: str) -> float:
    """Sum of a metric's samples whose labels include `labels` (0.0 when absent)."""
    return sum(
        v
        for n, lab, v in parse_prometheus(text)
        if n == name and all(lab.get(k) == want for k, want in labels.items())
    )


# vLLM's speculative-decoding counters (a draft = one verify step of one request) and SGLang's
# gauges (its scheduler's figures over the last logged batch, not counters: no difference taken).
SPEC_COUNTERS = {
    "spec_decode_num_drafts": "vllm:spec_decode_num_drafts_total",
    "spec_decode_num_draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "spec_decode_num_accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total",
}
SPEC_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
SPEC_GAUGES = {
    "sglang_spec_accept_length": "sglang:spec_accept_length",
    "sglang_spec_accept_rate": "sglang:spec_accept_rate",
}


def spec_decode(text: str) -> dict:
    """The speculative-decoding figures a server exports (empty when it exports none): vLLM's
    counters, accepted tokens per draft position (a list, position 0 first), SGLang's gauges."""
    samples = parse_prometheus(text)
    names = {n for n, _, _ in samples}
    out: dict = {
        key: metric_total(text, name)
        for key, name in {**SPEC_COUNTERS, **SPEC_GAUGES}.items()
        if name in names
    }
    per_pos: dict[int, float] = {}
    for name, labels, value in samples:
        if name == SPEC_PER_POSITION and labels.get("position", "").isdigit():
            pos = int(labels["position"])
            per_pos[pos] = per_pos.get(pos, 0.0) + value
    if per_pos:
        out["spec_decode_accepted_per_pos"] = [per_pos.get(i, 0.0) for i in range(max(per_pos) + 1)]
    return out
