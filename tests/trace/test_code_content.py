"""`content: code`: prompts of Python standard-library source, exact lengths, stable picks."""

from __future__ import annotations

import json
import re

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from harness.app.cli import main
from harness.errors import ProfileError
from harness.trace import code_text
from harness.trace.content import Content
from harness.trace.formats import load_trace
from harness.trace.profile import load_profile
from harness.trace.requests import RequestSource
from harness.vocab import WORDS

from .tiny import CPU_PROFILE, small_generated

PYTHON = ("def ", "import ", "return", "self.")


@pytest.fixture(scope="module")
def trace():
    return small_generated(sessions=4, seed=11, content="code")


@pytest.fixture(scope="module")
def bpe():
    """A real byte-level BPE, trained here on a few standard-library files: its merges cross
    the pieces' seams, so fitting a text to a token count is not a sum of piece counts."""
    c = code_text.corpus()
    texts = ["\n".join(c.lines(p)) for p in c.paths[:40]]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=800, show_progress=False))
    return tok


@pytest.mark.slow
def test_generate_with_content_code_sends_python_source(tmp_path):
    out = tmp_path / "t.jsonl"
    args = ["trace", "generate", "--profile", str(CPU_PROFILE), "--sessions", "2", "--seed", "3"]
    assert main([*args, "--set", "content=code", "-o", str(out)]) == 0
    tr = load_trace(out)
    assert tr.header.meta["knobs"]["content"] == "code"
    src = RequestSource(tr, api="chat")
    s = tr.sessions[0]
    text = " ".join(m["content"] or "" for m in src.prompt(s.id, len(s.turns) - 1).messages)
    for marker in PYTHON:
        assert marker in text, marker
    words = re.findall(r"[A-Za-z]+", text)
    assert sum(w in WORDS for w in words) < 0.8 * len(words)  # not a word list


@pytest.mark.slow
def test_the_shipped_profiles_send_source_in_tool_shaped_turns(tmp_path):
    out = tmp_path / "t.jsonl"
    for profile in (CPU_PROFILE, CPU_PROFILE.with_name("agentx.yaml")):
        args = ["trace", "generate", "--profile", str(profile), "--sessions", "1", "--seed", "3"]
        assert main([*args, "-o", str(out)]) == 0
        tr = load_trace(out)
        assert Content(tr).kind == "code" and Content(tr).turn_form == "tools"
        p = RequestSource(tr, api="chat").prompt(
            tr.sessions[0].id, min(1, len(tr.sessions[0].turns) - 1)
        )
        assert p.tools and p.messages[0]["role"] == "system" and p.messages[0]["content"]
        assert any(m.get("tool_calls") for m in p.messages) or len(tr.sessions[0].turns) == 1


def test_a_profile_without_the_content_fields_keeps_its_bytes(tmp_path):
    """The fields stay out of the header at their defaults (words, plain turns): traces of
    profiles that never named them regenerate alike."""
    tr = small_generated(sessions=2, seed=11)
    assert "content" not in tr.header.meta["knobs"]
    assert "turn_form" not in tr.header.meta["knobs"]
    assert Content(tr).kind == "words"


def test_bad_content_value_names_the_field():
    with pytest.raises(ProfileError, match="content"):
        load_profile(CPU_PROFILE, sets=["content=prose"])


@pytest.mark.slow
def test_token_ids_have_the_trace_lengths_and_extend_the_previous_prompt(trace):
    content = Content(trace)
    for s in trace.sessions:
        prev = content.prompt_token_ids(s.id, 0)
        assert len(prev) == content.prompt_length(s.id, 0)
        for k in range(1, len(s.turns)):
            ids = content.prompt_token_ids(s.id, k)
            assert ids[: len(prev)] == prev
            assert len(ids) == content.prompt_length(s.id, k)
            prev = ids


def test_without_a_tokenizer_a_token_is_a_piece_and_equal_pieces_equal_ids(trace):
    content = Content(trace)
    s = trace.sessions[0]
    seg = content.segments(s.id, 1)[-1]
    text = content.segment_text(seg)
    pieces = code_text.pieces_of(text)
    assert "".join(pieces) == text and len(pieces) == seg.length
    ids = content.segment_token_ids(seg).tolist()
    first = {}
    for piece, i in zip(pieces, ids, strict=True):
        assert first.setdefault(piece, i) == i


def test_same_seed_same_text_other_seed_differs():
    a, b = (Content(small_generated(sessions=1, seed=11, content="code")) for _ in range(2))
    c = Content(small_generated(sessions=1, seed=12, content="code"))
    assert a.prompt_text("s000000", 0) == b.prompt_text("s000000", 0)
    assert a.prompt_text("s000000", 0) != c.prompt_text("s000000", 0)


@pytest.mark.slow
def test_with_a_tokenizer_each_segment_is_exactly_its_tokens(trace, bpe):
    count = lambda text: len(bpe.encode(text).ids)  # noqa: E731
    encode = lambda text: bpe.encode(text).ids  # noqa: E731
    content = Content(trace, token_counter=count, token_encoder=encode)
    s = trace.sessions[0]
    for k in range(min(3, len(s.turns))):
        for seg in content.segments(s.id, k):
            assert count(content.segment_text(seg)) == seg.length, seg
            ids = content.segment_token_ids(seg).tolist()
            assert ids == encode(content.segment_text(seg)), seg  # the text's own ids


def test_a_missing_file_moves_only_the_picks_that_landed_on_it(tmp_path):
    for name in ("a", "b", "c", "d", "e", "f"):
        (tmp_path / f"{name}.py").write_text(f"x = {name!r}\n")
    full = code_text.Corpus(tmp_path)
    picks = [full.pick(h * 0x9E3779B97F4A7C15) for h in range(200)]
    (tmp_path / "c.py").unlink()
    fewer = code_text.Corpus(tmp_path)
    after = [fewer.pick(h * 0x9E3779B97F4A7C15) for h in range(200)]
    moved = [(p, q) for p, q in zip(picks, after, strict=True) if p != q]
    assert moved and all(p == "c.py" for p, _ in moved)


def test_skipped_folders_and_an_empty_library(tmp_path):
    (tmp_path / "site-packages").mkdir()
    (tmp_path / "site-packages" / "x.py").write_text("import os\n")
    with pytest.raises(Exception, match="none here"):
        code_text.Corpus(tmp_path)


def test_tool_results_have_their_tools_form():
    pieces = {k: "".join(code_text.code_pieces(k, 5, 400)) for k in code_text.KINDS}
    assert re.search(r"^\s+\d+\t", pieces["read"], re.MULTILINE)
    assert re.search(r"^/repo/\S+\.py:\d+:", pieces["grep"], re.MULTILINE)
    assert "test session starts" in pieces["test"]
    assert pieces["edit"].startswith("The file /repo/")
    assert json.dumps(pieces)  # plain text, JSON-safe
