"""Scenario files: validation, --set overrides, sweep points, errors that name the field."""

from pathlib import Path

import pytest

from harness.app.scenario import dump_scenario, load_scenario
from harness.errors import ScenarioError

ROOT = Path(__file__).resolve().parents[1]

BASE = """\
name: t
workload:
  profile: {profile}
  sessions: 4
load:
  mode: closed
  concurrency: 2
"""


def write(tmp_path, text, name="s.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture
def profile(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("name: p\n")
    return p


def test_minimal_scenario_loads_with_defaults(tmp_path, profile):
    s = load_scenario(write(tmp_path, BASE.format(profile=profile.name)))
    assert s.load.concurrency == 2
    assert s.target.kind == "engine" and s.target.engine.mode == "inprocess"
    assert s.workload.profile == str(profile.resolve())


@pytest.mark.parametrize(
    ("extra", "field", "line"),
    [
        ("load:\n  concurrency: 2\n  concurency: 3\n", "load.concurency", 8),
        ("gpus: two\n", "gpus", 8),
        ("bogus: 1\n", "bogus", 8),
    ],
)
def test_bad_fields_are_named_with_their_line(tmp_path, profile, extra, field, line):
    text = BASE.format(profile=profile.name)
    if extra.startswith("load:"):
        text = text.replace("load:\n  mode: closed\n  concurrency: 2\n", "") + "\n" + extra
    else:
        text += extra
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert f"{path}:{line}: field '{field}'" in str(err.value)


def test_unknown_key_line_number(tmp_path, profile):
    path = write(tmp_path, BASE.format(profile=profile.name) + "slos:\n  ttft_s: 1\nbogus: 1\n")
    with pytest.raises(ScenarioError, match=r"s\.yaml:10: field 'bogus': unknown key"):
        load_scenario(path)


def test_invalid_yaml_names_line(tmp_path):
    path = write(tmp_path, "name: t\nworkload: [unclosed\n")
    with pytest.raises(ScenarioError, match=r"s\.yaml:\d+: invalid YAML"):
        load_scenario(path)


def test_missing_file_is_clear(tmp_path):
    with pytest.raises(ScenarioError, match="cannot read scenario"):
        load_scenario(tmp_path / "nope.yaml")


def test_set_overrides_are_validated(tmp_path, profile):
    path = write(tmp_path, BASE.format(profile=profile.name))
    s = load_scenario(path, ["load.concurrency=8", "target.engine.options.max_num_seqs=4"])
    assert s.load.concurrency == 8
    assert s.target.engine.options == {"max_num_seqs": 4}
    with pytest.raises(ScenarioError, match="field 'load.concurrency'"):
        load_scenario(path, ["load.concurrency=zero"])
    with pytest.raises(ScenarioError, match="key=value"):
        load_scenario(path, ["load.concurrency"])


def test_open_loop_needs_rate_and_one_workload_source(tmp_path, profile):
    with pytest.raises(ScenarioError, match="session_rate"):
        load_scenario(write(tmp_path, BASE.format(profile=profile.name)), ["load.mode=open"])
    with pytest.raises(ScenarioError, match="exactly one of"):
        load_scenario(
            write(tmp_path, BASE.format(profile=profile.name)), ["workload.trace=x.jsonl"]
        )


def test_a_sweep_of_mappings_merges_each_into_the_field_under_its_label(tmp_path, profile):
    text = BASE.format(profile=profile.name) + (
        "target:\n  engine:\n    options: {runner: simulated, num_gpu_blocks: 64}\n"
        "sweep:\n  - param: target.engine.options\n    labels: [device, cpu]\n"
        "    values: [{}, {cpu_offload_blocks: 32}]\n"
    )
    points = load_scenario(write(tmp_path, text)).points()
    assert [label for label, _ in points] == ["device", "cpu"]
    assert points[0][1].target.engine.options == {"runner": "simulated", "num_gpu_blocks": 64}
    assert points[1][1].target.engine.options["cpu_offload_blocks"] == 32
    assert points[1][1].target.engine.options["num_gpu_blocks"] == 64
    bad = text.replace("labels: [device, cpu]", "labels: [device]")
    with pytest.raises(ScenarioError, match="1 labels for 2 values"):
        load_scenario(write(tmp_path, bad, "bad.yaml"))


def test_sweep_points_and_resolved_round_trip(tmp_path, profile):
    text = BASE.format(profile=profile.name) + (
        "sweep:\n  - param: load.concurrency\n    values: [1, 2]\n"
        "  - param: target.engine.options.long_prefill_token_threshold\n    values: [0, 512]\n"
    )
    s = load_scenario(write(tmp_path, text))
    points = s.points()
    assert [label for label, _ in points] == [
        "concurrency=1-long_prefill_token_threshold=0",
        "concurrency=1-long_prefill_token_threshold=512",
        "concurrency=2-long_prefill_token_threshold=0",
        "concurrency=2-long_prefill_token_threshold=512",
    ]
    assert points[3][1].load.concurrency == 2
    assert points[3][1].target.engine.options["long_prefill_token_threshold"] == 512
    assert not points[0][1].sweep
    out = tmp_path / "resolved.yaml"
    dump_scenario(s, out)
    assert load_scenario(out) == s
