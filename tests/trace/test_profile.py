"""Profiles: defaults, overrides, and one-line errors naming the file and the key."""

import pytest

from harness.errors import ProfileError
from harness.trace.profile import DEFAULT_PROFILE, load_profile

from .tiny import CPU_PROFILE, write


def test_default_and_cpu_profiles_load():
    default, cpu = load_profile(), load_profile(CPU_PROFILE)
    assert default.name == "agentx" and default.scale == 1.0
    assert cpu.scale == 0.01 and cpu.sessions < default.sessions
    assert cpu.turns == default.turns  # same shape, only token counts scale


def test_overrides_by_dotted_key_and_set_strings():
    p = load_profile(sets=["subagents.mode=mix", "turns.median=12", "arrival.process=constant"])
    assert (p.subagents.mode, p.turns.median, p.arrival.process) == ("mix", 12, "constant")
    q = load_profile(overrides={"subagents.count.mean": 2.5})
    assert q.subagents.count.mean == 2.5


@pytest.mark.parametrize(
    "sets,field,message",
    [
        (["subagents.bogus=1"], "subagents.bogus", "unknown key"),
        (["colour=red"], "colour", "unknown key"),
        (["turns.median=abc"], "turns.median", "valid number"),
        (["subagents.mode=clone"], "subagents.mode", "'fork', 'spawn' or 'mix'"),
        (["subagents.probability=1.5"], "subagents.probability", "less than or equal to 1"),
        (["turns.min=9", "turns.max=3"], "turns", "below min"),
    ],
)
def test_bad_values_name_file_and_dotted_key(sets, field, message):
    with pytest.raises(ProfileError) as exc:
        load_profile(sets=sets)
    text = str(exc.value)
    assert text.startswith(f"{DEFAULT_PROFILE}: field '{field}'")
    assert message in text and "\n" not in text


def test_bad_files(tmp_path):
    with pytest.raises(ProfileError, match="cannot read profile"):
        load_profile(tmp_path / "missing.yaml")
    with pytest.raises(ProfileError, match=r"bad.yaml:2: invalid YAML"):
        load_profile(write(tmp_path / "bad.yaml", "name: x\n  - : [\n"))
    with pytest.raises(ProfileError, match="must be a YAML mapping"):
        load_profile(write(tmp_path / "list.yaml", "- 1\n"))
    with pytest.raises(ProfileError, match="--set expects key=value"):
        load_profile(sets=["turns.median"])


def test_an_error_in_the_file_names_its_line(tmp_path):
    from harness.errors import ProfileError
    from harness.trace.profile import DEFAULT_PROFILE, load_profile

    lines = DEFAULT_PROFILE.read_text().splitlines()
    start = lines.index("subagents:")
    at = next(
        i for i, line in enumerate(lines) if i > start and line.strip().startswith("probability:")
    )
    lines[at] = "  probability: 2.0"
    path = tmp_path / "p.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ProfileError, match=rf"p\.yaml:{at + 1}: field 'subagents\.probability'"):
        load_profile(path)
