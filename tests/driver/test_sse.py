"""The SSE parser and the payload decoder, on the byte sequences real servers produce."""

import pytest

from harness.driver.apis.openai.decode import ChatStreamDecoder
from harness.driver.http.sse import SSEError, SSEParser
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
    d = ChatStreamDecoder(keep_text=True)
    assert d.read([b'{"choices":[{"delta":{"role":"assistant","content":""}}]}'], 1.0) == 0
    assert not d.started
    assert d.read([TOKEN], 2.0) == 1 and d.text() == "hi" and d.started


def test_events_of_one_read_form_one_chunk():
    d = ChatStreamDecoder(keep_text=True)
    assert d.read([TOKEN, TOKEN, b'{"choices":[{"delta":{"content":"!"}}]}'], 1.0) == 3
    assert d.text() == "hihi!" and d.text() == ""
    plain = ChatStreamDecoder()
    assert plain.read([TOKEN, TOKEN], 1.0) == 2 and plain.text() == ""  # text only on request


def test_completions_text_and_usage_then_done():
    d = ChatStreamDecoder(keep_text=True)
    assert d.read([b'{"choices":[{"text":" a","finish_reason":null}]}'], 1.0) == 1
    assert d.text() == " a"
    usage = b'{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":4}}}'
    assert d.read([usage, b"[DONE]"], 2.0) == 0
    assert d.finish(4.0) == [Usage(5, 1, 4), Done(4.0)]


def test_usage_without_details_reads_cached_as_none():
    d = ChatStreamDecoder()
    d.read([b'{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1}}', b"[DONE]"], 1.0)
    assert d.finish(2.0)[0] == Usage(5, 1, None)


def test_continuous_usage_gives_exact_tokens_per_chunk():
    d = ChatStreamDecoder()
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
    d = ChatStreamDecoder()
    assert (
        d.read([TOKEN, payload, TOKEN], 1.0) == 1
    )  # what came before the bad event still counts; nothing after
    assert isinstance(d.failure, Failure) and d.failure.error_class == error_class


@pytest.mark.parametrize(
    ("done", "usage", "error_class"),
    [(False, True, "IncompleteStream"), (True, False, "MissingUsage")],
)
def test_stream_without_done_or_usage_fails(done, usage, error_class):
    d = ChatStreamDecoder()
    if usage:
        d.read([b'{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}'], 1.0)
    if done:
        d.read([b"[DONE]"], 1.0)
    last = d.finish(2.0)[-1]
    assert isinstance(last, Failure) and last.error_class == error_class


# ---- the stream's template: events read without building their objects ----------------------

USAGE = b'{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}'
TEXT = b'{"choices":[{"text":"a"}]}'
VLLM = (
    b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":17,"model":"x",'
    b'"choices":[{"index":0,"delta":{"content":"%s"},"logprobs":null,"finish_reason":null}]}'
)


def sse(*payloads: bytes) -> bytes:
    return b"".join(b"data: " + p + b"\n\n" for p in payloads)


def decoded(read: bytes, *, template: bool) -> tuple:
    """What decoding one read (after a first event that teaches the template) gives: tokens,
    text, failure, usage, done."""
    p, d = SSEParser(), ChatStreamDecoder(keep_text=True, template=template)
    d.read(p.feed(sse(VLLM % b" first")), 1.0)
    tokens = d.read(p.feed(read), 1.0)
    failure = None if d.failure is None else d.failure.error_class
    return tokens, d.text(), failure, d.usage, d.done


def vllm(text: bytes) -> bytes:
    return VLLM % text


