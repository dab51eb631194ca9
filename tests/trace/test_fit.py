"""`harness trace fit`: a profile fitted to a trace draws traces of the same shape, is a valid
workload file, and says how close a draw from it comes."""

from __future__ import annotations

import pytest

from harness.app.cli import main
from harness.trace.fit import check, dist, fit_profile
from harness.trace.generate import generate
from harness.trace.native import write_trace
from harness.trace.profile import load_profile
from harness.trace.stats import compute_stats

SETS = ("turns.median=8", "subagents.turns.median=3", "subagents.mode=mix")


@pytest.fixture(scope="module")
def source():
    return generate(load_profile("workloads/agentx-cpu.yaml", sets=SETS), seed=5, sessions=60)


def test_a_lognormal_is_fitted_to_its_median_spread_and_bounds():
    d = dist([1, 10, 100])
    assert d == {"median": 10.0, "sigma": pytest.approx(1.88, abs=0.01), "min": 1.0, "max": 100.0}
    assert dist([0, 0, 4])["median"] == 0.0 and dist([])["median"] == 1.0


def test_the_fit_recovers_the_profile_a_trace_was_drawn_from(source):
    profile = fit_profile(source, name="fit", source="test")
    assert profile.sessions == 60 and profile.subagents.mode == "mix"
    assert 6 <= profile.turns.median <= 10
    assert 0.3 <= profile.subagents.probability <= 0.6
    assert profile.content == "words" and profile.turn_form == "plain"  # no recorded calls


def test_a_draw_from_the_fit_meets_the_fitted_shape(source):
    profile = fit_profile(source, name="fit", source="test")
    _, rows = check(profile, compute_stats(source), sessions=200, seed=2)
    met = {r["key"]: r["met"] for r in rows}
    assert met["turns_per_main_session"] and met["ideal_cache_hit"], rows
    assert met["main_sessions_with_subagents"], rows


@pytest.mark.slow
def test_the_verb_writes_a_workload_file_and_the_table(source, tmp_path, capsys):
    write_trace(source, tmp_path / "t.jsonl")
    assert (
        main(
            [
                "trace",
                "fit",
                str(tmp_path / "t.jsonl"),
                "-o",
                str(tmp_path / "p.yaml"),
                "--check-sessions",
                "50",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "fidelity (the fitted trace)" in out and "drawn (50 sessions, seed 1)" in out
    profile = load_profile(tmp_path / "p.yaml")
    assert profile.name == "fit-t"
    assert generate(profile, seed=1, sessions=3).num_requests > 0


def test_a_fit_with_tool_calls_draws_even_where_a_system_prompt_was_tiny(source):
    # a recorded agent whose task came with a one-line instruction (a Responses request's
    # "be brief", a completions prompt): its fitted system prompts were too small for one tool
    # schema, and `harness trace fit` failed drawing from its own profile (ToolSetError)
    from harness.trace.fit import system_tokens
    from harness.trace.profile import validate_profile

    doc = fit_profile(source, name="fit", source="test").model_dump(mode="json")
    doc |= {"turn_form": "tools", "content": "code"}
    doc["system_prompts"] = {"count": 3, "tokens": system_tokens([12, 52, 3000], tools=True)}
    generate(validate_profile(doc, source="test"), seed=3, sessions=40)
    assert system_tokens([12, 52, 3000], tools=False)["min"] == 12  # plain turns: as recorded
