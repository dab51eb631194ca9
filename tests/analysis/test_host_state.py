"""A run's host is busy when its threads waited for a CPU too long or time was stolen; only a run
without a wait share is judged on other work's load per CPU and the self-check's blame."""

from __future__ import annotations

import pytest

from harness.analysis.host_state import Screen, host_state


def summary(load1=1.0, cpus=2, steal=0.0, process=0.5, warnings=(), cause=None, wait=None) -> dict:
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
            "run_queue_wait_share": wait,
        }
    }


def test_the_process_own_share_is_not_other_work():
    state = host_state(summary(load1=3.5, process=1.5), max_load_per_cpu=1.5)
    assert state.others_load_per_cpu == pytest.approx(1.0) and not state.busy


def test_other_work_past_the_limit_is_busy_and_says_by_how_much():
    state = host_state(summary(load1=7.0, process=1.0), max_load_per_cpu=1.5)
    assert state.busy and state.others_load_per_cpu == pytest.approx(3.0)
    assert "3.00 per CPU > 1.5" in state.why


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


def test_a_wait_share_past_the_limit_is_busy_whatever_the_load():
    state = host_state(summary(load1=0.5, wait=0.8), max_wait_share=0.75)
    assert state.busy and "waited for a CPU 80% of the time > 75%" in state.why
    assert state.wait_share == pytest.approx(0.8) and state.load_average == pytest.approx(0.5)


def test_with_a_wait_share_the_load_average_and_the_blame_do_not_decide():
    late = ["client: sends were late (...)"]
    loaded = summary(load1=20.0, process=0.1, wait=0.3, warnings=late, cause="host")
    assert not host_state(loaded, max_load_per_cpu=3.0, max_wait_share=0.75).busy
    assert host_state({**loaded, "client": {**loaded["client"], "run_queue_wait_share": None}}).busy


def test_the_screen_carries_its_limits_to_every_caller():
    strict, loose = Screen(max_wait_share=0.2), Screen(max_wait_share=0.9)
    run = summary(wait=0.5)
    assert strict.state(run).busy and not loose.state(run).busy
    assert strict.why(run).startswith("host busy: its threads waited") and loose.why(run) is None
    assert Screen(0.5, 2.0).to_json() == {"max_wait_share": 0.5, "max_load_per_cpu": 2.0}
