"""`harness capacity`: each run one sample, repeats near the knee, a band, undecided points never
met, non-monotone points re-run, busy hosts flagged, a budget kept, the binding SLO in words."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.analysis.capacity import MET, MISSED, MIXED, UNDECIDED, Rule, RunOutcome, decide
from harness.analysis.slo import parse_slos
from harness.app.capacity.search import Search, Settings
from harness.app.cli import main

SLOS = parse_slos({"ttft_p90": "1s", "interactivity_p90": 20}, source="slos")
QUIET = {"cpus": 2, "during": {"load1_mean": 1.0}, "own_cpu_share": 0.5}
BUSY = {"cpus": 2, "during": {"load1_mean": 6.0}, "own_cpu_share": 0.5}


def run(c, interactivity, *, ttft=0.2, tasks=20, busy=False, k=1):
    return RunOutcome(
        c,
        f"c{c}-r{k}",
        {"ttft_p90": ttft, "interactivity_p90": interactivity},
        tasks,
        tasks // 2,
        BUSY if busy else QUIET,
        busy,
        30.0,
    )


def test_a_run_clear_of_its_bounds_decides_its_point_alone():
    assert decide(8, [run(8, 40)], SLOS, Rule()).state == MET
    assert decide(8, [run(8, 40, ttft=3.0)], SLOS, Rule()).state == MISSED
    assert decide(8, [run(8, 40)], SLOS, Rule()).wants == 0


def test_a_point_near_its_bound_asks_for_repeats_and_is_decided_by_their_share():
    rule = Rule(repeats=3)
    one = decide(60, [run(60, 21)], SLOS, rule)
    assert one.near and one.wants == 2 and one.state == UNDECIDED  # never met on one near run
    shares = {(21, 22, 21.5): MET, (21, 19, 22): MIXED, (21, 19, 19.5): MISSED}
    for values, state in shares.items():
        v = decide(60, [run(60, x, k=i) for i, x in enumerate(values)], SLOS, rule)
        assert v.state == state and v.wants == 0 and v.decided_runs == 3


def test_runs_that_disagree_make_a_point_near_even_when_each_is_clear():
    v = decide(60, [run(60, 40), run(60, 10, k=2)], SLOS, Rule(repeats=3))
    assert v.near and v.wants == 1


def test_a_run_with_too_few_tasks_is_undecided_never_met():
    v = decide(1, [run(1, 200, tasks=2)], SLOS, Rule(min_tasks=5))
    assert v.state == UNDECIDED and v.decided_runs == 0 and v.wants == 0
    assert decide(1, [run(1, 200, tasks=5)], SLOS, Rule(min_tasks=5)).state == MET


def test_the_spread_between_runs_is_a_t_interval_of_their_figures():
    xs = [21.0, 19.0, 22.0]
    v = decide(60, [run(60, x, k=i) for i, x in enumerate(xs)], SLOS, Rule())
    spread = v.slos["interactivity_p90"]
    half = 4.302652729911275 * np.std(xs, ddof=1) / np.sqrt(3)  # t(0.975, 2)
    assert spread.mean == pytest.approx(np.mean(xs)) and spread.missed_runs == 1
    assert spread.interval == pytest.approx((np.mean(xs) - half, np.mean(xs) + half))


def test_a_busy_host_asks_for_a_run_more_unless_the_point_met_clear_of_its_bounds():
    rule = Rule(repeats=3)
    assert decide(8, [run(8, 40, busy=True)], SLOS, rule).busy_wants == 0
    assert decide(8, [run(8, 5, busy=True)], SLOS, rule).busy_wants == 1
    near = [run(60, x, busy=True, k=i) for i, x in enumerate((21, 22, 21))]
    v = decide(60, near, SLOS, rule)
    assert v.busy_wants == 1 and v.busy_runs == 3
    quiet = decide(60, [*near, run(60, 19, k=4)], SLOS, rule)
    assert quiet.busy_wants == 0 and quiet.decided_runs == 4  # too few quiet runs: all decide


class Fake:
    """A target whose P90 interactivity falls with concurrency, with seeded run-to-run noise; each
    run takes 40 s of a fake clock."""

    def __init__(self, curve, noise=0.0, seed=0, tasks=lambda c: 4 * c, busy=lambda c, k: False):
        self.curve, self.noise, self.tasks, self.busy = curve, noise, tasks, busy
        self.rng = np.random.default_rng(seed)
        self.now = 0.0
        self.calls: list[tuple[int, int]] = []

    def measure(self, c, k):
        self.now += 40.0
        self.calls.append((c, k))
        x = self.curve(c, k) * (1 + self.noise * self.rng.standard_normal())
        return run(c, x, tasks=self.tasks(c), busy=self.busy(c, k), k=k)

    def search(self, **settings):
        s = Search(self.measure, SLOS, Settings(**settings), clock=lambda: self.now)
        return s, s.search()


def falling(knee):
    return lambda c, k: 20.0 * knee / c  # meets (>= 20) up to the knee


def test_the_search_finds_the_knee_with_repeats_only_near_it():
    fake = Fake(falling(60))
    search, points = fake.search(resolution=0.05, budget_s=None)
    from harness.analysis.capacity_band import band

    low, high = band(points)
    assert low <= 60 < high and high - low <= max(1, 0.05 * low) + 1
    for c, p in points.items():
        assert len(p.runs) == (3 if p.near else 1), c
    assert all(len(points[c].runs) == 1 for c in (4, 8, 16))  # far below the knee: one run


def test_a_noisy_target_gives_a_band_around_its_knee():
    answers = []
    for seed in range(4):
        fake = Fake(falling(100), noise=0.05, seed=seed)
        from harness.analysis.capacity_band import band

        _, points = fake.search(budget_s=None)
        low, high = band(points)
        assert high is not None and low <= 100 * 1.1 and high >= 100 * 0.9
        answers.append(low)
    assert max(answers) / min(answers) <= 1.25


def test_points_with_too_few_tasks_are_passed_over_below_and_never_met():
    fake = Fake(falling(60), tasks=lambda c: c)  # 1, 2 and 4 serve fewer than 5 tasks
    _, points = fake.search(budget_s=None)
    assert [points[c].state for c in (1, 2, 4)] == [UNDECIDED] * 3
    assert points[8].state == MET and max(c for c, p in points.items() if p.state == MET) >= 56


def test_a_point_met_above_a_failing_one_is_re_run_and_widens_the_band():
    def bumpy(c, k):  # misses from 64 to 127, meets again at 128 (every time)
        return 30.0 if c < 64 or c >= 128 else 15.0

    fake = Fake(bumpy)
    search, points = fake.search(max_concurrency=512, budget_s=None)
    assert points[128].state == MET and len(points[128].runs) == 5  # re-run to the most runs
    assert points[64].state == MISSED and len(points[64].runs) == 5
    assert any(r["persists"] and r["higher"] == 128 for r in search.rerun)
    from harness.analysis.capacity_band import band

    low, high = band(points)
    assert low < 64 and (high is None or high > 128)


def test_a_miss_that_does_not_repeat_is_not_assumed():
    def flaky(c, k):  # 64 misses on its first run only, on a busy host
        return 15.0 if (c == 64 and k == 1) else 20.0 * 100 / c

    fake = Fake(flaky, busy=lambda c, k: c == 64 and k == 1)
    search, points = fake.search(budget_s=None)
    assert points[64].runs[0].figures["interactivity_p90"] == 15.0
    from harness.analysis.capacity_band import band

    low, _ = band(points)
    assert 90 <= low <= 100  # 64 was re-run and the search went on above it


def test_the_budget_stops_the_search_and_says_so():
    fake = Fake(falling(100))
    search, points = fake.search(budget_s=5 * 40.0)
    assert len(fake.calls) <= 5 and search.exhausted


def test_busy_runs_are_repeated_only_in_the_first_part_of_the_budget():
    fake = Fake(falling(60), busy=lambda c, k: True)
    search, points = fake.search(budget_s=60 * 40.0)
    decided = [p for p in points.values() if p.decided_runs]
    assert decided and all(p.busy_runs == len(p.runs) for p in decided)  # flagged, all of them
    assert all(len(p.runs) <= 4 for p in points.values())  # repeats + one for the busy host
    assert fake.now <= 60 * 40.0 + 40.0


@pytest.mark.slow
def test_the_terminal_and_the_page_name_the_binding_slo(tmp_path):
    from harness.app.capacity.search import _result
    from harness.report.capacity import write_capacity_report

    fake = Fake(lambda c, k: 20.0 * 60 / c + (0.5 if k == 1 else -0.5))
    search, points = fake.search(budget_s=None)
    result = _result(search, points, SLOS, search.settings)
    assert result["band"][0] == result["capacity"] and result["band"][1] > result["capacity"]
    assert result["binding"]["slo"] == "interactivity_p90"
    words = result["binding_text"]
    assert words.startswith("interactivity p90 binds: mean of its runs")
    assert "tok/s/user" in words and "bound of at least 20" in words
    assert f"at concurrency {result['binding']['concurrency']}" in words
    assert f"capacity {result['capacity']}, band {result['capacity']}-" in result["band_text"]
    json.dumps(result)  # capacity.json holds it as is
    for p in result["points"]:  # the page's table reads nothing from run folders but "Why"
        for r in p["runs"]:
            r["path"] = str(tmp_path / "missing")
    page = write_capacity_report(result, tmp_path).read_text()
    assert words.replace("'", "&#39;") in page and "Points tried" in page
    assert f"Capacity: {result['capacity']} concurrent tasks (band" in page


def test_capacity_refuses_a_scenario_without_percentile_slos(tmp_path, capsys):
    code = main(
        ["capacity", "scenarios/quickstart.yaml", "--set", "slos={}", "-o", str(tmp_path / "c")]
    )
    assert code == 2
    assert "capacity needs percentile SLOs" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value"), [("--repeats", "1"), ("--min-tasks", "0"), ("--budget-min", "0")]
)
def test_bad_flags_are_refused_naming_the_flag(tmp_path, capsys, flag, value):
    code = main(["capacity", "scenarios/quickstart.yaml", flag, value, "-o", str(tmp_path / "c")])
    assert code == 2 and flag in capsys.readouterr().err


@pytest.mark.slow
def test_a_real_search_writes_its_band_and_names_the_binding_slo(tmp_path, capsys):
    out = tmp_path / "cap"
    code = main(
        [
            "capacity",
            "scenarios/quickstart.yaml",
            "--set",
            "target.engine.options.runner=simulated",
            "--set",
            "load.max_duration_s=2",
            "--set",
            "slos.ttft_p90=1ms",  # missed at once: one point, then the look above it
            "--min-tasks",
            "1",
            "--max-concurrency",
            "2",
            "-o",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    result = json.loads((out / "capacity.json").read_text())
    assert code == 0 and result["capacity"] == 0 and result["band"] == [0, 1]
    assert "TTFT p90 binds" in printed and "at concurrency 1" in printed
    run = result["points"][0]["runs"][0]
    assert (out / "c1-r1" / "summary.json").exists() and run["host"]["before"]
    assert "TTFT p90 binds" in (out / "capacity.html").read_text()


def test_the_flags_reach_the_rule_by_name():
    from harness.app.cli import build_parser
    from harness.app.commands.capacity import _capacity_settings

    args = build_parser().parse_args(
        ["capacity", "x.yaml", "-o", "d", "--max-runs", "6", "--max-wait-share", "0.8"]
    )
    rule = _capacity_settings(args).rule
    assert rule.max_runs == 6 and rule.max_wait_share == 0.8 and rule.busy_load == 3.0


def test_the_wall_clock_search_at_its_ceiling_says_raise_it():
    from harness.app.capacity.search import _result

    fake = Fake(lambda c, k: 100.0)  # every point far inside its bound
    search, points = fake.search(budget_s=None, max_concurrency=8)
    result = _result(search, points, SLOS, search.settings)
    assert result["at_ceiling"] and result["band"] == [8, None]
    assert (
        "at least 8" in result["band_text"]
        and "raise --max-concurrency (now 8)" in (result["band_text"])
    )
    assert result["binding_text"].endswith("(raise --max-concurrency to find the one that binds)")


@pytest.mark.slow
def test_a_run_on_the_virtual_clock_is_never_on_a_busy_host(tmp_path):
    # the exact search (harness/app/capacity/virtual.py): the wall-clock one flagged every run busy
    out = tmp_path / "cap"
    args = [
        "capacity",
        "scenarios/quickstart.yaml",
        "--set",
        "target.engine.options.runner=simulated",
    ]
    args += ["--set", "target.engine.options.clock=virtual", "--set", "load.max_duration_s=4"]
    # --busy-load 0.001: every run whose host was sampled is busy; the cost model's are not
    args += ["--busy-load", "0.001", "--min-tasks", "1", "--max-concurrency", "2"]
    assert main([*args, "-o", str(out)]) == 0
    result = json.loads((out / "capacity.json").read_text())
    assert result["clock"] == "virtual" and [p["concurrency"] for p in result["points"]] == [1, 2]
    assert "busy" not in json.dumps(result)
