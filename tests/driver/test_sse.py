"""The SSE parser and the payload decoder, on the byte sequences real servers produce."""

import pytest

from harness.driver.sse import SSEError, SSEParser
from harness.driver.stream_decode import StreamDecoder
from harness.driver.target import Done, Failure, Usage


def feed_all(parts, **kw) -> list[bytes]:
    p = SSEParser(**kw)
    out = []
    for part in parts:
        out += p.feed(part)
    return out + p.close()


STREAM = (
    b": keep-alive\n\n"
    b'data: {"a": 1}\n\n'
    b'event: message\nid: 7\ndata: {"b":\ndata: 2}\n\n'
    b"retry: 100\n\n"
    b"data:nospace\n\n"
    b"data: [DONE]\n\n"
)
EXPECTED = [b'{"a": 1}', b'{"b":\n2}', b"nospace", b"[DONE]"]


def test_fields_comments_and_multiline_data():
    assert feed_all([STREAM]) == EXPECTED


@pytest.mark.parametrize("eol", [b"\r\n", b"\r"])
def test_crlf_and_cr_line_ends(eol):
    assert feed_all([STREAM.replace(b"\n", eol)]) == EXPECTED


@pytest.mark.parametrize("eol", [b"\n", b"\r\n"])
def test_split_at_every_byte(eol):
    data = STREAM.replace(b"\n", eol)
    for cut in range(len(data) + 1):
        assert feed_all([data[:cut], data[cut:]]) == EXPECTED, cut
    assert feed_all([data[i : i + 1] for i in range(len(data))]) == EXPECTED


def test_event_waits_for_its_blank_line():
    p = SSEParser()
    assert p.feed(b'data: {"a": 1}\n') == []
    assert p.feed(b"\n") == [b'{"a": 1}']


def test_last_event_without_blank_line_is_kept_at_close():
    p = SSEParser()
    assert p.feed(b"data: x\n\ndata: [DONE]\n") == [b"x"]
    assert p.close() == [b"[DONE]"]


def test_byte_order_mark_and_leading_blank_lines():
    assert feed_all([b"\xef\xbb\xbf\n\ndata: a\n\n"]) == [b"a"]


@pytest.mark.parametrize("tail", [b"", b"\n\n", b"\n\ndata: y\n\n"])
def test_oversized_event_raises(tail):
    p = SSEParser(max_event_bytes=100)
    p.feed(b"data: ok\n\n")
    with pytest.raises(SSEError):
        p.feed(b"data: " + b"x" * 200 + tail)


# ---- decoding payloads ----------------------------------------------------------------------

TOKEN = b'{"choices":[{"delta":{"content":"hi"}}]}'


def test_role_only_first_chunk_is_not_a_token():
    d = StreamDecoder(keep_text=True)
    assert d.read([b'{"choices":[{"delta":{"role":"assistant","content":""}}]}'], 1.0) == 0
    assert not d.started
    assert d.read([TOKEN], 2.0) == 1 and d.text() == "hi" and d.started


def test_events_of_one_read_form_one_chunk():
    d = StreamDecoder(keep_text=True)
    assert d.read([TOKEN, TOKEN, b'{"choices":[{"delta":{"content":"!"}}]}'], 1.0) == 3
    assert d.text() == "hihi!" and d.text() == ""
    plain = StreamDecoder()
    assert plain.read([TOKEN, TOKEN], 1.0) == 2 and plain.text() == ""  # text only on request


def test_completions_text_and_usage_then_done():
    d = StreamDecoder(keep_text=True)
    assert d.read([b'{"choices":[{"text":" a","finish_reason":null}]}'], 1.0) == 1
    assert d.text() == " a"
    usage = b'{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":4}}}'
    assert d.read([usage, b"[DONE]"], 2.0) == 0
    assert d.finish(4.0) == [Usage(5, 1, 4), Done(4.0)]


def test_usage_without_details_reads_cached_as_none():
    d = StreamDecoder()
    d.read([b'{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1}}', b"[DONE]"], 1.0)
    assert d.finish(2.0)[0] == Usage(5, 1, None)


