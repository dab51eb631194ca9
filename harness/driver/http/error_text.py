"""A server's error body as one line of a failure message: an HTML page reduced to its title (or
its first text), whitespace collapsed, control characters escaped, the length bounded. The
record keeps the whole body beside it (`error.body`)."""

from __future__ import annotations

import html
import re

MESSAGE_CHARS = 300  # of a message's server text; the record's error.body keeps the rest

_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_HIDDEN = re.compile(r"<(script|style|head)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def one_line(text: str, limit: int = MESSAGE_CHARS) -> str:
    """`text` (a body, or a message holding one) as one printable line of at most `limit`
    characters; HTML as its title or first text."""
    if _is_html(text):
        text = _html_text(text)
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", _SPACE.sub(" ", text).strip())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _is_html(text: str) -> bool:
    head = text.lstrip()[:200].lower()
    return head.startswith(("<!doctype html", "<html", "<head", "<body")) or "<title" in head


def _html_text(page: str) -> str:
    title = _TITLE.search(page)
    if title is not None and title.group(1).strip():
        return html.unescape(_TAG.sub(" ", title.group(1)))
    return html.unescape(_TAG.sub(" ", _HIDDEN.sub(" ", page)))
