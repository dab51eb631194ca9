"""Chat templates rendered and tokenized as the server does, and the token-level ideal cache."""

from __future__ import annotations

import random

import pytest

from harness.errors import InputError
from harness.trace.chat_tokens import ChatTemplateError, ChatTokenizer
from harness.trace.token_prefixes import TokenPrefixes, common_prefix, token_key
from tests.trace.chat_fixtures import GENERATION_PROMPT, PER_MESSAGE, tokenizer_dir

CONVERSATION = [
    {"role": "system", "content": "the time is up"},
    {"role": "user", "content": "make it work"},
    {"role": "assistant", "content": "done"},
]


def test_renders_with_trimmed_blocks_and_the_generation_prompt(tmp_path):
    tok = ChatTokenizer.load(tokenizer_dir(tmp_path))
    assert tok.render(CONVERSATION) == (
        "<s>system\nthe time is up</s>\n<s>user\nmake it work</s>\n<s>assistant\ndone</s>\n<s>assistant\n"
    )
    assert (
        tok.render(CONVERSATION[:1], add_generation_prompt=False)
        == "<s>system\nthe time is up</s>\n"
    )


def test_chat_tokens_counted_by_hand(tmp_path):
    tok = ChatTokenizer.load(tokenizer_dir(tmp_path))
    words = 4 + 3 + 1
    assert len(tok.chat_ids(CONVERSATION)) == words + 3 * PER_MESSAGE + GENERATION_PROMPT == 19
    ids = tok.chat_ids(CONVERSATION[:1])
    assert [tok.tokenizer.id_to_token(i) for i in ids] == [
        "<s>",
        "system",
        "the",
        "time",
        "is",
        "up",
        "</s>",
        "<s>",
        "assistant",
    ]  # no <bos>
    assert [tok.tokenizer.id_to_token(i) for i in tok.text_ids("make it work")] == [
        "<bos>",
        "make",
        "it",
        "work",
    ]
    assert tok.count("make it work") == 3


def test_template_from_tokenizer_config_and_special_tokens(tmp_path):
    template = "{{ bos_token }}{% for m in messages %}{{ m['content'] | tojson }}{% endfor %}"
    tok = ChatTokenizer.load(tokenizer_dir(tmp_path, template=template, in_config=True))
    assert tok.special_tokens == {"bos_token": "<bos>", "eos_token": "</s>"}
    assert (
        tok.render([{"role": "user", "content": "a <b> é"}]) == '<bos>"a <b> é"'
    )  # no HTML escaping


def test_template_helpers(tmp_path):
    template = (
        "{% for m in messages %}{% if m['role'] == 'tool' %}{{ raise_exception('no tools') }}{% endif %}"
        "{% generation %}{{ m['content'] }}{% endgeneration %}{% if loop.index == 1 %}{% break %}{% endif %}"
        "{% endfor %}"
    )
    tok = ChatTokenizer.load(tokenizer_dir(tmp_path, template=template))
    assert tok.render(CONVERSATION) == "the time is up"
    with pytest.raises(ChatTemplateError, match="no tools"):
        tok.render([{"role": "tool", "content": "x"}])


def test_folder_without_template_or_tokenizer(tmp_path):
    tok = ChatTokenizer.load(tokenizer_dir(tmp_path / "plain", template=None) / "tokenizer.json")
    assert not tok.has_template and tok.count("it works") == 2
    with pytest.raises(ChatTemplateError, match="no chat template"):
        tok.render(CONVERSATION)
    with pytest.raises(InputError, match="no tokenizer.json"):
        ChatTokenizer.load(tmp_path / "empty")


def test_token_prefixes_by_hand():
    index = TokenPrefixes()
    assert index.shared_prefix(token_key([1, 2, 3])) == 0
    for ids in ([1, 2, 3, 4], [1, 2, 9], [300, 1]):
        index.add(token_key(ids))
    assert index.shared_prefix(token_key([1, 2, 3, 5])) == 3
    assert index.shared_prefix(token_key([1, 2, 9, 9, 9])) == 3
    assert index.shared_prefix(token_key([1, 2])) == 2
    assert index.shared_prefix(token_key([256 + 1])) == 0  # shares a byte with 1 and 300, no token
    assert common_prefix(token_key([5, 6]), token_key([5, 6])) == 2


def test_token_prefixes_match_a_brute_force_search():
    rng = random.Random(4)
    kept: list[list[int]] = []
    index = TokenPrefixes()
    for _ in range(300):
        base = rng.choice(kept)[: rng.randint(0, 12)] if kept and rng.random() < 0.8 else []
        ids = base + [rng.choice((1, 2, 255, 256, 70000)) for _ in range(rng.randint(1, 6))]
        want = max((_lcp(ids, k) for k in kept), default=0)
        assert index.shared_prefix(token_key(ids)) == want
        index.add(token_key(ids))
        kept.append(ids)


def _lcp(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n
