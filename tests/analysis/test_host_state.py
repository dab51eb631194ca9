"""A run's host is busy when other work's load per CPU, stolen time or the self-check says so."""

from __future__ import annotations

import pytest

from harness.analysis.host_state import host_state


def summary(load1=1.0, cpus=2, steal=0.0, process=0.5, warnings=(), cause=None) -> dict:
    host = {
        "cpus": cpus,
        "load1_mean": load1,
        "load1_min": load1,
        "load1_max": load1,
        "runnable_mean": load1,
        "runnable_max": int(load1),
        "steal_share": steal,
    }
    return {
        "client": {
            "host_load": host,
            "process_cpu_share": process,
            "warnings": list(warnings),
            "cause": cause,
        }
    }


def test_the_process_own_share_is_not_other_work():
    state = host_state(summary(load1=3.5, process=1.5), max_load_per_cpu=1.5)
    assert state.others_load_per_cpu == pytest.approx(1.0) and not state.busy


def test_other_work_past_the_limit_is_busy_and_says_by_how_much():
    state = host_state(summary(load1=7.0, process=1.0), max_load_per_cpu=1.5)
    assert state.busy and state.others_load_per_cpu == pytest.approx(3.0)
    assert "3.00 per CPU > 1.5 on 2 CPUs" in state.why


def test_stolen_time_is_busy():
    state = host_state(summary(steal=0.2), max_load_per_cpu=10)
    assert state.busy and "20% of CPU time stolen" in state.why


def test_a_self_check_that_blamed_the_host_is_busy_but_one_that_did_not_is_not():
    late = ["client: event loop ran late (...)"]
    assert host_state(summary(warnings=late, cause="host"), max_load_per_cpu=10).busy
    assert not host_state(summary(warnings=late, cause="driver"), max_load_per_cpu=10).busy
    assert not host_state(summary(cause="host"), max_load_per_cpu=10).busy  # no warning


def test_an_unsampled_host_is_not_called_busy():
    state = host_state({"client": {"host_load": None, "warnings": []}})
    assert not state.busy and state.others_load_per_cpu is None and state.why is None
