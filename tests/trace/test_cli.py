"""`harness trace ...` end to end through `harness.app.cli.main`."""

import json

import pytest

from harness.app.cli import main
from harness.trace.formats import load_trace

from .tiny import CPU_PROFILE, MOONCAKE, write


@pytest.mark.slow
def test_generate_then_stats_json(tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    args = ["trace", "generate", "--profile", str(CPU_PROFILE), "--sessions", "12", "--seed", "3"]
    assert main([*args, "--set", "subagents.probability=1", "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().err
    assert main(["trace", "stats", str(out), "--json", "--cache-tokens", "5000"]) == 0
    stats = json.loads(capsys.readouterr().out)
    for key in (
        "sessions",
        "main_sessions",
        "requests",
        "ideal_cache_hit",
        "lru_cache_hit",
        "subagents_per_parent",
    ):
        assert key in stats
    for key in ("turns_per_main_session", "prompt_tokens", "output_tokens"):
        assert set(stats[key]) >= {"p50", "p90", "p99", "mean"}
    assert stats["main_sessions"] == 12 and stats["main_sessions_with_subagents"] == 1.0
    assert 0 < stats["lru_cache_hit"] <= stats["ideal_cache_hit"] < 1


def test_generate_scale_flag_and_table_output(tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    args = ["trace", "generate", "--sessions", "3", "--scale", "0.001", "-o", str(out)]
    # x0.001: ~18-token system prompts, too small for a tool schema: refused in one line
    assert main(args) == 2
    assert "too few for one tool schema" in capsys.readouterr().err
    assert main([*args, "--set", "turn_form=plain"]) == 0
    trace = load_trace(out)
    assert trace.header.meta["scale"] == 0.001 and trace.header.profile == "agentx"
    assert main(["trace", "stats", str(out)]) == 0
    table = capsys.readouterr().out
    assert "fidelity (AgentX)" in table and "ideal (infinite cache)" in table
    assert "142 ± 5%" in table  # token targets follow the trace's scale


def test_convert_mooncake_grouped_to_native_and_back(tmp_path, capsys):
    src = write(tmp_path / "m.jsonl", MOONCAKE)
    native, back = tmp_path / "n.jsonl", tmp_path / "b.jsonl"
    assert main(["trace", "convert", str(src), "-o", str(native), "--group-sessions"]) == 0
    assert [len(s.turns) for s in load_trace(native).sessions] == [3, 1]
    assert main(["trace", "convert", str(native), "-o", str(back), "--to", "mooncake"]) == 0
    assert [json.loads(x) for x in back.read_text().splitlines()] == [
        json.loads(x) for x in MOONCAKE.splitlines()
    ]


def test_user_errors_are_one_line_exit_2(tmp_path, capsys):
    bad = write(tmp_path / "bad.jsonl", '{"timestamp": 0}\n')
    assert main(["trace", "stats", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("harness: error: ") and "\n" not in err
    assert main(["trace", "generate", "--set", "turns.nope=1", "-o", str(tmp_path / "x")]) == 2
    assert "field 'turns.nope': unknown key" in capsys.readouterr().err
    assert main(["trace", "generate", "--sessions", "0", "-o", str(tmp_path / "x")]) == 2
    assert (
        main(["trace", "convert", str(bad), "-o", str(tmp_path / "y"), "--block-size", "-1"]) == 2
    )


def test_stats_reads_weka_files(tmp_path, capsys):
    from .test_formats import WEKA

    path = write(tmp_path / "w.json", json.dumps(WEKA))
    assert main(["trace", "stats", str(path), "--json", "--block-size", "64"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["sessions"], stats["main_sessions"], stats["requests"]) == (3, 1, 5)
    assert stats["main_sessions_with_subagents"] == 1.0 and stats["subagents_per_parent"] == 2.0


def test_convert_to_weka_then_stats_of_the_directory(tmp_path, capsys):
    src = tmp_path / "t.jsonl"
    assert (
        main(
            ["trace", "generate", "--profile", str(CPU_PROFILE), "--sessions", "3", "-o", str(src)]
        )
        == 0
    )
    out = tmp_path / "weka"
    capsys.readouterr()
    assert (
        main(["trace", "convert", str(src), "--to", "weka", "-o", str(out), "--model", "m1"]) == 0
    )
    printed = capsys.readouterr()
    assert printed.err == ""  # a small trace: no progress, only the one-line summary
    (line,) = printed.out.splitlines()
    assert line.startswith(f"converted {src} (native) -> {out} (weka): 3 main + ")
    assert " subagent sessions, " in line and line.endswith(" s)")
    files = sorted(out.iterdir())
    assert len(files) == 3 and json.loads(files[0].read_text())["models"] == ["m1"]
    assert main(["trace", "stats", str(out), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["main_sessions"] == 3 and stats["profile"] == "agentx"
    assert main(["trace", "stats", str(out)]) == 0
    table = capsys.readouterr().out
    assert "public Claude Code corpus" in table and "profile agentx (model)" in table
