"""The keyed stand-ins: counts and shared prefixes kept, texts told apart, the salt's role, what
is kept as it is, and how `harness serve`'s tokenizer cuts a text."""

from __future__ import annotations

import json

import pytest

from harness.app.commands.record import token_ends
from harness.record.conversation import parse
from harness.record.standins import StandIns, load_salt

TEXT = "def parse(line):\n    return line.split(',')  # the first field\n" * 4


def _standins(keep=False, salt=b"s" * 32, block=8) -> StandIns:
    return StandIns(salt, token_ends("pieces"), block_tokens=block, keep=keep)


def test_a_text_keeps_its_token_count_in_chunks_of_the_block():
    t = _standins().text(TEXT)
    assert t.tokens == len(token_ends("pieces")(TEXT))
    assert {n for _, n in t.chunks[:-1]} == {8} and 0 < t.chunks[-1][1] <= 8


def test_equal_texts_equal_keys_shared_prefixes_shared_chunks():
    s = _standins()
    a, b, c = s.text(TEXT), s.text(TEXT), s.text(TEXT[:40] + " something else entirely")
    assert a == b
    whole = sum(1 for end in _ends_of_chunks(a) if end <= 40)  # chunks inside the shared text
    assert a.chunks[:whole] == c.chunks[:whole] and a.chunks[whole] != c.chunks[whole]


def _ends_of_chunks(text_obj):
    ends, at = token_ends("pieces")(TEXT), 0
    out = []
    for _, n in text_obj.chunks:
        at += n
        out.append(ends[at - 1])
    return out


def test_another_salt_gives_other_keys_and_another_fingerprint():
    a, b = _standins(salt=b"a" * 32), _standins(salt=b"b" * 32)
    assert a.text(TEXT).chunks[0][0] != b.text(TEXT).chunks[0][0]
    assert a.fingerprint != b.fingerprint


def test_kept_content_is_the_text_cut_at_token_ends():
    t = _standins(keep=True).text(TEXT)
    assert "".join(c[2] for c in t.chunks) == TEXT


def test_schemas_keep_their_words_and_calls_their_keys_numbers_of_as_many_digits():
    s = _standins()
    tool = {
        "type": "function",
        "function": {
            "name": "Read",
            "description": "Reads a secret file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
    sk = s.tool(tool).skeleton
    assert sk["function"]["name"] == "Read" and sk["function"]["parameters"]["required"] == ["path"]
    assert sk["function"]["parameters"]["properties"]["path"] == {"type": "string"}
    assert "secret" not in json.dumps(sk, default=str)
    call = s.call({"id": "c1", "name": "Read", "arguments": '{"path": "/x.py", "limit": 4096}'})
    assert set(call.args.skeleton) == {"path", "limit"}
    assert len(str(call.args.skeleton["limit"])) == 4 and call.args.skeleton["limit"] != 4096


def test_harness_serves_tokenizer_cuts_at_its_tokens():
    from harness.serving.tokenizer import Tokenizer

    for text in ("hello world", "Hello, wörld!\n  x = 1", "<|eos|> the end", ""):
        ends = token_ends("reference")(text)
        assert len(ends) == len(Tokenizer().encode(text))
        assert not ends or ends[-1] == len(text)


def test_a_conversation_has_one_context_key_per_message():
    s = _standins()
    conv = parse(
        "chat", {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]}
    )
    prompt, context = s.prompt(conv)
    assert len(context) == 3 and len(prompt.messages) == 2  # the tools' key first


def test_the_salt_file_is_made_once_for_its_owner_only(tmp_path):
    path = tmp_path / "d" / "salt"
    first = load_salt(path)
    assert load_salt(path) == first and len(first) == 32
    assert path.stat().st_mode & 0o777 == 0o600
    path.write_bytes(b"short")
    with pytest.raises(Exception, match="at least 16 bytes"):
        load_salt(path)
