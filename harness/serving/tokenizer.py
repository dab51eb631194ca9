"""The reference engine's tokenizer: the trace content's words, UTF-8 byte fallback, named specials.

The id space (32,000 ids, see `config.VOCAB_SIZE`):

    0..2                 <|pad|> <|bos|> <|eos|>
    3..999               chat role markers (<|system|>, <|user|>, ...); the rest <|tok_N|>
    1000..1000+W-1       the content vocabulary: word i of `harness.vocab.WORDS` is TOKEN_BASE + i
    next 256 ids         one per byte: any text outside the vocabulary still encodes
    the rest ..31999     reserved, decoded as <|tok_N|>

Text is split into runs of letters, runs of whitespace and runs of anything else. A letter run that
is a vocabulary word becomes one word id; everything else becomes byte ids. A single space between
two word ids is implicit (decode puts it back), so content text -- words joined by single spaces --
encodes to exactly the ids `Content.prompt_token_ids` gives, and `decode(encode(text)) == text` for
every text. Special forms such as `<|eos|>` or `<|tok_20000|>` in the text parse back to their ids
(as Hugging Face tokenizers parse added special tokens), so a generated reply sent back as history
re-encodes to the ids the engine generated, and its cached blocks can hit -- except where byte ids
spell something encode would split differently (a byte-level space between two words, letters
spelled in bytes, invalid UTF-8), which a model rarely emits.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable

from harness.engine.config import BOS_ID, EOS_ID, PAD_ID, VOCAB_SIZE
from harness.vocab import TOKEN_BASE, WORD_INDEX, WORDS

SYSTEM_ID, USER_ID, ASSISTANT_ID, END_ID, TOOL_ID, TOOLS_ID, TOOL_CALL_ID = 3, 4, 5, 6, 7, 8, 9
NAMED_SPECIALS: dict[int, str] = {
    PAD_ID: "<|pad|>",
    BOS_ID: "<|bos|>",
    EOS_ID: "<|eos|>",
    SYSTEM_ID: "<|system|>",
    USER_ID: "<|user|>",
    ASSISTANT_ID: "<|assistant|>",
    END_ID: "<|end|>",
    TOOL_ID: "<|tool|>",
    TOOLS_ID: "<|tools|>",
    TOOL_CALL_ID: "<|tool_call|>",
}
WORD_LOW, WORD_HIGH = TOKEN_BASE, TOKEN_BASE + len(WORDS)
BYTE_LOW, BYTE_HIGH = WORD_HIGH, WORD_HIGH + 256

_PIECE = re.compile(r"<\|[a-z]+(?:_[a-z0-9]+)*\|>|[A-Za-z]+|\s+|[^A-Za-z\s<]+|<")
_SPECIAL_IDS = {text: i for i, text in NAMED_SPECIALS.items()}


def _is_word(i: int) -> bool:
    return WORD_LOW <= i < WORD_HIGH


def _is_byte(i: int) -> bool:
    return BYTE_LOW <= i < BYTE_HIGH


def _special_text(i: int) -> str:
    return NAMED_SPECIALS.get(i) or f"<|tok_{i}|>"


def _special_id(piece: str) -> int | None:
    """The id a special form names, or None when `piece` is plain text."""
    if piece in _SPECIAL_IDS:
        return _SPECIAL_IDS[piece]
    m = re.fullmatch(r"<\|tok_(\d+)\|>", piece)
    if m is None or m.group(1).startswith("0") and m.group(1) != "0":
        return None
    i = int(m.group(1))
    unnamed = i < VOCAB_SIZE and i not in NAMED_SPECIALS and not _is_word(i) and not _is_byte(i)
    return i if unnamed else None


class Tokenizer:
    vocab_size = VOCAB_SIZE
    eos_token_id = EOS_ID
    bos_token_id = BOS_ID
    stop_token_ids = (EOS_ID,)

    def encode(self, text: str) -> list[int]:
        words = [WORD_INDEX.get(w) for w in text.split(" ")]
        if None not in words:  # fast path: pure content text, words joined by single spaces
            return [TOKEN_BASE + w for w in words if w is not None]  # (none is; for the types)
        ids: list[int] = []
        pieces = _PIECE.findall(text)
        for k, piece in enumerate(pieces):
            if piece == " " and self._joins_words(ids, pieces, k):
                continue  # the implicit space between two words
            word = WORD_INDEX.get(piece)
            if word is not None:
                ids.append(TOKEN_BASE + word)
                continue
            special = _special_id(piece) if piece.startswith("<|") else None
            if special is not None:
                ids.append(special)
            else:
                ids.extend(BYTE_LOW + b for b in piece.encode("utf-8"))
        return ids

    @staticmethod
    def _joins_words(ids: list[int], pieces: list[str], k: int) -> bool:
        return (
            bool(ids) and _is_word(ids[-1]) and k + 1 < len(pieces) and pieces[k + 1] in WORD_INDEX
        )

    def decode(self, ids: Iterable[int]) -> str:
        ids = list(ids)
        if all(WORD_LOW <= i < WORD_HIGH for i in ids):  # fast path: pure content
            return " ".join([WORDS[i - TOKEN_BASE] for i in ids])
        stream = DecodeStream()
        return "".join(stream.push(i) for i in ids) + stream.flush()

    def decode_stream(self) -> DecodeStream:
        return DecodeStream()

    def token_text(self, i: int) -> str:
        """What one id means on its own (for logs and docs); bytes show as <0xNN>."""
        if _is_word(i):
            return WORDS[i - TOKEN_BASE]
        if _is_byte(i):
            return f"<0x{i - BYTE_LOW:02X}>"
        return _special_text(i)


class DecodeStream:
    """Incremental detokenizer: text deltas for ids as they are generated.

    A multi-byte UTF-8 character split over several byte ids comes out whole once its last byte
    arrives; invalid byte sequences come out as U+FFFD, never an exception.
    """

    def __init__(self) -> None:
        self._bytes = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._after_word = False

    def push(self, i: int) -> str:
        if not 0 <= i < VOCAB_SIZE:
            raise ValueError(f"token id {i} is outside the vocabulary (0..{VOCAB_SIZE - 1})")
        if _is_byte(i):
            self._after_word = False
            return self._bytes.decode(bytes([i - BYTE_LOW]))
        text = self._bytes.decode(b"", final=True)
        if _is_word(i):
            text += (" " if self._after_word else "") + WORDS[i - TOKEN_BASE]
            self._after_word = True
        else:
            text += _special_text(i)
            self._after_word = False
        return text

    def flush(self) -> str:
        return self._bytes.decode(b"", final=True)


def tokenizer_for(config):
    """The reference tokenizer, or the model's own (Gemma 3: built from its GGUF vocabulary)."""
    if config.model.arch == "gemma3":
        from harness.serving.gemma_text import GemmaTokenizer

        return GemmaTokenizer()
    return Tokenizer()