def test_continuous_usage_gives_exact_tokens_per_chunk():
    d = StreamDecoder()
    a = d.read([b'{"choices":[{"delta":{"content":"ab"}}],"usage":{"completion_tokens":2}}'], 1.0)
    b = d.read([b'{"choices":[{"delta":{"content":""}}],"usage":{"completion_tokens":3}}'], 2.0)
    assert (a, b) == (2, 1)


@pytest.mark.parametrize(
    ("payload", "error_class"),
    [
        (b"{not json", "MalformedEvent"),
        (b"[1, 2]", "MalformedEvent"),
        (b'{"choices": ["not an object"]}', "MalformedEvent"),
        (b'{"choices": [{"delta": "text"}]}', "MalformedEvent"),
        (b'{"error": {"message": "overloaded", "code": 503}}', "StreamError"),
    ],
)
def test_bad_payloads_fail_the_request(payload, error_class):
    d = StreamDecoder()
    assert (
        d.read([TOKEN, payload, TOKEN], 1.0) == 1
    )  # what came before the bad event still counts; nothing after
    assert isinstance(d.failure, Failure) and d.failure.error_class == error_class


@pytest.mark.parametrize(
    ("done", "usage", "error_class"),
    [(False, True, "IncompleteStream"), (True, False, "MissingUsage")],
)
def test_stream_without_done_or_usage_fails(done, usage, error_class):
    d = StreamDecoder()
    if usage:
        d.read([b'{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}'], 1.0)
    if done:
        d.read([b"[DONE]"], 1.0)
    last = d.finish(2.0)[-1]
    assert isinstance(last, Failure) and last.error_class == error_class


# ---- a read of many events, parsed as one array ---------------------------------------------

USAGE = b'{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}'
TEXT = b'{"choices":[{"text":"a"}]}'


def sse(*payloads: bytes) -> bytes:
    return b"".join(b"data: " + p + b"\n\n" for p in payloads)


def decoded(read: bytes, *, arrays: bool) -> tuple:
    """What decoding one read gives: tokens, text, failure, usage, done."""
    p, d = SSEParser(), StreamDecoder(keep_text=True)
    p.feed(b": opening comment\n\n")
    array = p.feed_array(read) if arrays else None
    tokens = None if array is None else d.read_array(array[0], array[1], 1.0)
    if tokens is None:
        tokens = d.read(p.feed(read), 1.0)
    failure = None if d.failure is None else d.failure.error_class
    return tokens, d.text(), failure, d.usage, d.done


@pytest.mark.parametrize(
    "read",
    [
        sse(TOKEN, TOKEN, TEXT),
        sse(TOKEN, USAGE, b"[DONE]"),
        sse(TOKEN, b"[1, 2]", TOKEN),
        sse(TOKEN, b"{not json", TOKEN),
        sse(TOKEN, b'{"choices": ["not an object"]}', TOKEN),
        sse(TOKEN, b'{"error": {"message": "overloaded"}}', TOKEN),
        sse(b'{"choices":[{"delta":{"content":"a"}}]},{"x":1}', TOKEN),  # two objects, one event
        sse(TOKEN, b"", TOKEN),
        sse(TOKEN) + b": keep-alive\n\n" + sse(TOKEN),
        sse(TOKEN) + b'event: x\ndata: {"a":\ndata: 1}\n\n',
        sse(TOKEN, b"[DONE]"),
        sse(b"[DONE]"),
    ],
)
def test_a_read_parsed_as_one_array_decodes_as_event_by_event(read):
    assert decoded(read, arrays=True) == decoded(read, arrays=False)


def test_array_of_whole_events_only():
    p = SSEParser()
    p.feed(b": hi\n\n")
    assert p.feed_array(sse(TOKEN, TEXT)) == (b"[" + TOKEN + b"," + TEXT + b"]", 2)
    assert p.feed_array(sse(TOKEN)[:-1]) is None  # the last event's blank line is still to come
    assert p.feed_array(sse(TOKEN).replace(b"\n", b"\r\n")) is None
    assert SSEParser().feed_array(sse(TOKEN)) is None  # the stream's first bytes: `feed` them
