"""pytest-benchmark micro-benchmarks: each group's figures as ratios against its baseline, measured
in the same run (the test whose name ends in `_baseline`)."""

from __future__ import annotations

from collections import defaultdict

import pytest

MEDIANS: dict[str, dict[str, float]] = defaultdict(dict)


@pytest.fixture
def timed(benchmark, request):
    """`benchmark`, with its median kept for the ratio table printed at the end."""

    def run(fn, *args, **kwargs):
        result = benchmark(fn, *args, **kwargs)
        group = request.node.get_closest_marker("benchmark").kwargs["group"]
        MEDIANS[group][request.node.name] = benchmark.stats.stats.median
        return result

    return run


def pytest_terminal_summary(terminalreporter):
    for group, medians in MEDIANS.items():
        base = next((v for k, v in medians.items() if k.endswith("_baseline")), None)
        if not base:
            continue
        terminalreporter.write_line(f"{group}: median ratios against the baseline")
        for name, value in medians.items():
            terminalreporter.write_line(
                f"  {name:<48} {value / base:8.2f}x  ({value * 1e3:.3f} ms)"
            )
