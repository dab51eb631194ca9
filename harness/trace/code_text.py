"""Source-code content (`content: code`): text drawn from the Python standard library's own files.

Every machine with Python has them (`sysconfig.get_paths()["stdlib"]`), so a trace needs no data
set. A segment's text is a seeded *document* of one kind -- a file's source, a file read as an
agent's Read tool shows it (`cat -n`), grep hits, a file list, test output, an edit's result, a
shell command -- cut into *pieces* (an identifier or number with its leading blanks, one other
character, a line break with the next line's indentation), each about one token for common BPE
tokenizers. Without a tokenizer a segment of n trace tokens is n pieces, and as token ids each
piece is one id (equal pieces, equal ids: the repetition n-gram speculation feeds on survives);
with a tokenizer the text is cut to exactly n of its tokens (`fit`).

Files are picked on a hash ring of their relative paths (sorted, so the choice does not depend
on the order the file system lists them in), and a file another Python version lacks only moves
the picks that landed on it. The same seed gives the same trace structure everywhere, but the
text follows the standard library it reads: pin the Python version for byte-identical prompts.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import sysconfig
from collections.abc import Callable, Iterator
from functools import cache, lru_cache
from pathlib import Path

import numpy as np

from harness.errors import InputError
from harness.vocab import TOKEN_BASE, WORDS

SKIPPED_DIRS = frozenset(
    {"site-packages", "dist-packages", "__pycache__", "test", "tests", "idle_test", "pydoc_data"}
    | {"encodings", "turtledemo"}  # codec tables and demos: not what agents read
)
REPO = "/repo/"  # where the files appear to live, as an agent's tools would show them
_PIECE = re.compile(r"[ \t]*[A-Za-z_][A-Za-z0-9_]*|[ \t]*[0-9]+|[ \t]*[^\sA-Za-z0-9_]|\n[ \t]*|\s")
_IDENT = re.compile(r"\b[a-z_][a-z0-9_]{3,}\b")
_DEF = re.compile(r"^\s*def (\w+)\(", re.MULTILINE)
KINDS = ("source", "read", "grep", "glob", "test", "edit", "write", "command")
Counter = Callable[[str], int]


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


class Corpus:
    """The standard library's .py files on a hash ring of their relative paths."""

    def __init__(self, root: Path) -> None:
        self.root = root
        paths = sorted(
            str(f.relative_to(root))
            for f in root.rglob("*.py")
            if not SKIPPED_DIRS & set(f.relative_to(root).parts) and f.stat().st_size > 0
        )
        if not paths:
            raise InputError(
                "content: code reads the Python standard library's .py files; none here",
                path=root,
            )
        ring = sorted((_hash64(p), p) for p in paths)
        self.paths = tuple(paths)
        self._points = [h for h, _ in ring]
        self._ring = [p for _, p in ring]

    def pick(self, h: int) -> str:
        """The file at ring position `h` (a 64-bit number)."""
        i = bisect.bisect_left(self._points, h % 2**64)
        return self._ring[i % len(self._ring)]

    def lines(self, path: str) -> list[str]:
        return _read_lines(self.root, path)

    def functions(self, path: str) -> list[str]:
        return _functions(self.root, path)


@lru_cache(maxsize=1024)  # the whole library (~600 files, ~10 MB) once read; each file once
def _read_lines(root: Path, path: str) -> list[str]:
    text = (root / path).read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n")
    if "\t" in text:
        text = text.expandtabs(4)
    return text.split("\n")


@lru_cache(maxsize=1024)
def _functions(root: Path, path: str) -> list[str]:
    return _DEF.findall("\n".join(_read_lines(root, path))) or ["run"]


@cache
def corpus() -> Corpus:
    return Corpus(Path(sysconfig.get_paths()["stdlib"]))


def pieces_of(text: str) -> list[str]:
    return _PIECE.findall(text)


# ---- documents: endless chunks of text of one kind, from a seeded stream -----------------------


class _Draw:
    """A seeded stream of 64-bit numbers (numpy's PCG64: the same on every platform)."""

    def __init__(self, key_hash: int) -> None:
        self._rng = np.random.default_rng(key_hash)

    def u64(self) -> int:
        return int(self._rng.integers(0, 2**63)) * 2 + int(self._rng.integers(0, 2))

    def below(self, n: int) -> int:
        return int(self._rng.integers(0, max(1, n)))


def _excerpt(c: Corpus, d: _Draw) -> tuple[str, int, list[str]]:
    """A file, a line to start at, and its lines."""
    path = c.pick(d.u64())
    lines = c.lines(path)
    return path, d.below(max(1, len(lines) - 20)), lines


def _source(c: Corpus, d: _Draw) -> Iterator[str]:
    while True:
        _, start, lines = _excerpt(c, d)
        for line in lines[start : start + 40 + d.below(160)]:
            yield line + "\n"


def _read(c: Corpus, d: _Draw) -> Iterator[str]:
    while True:
        _, start, lines = _excerpt(c, d)
        for n in range(start, min(len(lines), start + 60 + d.below(240))):
            yield f"{n + 1:>6}\t{lines[n]}\n"


