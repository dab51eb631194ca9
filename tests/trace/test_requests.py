"""The request source extends each session's prompt; the result must equal building it whole."""

from __future__ import annotations

import orjson
import pytest

from harness.trace.content import Content, chat_messages
from harness.trace.requests import RequestSource
from harness.trace.timeline import send_order
from tests.trace.tiny import small_generated


@pytest.mark.parametrize(("api", "fmt"), [("completions", "tokens"), ("completions", "text"), ("chat", "tokens")])
def test_extended_prompts_equal_whole_prompts(api, fmt):
    tr = small_generated(sessions=4)
    assert any(t.spawns for s in tr.sessions for t in s.turns)
    source, content = RequestSource(tr, api=api, prompt_format=fmt, salt="s"), Content(tr, salt="s")
    for _, sid, k in send_order(tr):
        p = source.prompt(sid, k)
        assert p.tokens == content.prompt_length(sid, k)
        if api == "chat":
            assert p.body is None and p.messages == content.messages(sid, k), (sid, k)
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
