"""The request source extends each session's prompt; the result must equal building it whole."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from harness.trace.chat_form import ChatForm, chat_messages
from harness.trace.content import Content
from harness.trace.requests import RequestSource
from harness.trace.timeline import send_order
from tests.trace.tiny import small_generated


@pytest.mark.parametrize(
    ("api", "fmt"), [("completions", "tokens"), ("completions", "text"), ("chat", "tokens")]
)
@pytest.mark.slow
def test_extended_prompts_equal_whole_prompts(api, fmt):
    tr = small_generated(sessions=4)
    assert any(t.spawns for s in tr.sessions for t in s.turns)
    source, content = RequestSource(tr, api=api, prompt_format=fmt, salt="s"), Content(tr, salt="s")
    for _, sid, k in send_order(tr):
        p = source.prompt(sid, k)
        assert p.n_tokens == content.prompt_length(sid, k)
        if api == "chat":
            assert p.body is None and p.messages == ChatForm(content).messages(sid, k), (sid, k)
        elif fmt == "text":
            assert p.messages is None and p.body == content.prompt_text(sid, k), (sid, k)
        else:
            ids = content.prompt_token_ids(sid, k)
            assert p.body.tolist() == ids, (sid, k)
            assert orjson.loads(b"[" + p.ids_json + b"]") == ids, (sid, k)


@pytest.mark.parametrize("fmt", ["chat", "text"])
def test_live_replies_replace_recorded_outputs(fmt):
    tr = small_generated(sessions=2)
    sid = tr.main_sessions[0].id
    api = "chat" if fmt == "chat" else "completions"
    source = RequestSource(tr, api=api, prompt_format="text", live=True)
    content = Content(tr)
    source.prompt(sid, 0)
    source.reply(sid, 0, "a live reply")
    p = source.prompt(sid, 1)
    segments = content.segments(sid, 1)

    def text_of(seg):
        live = seg.key == ("out", sid, 0)
        return "a live reply" if live else content.segment_text(seg)

    if fmt == "chat":
        assert p.messages == chat_messages(segments, text_of)
        assert {"role": "assistant", "content": "a live reply"} in p.messages
    else:
        assert p.body == " ".join(text_of(s) for s in segments if s.length)
    source.forget([sid])
    assert source.live == {}


def test_token_prompts_keep_recorded_outputs_with_live_history():
    tr = small_generated(sessions=1)
    sid = tr.main_sessions[0].id
    source = RequestSource(tr, api="completions", prompt_format="tokens", live=True)
    source.prompt(sid, 0)
    source.reply(sid, 0, "ignored by token ids")
    assert source.prompt(sid, 1).body.tolist() == Content(tr).prompt_token_ids(sid, 1)


def test_prompt_steps_pause_in_long_builds_and_give_the_same_prompt(monkeypatch):
    """A prompt built from nothing deep into a session pauses every ~STEP_TOKENS; extending turns
    write past the earlier prompts' arrays, never into them."""
    import harness.trace.requests as requests

    monkeypatch.setattr(requests, "STEP_TOKENS", 64)
    tr = small_generated(sessions=2)
    s = max(tr.main_sessions, key=lambda s: len(s.turns))
    content = Content(tr)
    source = RequestSource(tr, api="completions", prompt_format="tokens")
    last = len(s.turns) - 1
    steps = list(source.prompt_steps(s.id, last - 1))  # from nothing: a mid-trajectory start
    assert steps[-1] is not None and all(x is None for x in steps[:-1])
    assert len(steps) - 1 >= content.prompt_length(s.id, last - 1) // 64 // 2
    before = steps[-1]
    kept = before.body.copy(), bytes(before.ids_json)
    after = source.prompt(s.id, last)  # extends in place
    assert after.body.tolist() == content.prompt_token_ids(s.id, last)
    assert orjson.loads(b"[" + bytes(after.ids_json) + b"]") == content.prompt_token_ids(s.id, last)
    assert before.body.tolist() == kept[0].tolist() and bytes(before.ids_json) == kept[1]
    assert not before.body.flags.writeable
    # a second continuation of an earlier prompt (a retried turn's source) copies, not clobbers
    again = RequestSource(tr, api="completions", prompt_format="tokens")
    first = again.prompt(s.id, 0)
    ids = requests.SessionPrompt(
        0, [], first, again._sessions[s.id].ids, again._sessions[s.id].json
    )
    again.prompt(s.id, 1)
    again._extend_ids(ids, content.new_segments(s.id, 1)[:1])
    assert again._sessions[s.id].prompt.body.tolist() == content.prompt_token_ids(s.id, 1)


def test_growing_arrays_keep_what_they_hold_when_they_grow_or_branch():
    from harness.trace.requests import _Growing

    g = _Growing(np.int64)  # no room: every append grows it
    g, a = g.extend(0, np.arange(3))
    g, b = g.extend(3, np.arange(3, 5000))
    assert a.tolist() == [0, 1, 2] and b.tolist() == list(range(5000))
    g2, c = g.extend(3, np.array([-1]))  # a second continuation of the 3-item prompt: a copy
    assert c.tolist() == [0, 1, 2, -1] and g2 is not g
    assert b.tolist() == list(range(5000))  # the longer prompt is untouched
    g, d = g.extend(5000, np.array([7]))
    assert d[-2:].tolist() == [4999, 7] and not d.flags.writeable