def _grep(c: Corpus, d: _Draw) -> Iterator[str]:
    while True:
        path, start, lines = _excerpt(c, d)
        words = _IDENT.findall(" ".join(lines[start : start + 20])) or ["self"]
        word = words[d.below(len(words))]
        hits = [n for n, line in enumerate(lines) if word in line][:50]
        for n in hits:
            yield f"{REPO}{path}:{n + 1}:{lines[n]}\n"


def _glob(c: Corpus, d: _Draw) -> Iterator[str]:
    while True:
        i = c.paths.index(c.pick(d.u64()))
        for path in c.paths[i : i + 10 + d.below(40)]:
            yield f"{REPO}{path}\n"


def _test(c: Corpus, d: _Draw) -> Iterator[str]:
    while True:
        path, start, lines = _excerpt(c, d)
        names = c.functions(path)
        yield "============================= test session starts ==============================\n"
        yield f"collected {len(names)} items\n\n"
        for name in names[:40]:
            yield f"tests/test_{Path(path).stem}.py::test_{name.strip('_')} PASSED\n"
        yield "\n=================================== FAILURES ===================================\n"
        yield f"____________________________ test_{names[0].strip('_')} ____________________________\n\n"
        for n in range(start, min(len(lines), start + 8 + d.below(24))):
            yield f"    {lines[n]}\n"
        yield f">       assert result == expected\nE       AssertionError\n\n{REPO}{path}:{start + 1}: AssertionError\n"
        yield f"=========================== 1 failed, {len(names) - 1} passed in 0.{d.below(99):02d}s ===========================\n"


def _edit(c: Corpus, d: _Draw) -> Iterator[str]:
    while True:
        path, _, _ = _excerpt(c, d)
        yield f"The file {REPO}{path} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n"
        yield from _take_lines(_read(c, d), 20 + d.below(60))


def _write(c: Corpus, d: _Draw) -> Iterator[str]:
    while True:
        path, _, _ = _excerpt(c, d)
        yield f"File created successfully at: {REPO}{path}\n"
        yield from _take_lines(_source(c, d), 20 + d.below(60))


def _command(c: Corpus, d: _Draw) -> Iterator[str]:
    while True:
        path, _, lines = _excerpt(c, d)
        names = c.functions(path)
        yield f"cd /repo && python -m pytest tests/test_{Path(path).stem}.py -k {names[d.below(len(names))]} -x -q"
        yield f" && git diff --stat {REPO}{path}"
        yield " && "


def _take_lines(chunks: Iterator[str], n: int) -> Iterator[str]:
    for _, chunk in zip(range(n), chunks, strict=False):
        yield chunk


_DOCUMENTS = {
    "source": _source,
    "read": _read,
    "grep": _grep,
    "glob": _glob,
    "test": _test,
    "edit": _edit,
    "write": _write,
    "command": _command,
}


def code_pieces(kind: str, key_hash: int, n: int) -> list[str]:
    """The first `n` pieces of the document `kind` seeded by `key_hash` (a prefix of any longer
    one of the same key). Chunks are split on their own, never across their seams."""
    c, d = corpus(), _Draw(key_hash)
    out: list[str] = []
    for chunk in _DOCUMENTS[kind](c, d):
        if len(out) >= n:
            break
        out.extend(pieces_of(chunk))
    return out[:n]


@cache
def _piece_id(piece: str) -> int:
    return TOKEN_BASE + _hash64(piece) % len(WORDS)


def piece_ids(pieces: list[str]) -> np.ndarray:
    """One id per piece, in the content vocabulary's range: equal pieces, equal ids."""
    return np.fromiter((_piece_id(p) for p in pieces), dtype=np.int64, count=len(pieces))


FILLERS = " x\n;#=.,"  # one-character texts a text's last few tokens are made up from


def fit(pieces: Callable[[int], list[str]], n: int, count: Counter) -> str:
    """A text of exactly `n` tokens for `count`: the longest run of pieces that fits, then
    characters of the pieces after it while they still fit, then fillers. The run is found by
    interpolation (a piece is about a token, so a guess from the counts so far lands close),
    halving when a guess gains little: a handful of counts, not one per halving of the text."""
    if n <= 0:
        return ""
    m = n
    while (top := count("".join(pieces(m)))) < n and m < 64 * n:
        m *= 2
    ps = pieces(m)
    lo, c_lo, hi, c_hi = 0, 0, len(ps), top  # count(ps[:lo]) <= n < count(ps[:hi]), or hi = end
    if c_hi <= n:
        lo, c_lo = hi, c_hi
    halve = False
    while hi - lo > 1:
        span = hi - lo
        guess = (lo + hi) // 2 if halve else lo + (n - c_lo + 1) * span // max(1, c_hi - c_lo)
        guess = min(hi - 1, max(lo + 1, guess))
        c = count("".join(ps[:guess]))
        if c <= n:
            lo, c_lo = guess, c
        else:
            hi, c_hi = guess, c
        halve = not halve and hi - lo > span // 2  # little progress: halve next time
    text, have = "".join(ps[:lo]), c_lo
    for ch in "".join(ps[lo : lo + 4]) + FILLERS * 8:
        if have == n:
            break
        got = count(text + ch)
        if got <= n:
            text, have = text + ch, got
    return text
