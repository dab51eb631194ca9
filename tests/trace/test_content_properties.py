"""Materialized content: prefix, fork, join and salt properties on generated traces."""

import numpy as np
import pytest

from harness.trace.chat_form import ChatForm
from harness.trace.content import SALT_TOKENS, Content
from harness.trace.prefix import IdealPrefixCache

from .tiny import small_generated


@pytest.fixture(scope="module")
def trace():
    return small_generated(sessions=6, seed=5)


def test_generated_trace_has_forks_and_joins(trace):
    assert any(s.mode == "fork" for s in trace.sessions)
    assert any(t.spawns for s in trace.sessions for t in s.turns)


@pytest.mark.slow
def test_token_prompt_is_previous_prompt_plus_output_plus_new_input(trace):
    content = Content(trace)
    for s in trace.sessions:
        prev = content.prompt_token_ids(s.id, 0)
        for k in range(1, len(s.turns)):
            ids = content.prompt_token_ids(s.id, k)
            out = content.segment_token_ids(content.output_segment(s.id, k - 1)).tolist()
            n_prev, n_out = len(prev), len(out)
            assert ids[:n_prev] == prev
            assert ids[n_prev : n_prev + n_out] == out
            assert len(ids) == n_prev + n_out + s.turns[k].new_input_tokens
            prev = ids


def test_chat_prompt_is_previous_messages_plus_assistant_output_plus_user_input(trace):
    content = Content(trace)
    for s in trace.sessions[:4]:
        prev = ChatForm(content).messages(s.id, 0)
        for k in range(1, len(s.turns)):
            msgs = ChatForm(content).messages(s.id, k)
            assert msgs[: len(prev)] == prev
            assert msgs[len(prev)] == {
                "role": "assistant",
                "content": content.output_text(s.id, k - 1),
            }
            assert [m["role"] for m in msgs[len(prev) + 1 :]] == ["user"]
            new_words = msgs[-1]["content"].split()
            assert len(new_words) == s.turns[k].new_input_tokens
            prev = msgs


def test_fork_child_starts_with_parent_context_and_output(trace):
    content = Content(trace)
    forks = [s for s in trace.sessions if s.mode == "fork"]
    for child in forks:
        k = child.fork_turn
        parent_prompt = content.prompt_token_ids(child.parent, k)
        parent_out = content.segment_token_ids(content.output_segment(child.parent, k)).tolist()
        head = parent_prompt + parent_out
        ids = content.prompt_token_ids(child.id, 0)
        assert ids[: len(head)] == head
        assert len(ids) == len(head) + child.turns[0].new_input_tokens


def test_join_turn_new_input_starts_with_subagent_reports(trace):
    content = Content(trace)
    parent = next(s for s in trace.sessions if any(t.spawns for t in s.turns))
    k = next(i for i, t in enumerate(parent.turns) if t.spawns)
    reports = []
    for cid in parent.turns[k].spawns:
        last = len(trace.session(cid).turns) - 1
        reports += content.segment_token_ids(content.output_segment(cid, last)).tolist()
    prompt = content.prompt_token_ids(parent.id, k + 1)
    start = len(content.prompt_token_ids(parent.id, k)) + parent.turns[k].output_tokens
    assert prompt[start : start + len(reports)] == reports
    assert parent.turns[k + 1].new_input_tokens > len(reports)


def test_salts_share_nothing_and_the_same_salt_is_deterministic(trace):
    a, b = Content(trace, salt="run-a"), Content(trace, salt="run-b")
    sid = trace.sessions[0].id
    assert a.prompt_token_ids(sid, 1) == Content(trace, salt="run-a").prompt_token_ids(sid, 1)
    assert a.prompt_token_ids(sid, 0)[:SALT_TOKENS] != b.prompt_token_ids(sid, 0)[:SALT_TOKENS]
    cache = IdealPrefixCache(block_size=1)
    for s in trace.sessions:
        for k in range(len(s.turns)):
            cache.insert(a.segments(s.id, k))
    hits = [
        cache.shared_prefix(b.segments(s.id, k))
        for s in trace.sessions
        for k in range(len(s.turns))
    ]
    assert sum(hits) == 0
    ids_a = np.array(a.prompt_token_ids(sid, 0)[:SALT_TOKENS])
    ids_b = np.array(b.prompt_token_ids(sid, 0)[:SALT_TOKENS])
    assert (ids_a != ids_b).any()


def test_chat_prefix_holds_with_empty_inputs_and_outputs():
    """A turn with no new input or no output still yields its own messages, so turn k's chat
    prompt (as the reference engine's template renders it) is a prefix of turn k+1's."""
    from harness.serving.chat_template import apply_chat_template
    from harness.serving.tokenizer import Tokenizer
    from harness.trace.model import Session, Trace, TraceHeader, Turn

    s = Session("s", 0.0, 20, "sys", (Turn(10, 0), Turn(0, 5), Turn(7, 3), Turn(4, 2)))
    content = Content(Trace(TraceHeader(seed=1), (s,)), salt="x")
    tok, prev = Tokenizer(), None
    for k in range(4):
        ids = apply_chat_template(ChatForm(content).messages("s", k), tok)
        if prev is not None:
            assert ids[: len(prev)] == prev
        prev = ids
    roles = [m["role"] for m in ChatForm(content).messages("s", 3)]
    assert roles == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]


def test_a_user_tokenizer_gets_exact_segment_lengths(tmp_path):
    """With a Hugging Face tokenizer.json (here a tiny BPE that splits most vocabulary words into
    several tokens), every segment's text is exactly its token count for that tokenizer."""
    tokenizers = pytest.importorskip("tokenizers")
    import random

    from harness.trace.content import WORDS, load_hf_token_counter
    from harness.trace.model import Session, Trace, TraceHeader, Turn

    tok = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    rng = random.Random(0)
    corpus = [" ".join(rng.choices(WORDS, k=50)) for _ in range(200)]
    tok.train_from_iterator(
        corpus, tokenizers.trainers.BpeTrainer(vocab_size=120, special_tokens=["[UNK]"])
    )
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    count = load_hf_token_counter(str(path))
    assert count("the system cache token") > 4  # the words do not map 1:1 to its tokens

    s = Session("s", 0.0, 50, "sys", tuple(Turn(40 + 7 * i, 20 + i) for i in range(6)))
    content = Content(Trace(TraceHeader(seed=1), (s,)), token_counter=count)
    for k in range(6):
        for seg in content.segments("s", k):
            assert count(content.segment_text(seg)) == seg.length, seg
    # the chat prefix property still holds, as text
    prev = ChatForm(content).messages("s", 2)
    nxt = ChatForm(content).messages("s", 3)
    assert nxt[: len(prev)] == prev
