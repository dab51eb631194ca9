"""The content vocabulary: the word list trace content is written in, and the token ids its words take.

Low-level and shared: trace content writes prompts in these words, and the reference engine's
tokenizer (`harness.serving.tokenizer`) gives each word the same id, so neither imports the other.
"""

from __future__ import annotations

from importlib import resources

WORDS: tuple[str, ...] = tuple(
    resources.files("harness").joinpath("data/words.txt").read_text(encoding="utf-8").split()
)
WORD_INDEX: dict[str, int] = {w: i for i, w in enumerate(WORDS)}
TOKEN_BASE = 1000  # ids below are left for special tokens (role markers, BOS/EOS) of engines
