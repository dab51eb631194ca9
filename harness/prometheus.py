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
