"""Gemma 3's tokenizer and chat format, built from the GGUF file's vocabulary (no transformers).

The GGUF stores a SentencePiece BPE vocabulary (tokens, types) but no merges; they are recovered
from the vocabulary as Hugging Face does for Gemma: every split of a token into two vocabulary
pieces is a merge, ranked by the merged token's position in the file (Gemma's scores do not follow
its merge order). Spaces are written "▁", unknown bytes fall back to <0xNN> pieces, control tokens
(<bos>, <start_of_turn>, ...) are matched whole. The built tokenizer is cached as tokenizer.json.

Chat format (Gemma 3's template): <bos>, then per message
`<start_of_turn>{user|model}\\n{content, trimmed}<end_of_turn>\\n`, and `<start_of_turn>model\\n` to
generate. A system message (and tool schemas) opens the first user turn; tool results are user
turns, as Gemma has no tool role. The prompt of turn k is a prefix of turn k+1's.
"""

from __future__ import annotations

from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.decoders import DecodeStream
from tokenizers.models import BPE

from harness.engine.models.gguf_weights import Vocabulary, cache_dir, load_vocabulary
from harness.errors import ChatTemplateError
from harness.serving.chat_template import role_and_text, tool_calls, tools_text

_CONTROL, _USER_DEFINED = 3, 4
START_OF_TURN, END_OF_TURN = "<start_of_turn>", "<end_of_turn>"


def _merges(tokens: list[str]) -> list[tuple[str, str]]:
    vocab = {t: i for i, t in enumerate(tokens)}
    found = []
    for token, rank in vocab.items():
        local = [
            (token[:j], token[j:])
            for j in range(1, len(token))
            if token[:j] in vocab and token[j:] in vocab
        ]
        local.sort(key=lambda lr: (vocab[lr[0]], vocab[lr[1]]))
        found += [(rank, -len(left), -len(right), left, right) for left, right in local]
    found.sort(key=lambda m: m[:3])  # stable: equal keys keep their order
    return [(left, right) for *_, left, right in found]


def build_tokenizer(v: Vocabulary) -> Tokenizer:
    # A run of spaces is stored as real spaces, but looked up as "▁▁" once spaces are normalized.
    tokens = ["\u2581" * len(t) if " " in t and not t.strip() else t for t in v.tokens]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(
        BPE(
            vocab=vocab,
            merges=_merges(tokens),
            unk_token=tokens[v.unk_id],
            fuse_unk=True,
            byte_fallback=True,
        )
    )
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    tok.decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    types = v.token_types
    tok.add_special_tokens(
        [
            AddedToken(t, normalized=False, special=True)
            for t, k in zip(v.tokens, types, strict=True)
            if k == _CONTROL
        ]
    )
    tok.add_tokens(
        [
            AddedToken(t, normalized=False, special=False)
            for t, k in zip(v.tokens, types, strict=True)
            if k == _USER_DEFINED and t in vocab
        ]
    )
    return tok


class GemmaTokenizer:
    def __init__(self) -> None:
        v = load_vocabulary()
        path = cache_dir() / "tokenizer.json"
        if path.exists():
            self.tok = Tokenizer.from_file(str(path))
        else:
            self.tok = build_tokenizer(v)
            tmp = path.with_suffix(".tmp")
            self.tok.save(str(tmp))
            tmp.replace(path)
        self.vocab_size = len(v.tokens)
        self.bos_token_id = v.bos_id
        self.eos_token_id = self.tok.token_to_id(END_OF_TURN)  # a chat reply ends its turn
        self.stop_token_ids = (v.eos_id, self.eos_token_id)

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids

    def prompt_ids(self, text: str) -> list[int]:
        """A completion prompt: <bos> then the text (Gemma needs it; vLLM adds it too)."""
        return [self.bos_token_id, *self.encode(text)]

    def decode(self, ids) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=False)

    def decode_stream(self) -> GemmaDecodeStream:
        return GemmaDecodeStream(self.tok)

    def chat_prompt(self, messages: object, tools: object = None) -> list[int]:
        return [self.bos_token_id, *self.encode(render_chat(messages, tools))]


class GemmaDecodeStream:
    """The same push/flush interface as the reference tokenizer's DecodeStream."""

    def __init__(self, tok: Tokenizer) -> None:
        self._tok = tok
        self._stream = DecodeStream(skip_special_tokens=False)

    def push(self, i: int) -> str:
        return self._stream.step(self._tok, i) or ""

    def flush(self) -> str:
        return ""


def render_chat(messages: object, tools: object = None) -> str:
    if not isinstance(messages, list) or not messages:
        raise ChatTemplateError(
            "'messages' must be a non-empty array of message objects", "messages"
        )
    prefix = tools_text(tools) + "\n\n" if tools else ""
    turns = []
    for k, message in enumerate(messages):
        role, text = role_and_text(message, f"messages[{k}]")
        calls = tool_calls(message, f"messages[{k}].tool_calls")
        text = "\n".join([text, *calls]).strip()
        if role in ("system", "developer"):
            prefix += text + "\n\n"
            continue
        speaker = "model" if role == "assistant" else "user"
        if speaker == "user":
            text, prefix = prefix + text, ""
        turns.append(f"{START_OF_TURN}{speaker}\n{text}{END_OF_TURN}\n")
    if prefix:  # only a system message: it is the user turn
        turns.append(f"{START_OF_TURN}user\n{prefix.strip()}{END_OF_TURN}\n")
    return "".join(turns) + f"{START_OF_TURN}model\n"