@pytest.mark.parametrize(
    "read",
    [
        sse(vllm(b" a"), vllm(b" b"), vllm(b"c d")),
        sse(vllm(b" a"), USAGE, b"[DONE]"),
        sse(vllm(b""), vllm(b" a")),  # empty text: parsed in full
        sse(vllm(b'say \\"hi\\"'), vllm(b"back\\\\slash"), vllm(b"tab\\t")),  # escapes
        sse(vllm(b"caf\xc3\xa9"), vllm(b"\\u00e9")),  # UTF-8 and a \\u escape
        sse(vllm(b"bad \xff utf-8")),
        sse(vllm(b"raw \x01 control")),
        sse(vllm(b'"},"usage":{"completion_tokens":9},"x":{"y":"')),  # text that ends the object
        sse(VLLM.replace(b"null}]}", b'"stop"}]}') % b" last"),  # another finish_reason
        sse(VLLM.replace(b'"content"', b'"reasoning_content"') % b" think"),
        sse(vllm(b" a"), b"[1, 2]", vllm(b" b")),
        sse(vllm(b" a"), b"{not json", vllm(b" b")),
        sse(vllm(b" a"), b'{"error": {"message": "overloaded"}}', vllm(b" b")),
        sse(vllm(b" a"), b"", vllm(b" b")),
        sse(vllm(b" a")) + b": keep-alive\n\n" + sse(vllm(b" b")),
        sse(vllm(b" a")) + b'event: x\ndata: {"a":\ndata: 1}\n\n',
        sse(vllm(b" a"), b"[DONE]"),
        sse(TEXT, TEXT),
    ],
)
def test_the_template_decodes_as_full_parsing(read):
    assert decoded(read, template=True) == decoded(read, template=False)


def test_the_template_is_learnt_only_where_the_text_is():
    # the text also names a key, or sits in another field: never a template from that event
    for first in (VLLM.replace(b'"model":"x"', b'"model":"%s"') % (b"m", b"m"), vllm(b"content")):
        d = ChatStreamDecoder()
        d.read([first], 1.0)
        assert d._template.size == 0 or d.read([vllm(b"zz")], 1.0) == 1
    d = ChatStreamDecoder()
    assert d.read([vllm(b" a"), vllm(b" b")], 1.0) == 2 and d._template.size > 0


def test_a_read_of_many_events_splits_them():
    p = SSEParser()
    assert p.feed(sse(TEXT, USAGE, b"[DONE]")) == [TEXT, USAGE, b"[DONE]"]
    assert p.feed(sse(TEXT)[:-1]) == []  # the last event's blank line is still to come
    assert p.feed(b"\n" + sse(TEXT).replace(b"\n", b"\r\n")) == [TEXT, TEXT]


# A real vLLM 0.32 stream (Gemma 3 270M) whose reply is only its end-of-sequence token: the one
# output event has empty text, and usage says 1 completion token.
VLLM_EOS_ONLY = (
    b'data: {"id":"chatcmpl-830ec9c392b2930f","object":"chat.completion.chunk","created":1796169576,'
    b'"model":"gemma3-270m","choices":[{"index":0,"delta":{"role":"assistant","content":""},'
    b'"logprobs":null,"finish_reason":null}],"prompt_token_ids":null,"prompt_text":null}\n\n'
    b'data: {"id":"chatcmpl-830ec9c392b2930f","object":"chat.completion.chunk","created":1796169576,'
    b'"model":"gemma3-270m","choices":[{"index":0,"delta":{"content":""},"logprobs":null,'
    b'"finish_reason":"stop","stop_reason":null,"token_ids":null}]}\n\n'
)


def test_an_empty_text_output_event_places_its_token():
    p, d = SSEParser(), ChatStreamDecoder(keep_text=True)
    assert d.read(p.feed(VLLM_EOS_ONLY[: VLLM_EOS_ONLY.index(b"\n\n") + 2]), 1.0) == 0  # role
    assert d.read(p.feed(VLLM_EOS_ONLY[VLLM_EOS_ONLY.index(b"\n\n") + 2 :]), 2.0) == 1
    assert d.text() == "" and d.started
    # an event with no delta text at all (OpenAI's closing `"delta": {}`) carries none
    assert d.read([b'{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'], 3.0) == 0
