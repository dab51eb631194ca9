"""Tokens without an arrival time are counted and named, never silently dropped."""

from harness.analysis.loader import load_run
from harness.analysis.summary import analyze
from tests.analysis.golden import rec, write_run


def _records():
    return [
        # streamed all 3 of its tokens
        rec("a", "s1", 0, (0, 0.1, 0.2, 0.4, 0.5), ((0.2, 0.3, 0.4), (1, 1, 1)), (10, 3, 0)),
        # the server reported 5, its events carried 2: 3 tokens have no time
        rec("b", "s2", 0, (0, 0.1, 0.3, 0.6, 0.7), ((0.3, 0.6), (1, 1)), (10, 5, 0)),
        # 4 tokens, no event with output at all: no first token, no TTFT
        rec("c", "s3", 0, (0, 0.1, None, None, 0.7), ((), ()), (10, 4, 0)),
    ]


def test_unplaced_tokens_are_counted_and_named(tmp_path):
    summary = analyze(load_run(write_run(tmp_path / "run", _records()))).summary
    assert summary["streamed"] == {
        "requests_ok": 3,
        "without_first_token": 1,
        "requests_short": 2,
        "tokens_reported": 12,
        "tokens_unplaced": 7,
        "placement": None,  # a run from before the manifest said how tokens were placed
    }
    assert summary["ttft_s"]["count"] == 2
    text = "\n".join(summary["warnings"])
    assert "2 of 3 ok requests streamed fewer tokens" in text and "7 of 12 tokens" in text
    assert "1 of 3 ok requests streamed no output event at all" in text


def test_a_run_that_placed_every_token_warns_nothing(tmp_path):
    summary = analyze(load_run(write_run(tmp_path / "run", _records()[:1]))).summary
    assert summary["streamed"]["tokens_unplaced"] == 0
    assert not [w for w in summary["warnings"] if "streamed" in w]
