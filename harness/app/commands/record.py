"""`harness record`: the capture proxy (harness.record): flags in, a recording folder out.

    harness record --upstream URL [-o DIR] [--port N] [--host H] [--keep-content] [--tokenizer T]
    harness record --rebuild DIR      trace.jsonl and recording.json again, from requests.jsonl

The token counter is composed here: `pieces` (the harness's tokenizer-free unit), `reference`
(`harness serve`'s tokenizer) or a Hugging Face tokenizer folder (the served model's).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.app.commands.options import add_output
from harness.errors import InputError


def register(sub) -> None:
    p = sub.add_parser(
        "record",
        help="record your own agents: a proxy that writes their traffic as a trace",
        description="Forward an agent's requests to the upstream byte for byte and record them "
        "as a replayable trace (content replaced by keyed stand-ins unless --keep-content).",
    )
    p.add_argument("--upstream", help="where requests go, e.g. https://api.openai.com/v1")
    add_output(p, "the recording folder (made if missing)", type=Path)
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (loopback)")
    p.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    p.add_argument(
        "--keep-content",
        action="store_true",
        help="keep the real prompt text in the trace (default: keyed stand-ins)",
    )
    p.add_argument(
        "--tokenizer",
        default="pieces",
        help="what token counts count in: pieces (default), reference (harness serve)"
        ", or a Hugging Face tokenizer folder (the served model's)",
    )
    p.add_argument(
        "--block-tokens",
        type=int,
        default=64,
        help="tokens per stand-in chunk: shared prefixes are kept to this grain (64)",
    )
    p.add_argument(
        "--salt-file",
        type=Path,
        default=None,
        help="the stand-ins' secret key (default: ~/.config/agentic-harness/record.salt)",
    )
    p.add_argument(
        "--spawn-window",
        type=float,
        default=None,
        metavar="S",
        help="a fresh context this soon after a reply that called tools is a "
        "spawned subagent (10 s)",
    )
    p.add_argument(
        "--write-every",
        type=float,
        default=30.0,
        metavar="S",
        help="rewrite trace.jsonl and recording.json this often while recording (30)",
    )
    p.add_argument(
        "--rebuild",
        type=Path,
        default=None,
        metavar="DIR",
        help="only rebuild DIR's trace.jsonl and recording.json from its requests.jsonl",
    )
    p.set_defaults(func=cmd_record)


def cmd_record(args: argparse.Namespace) -> int:
    from harness.record.recording import rebuild

    if args.rebuild is not None:
        rebuild(args.rebuild, final=True)
        _summary(args.rebuild)
        return 0
    rec = recording_of(args)
    from harness.record.recorder import record

    record(rec, lambda url: _announce(url, rec))
    _summary(rec.folder)
    return 0


def recording_of(args: argparse.Namespace):
    """The recording the flags ask for (its stand-ins and settings)."""
    from harness.driver.endpoint import redact_url
    from harness.record.recorder import Recording
    from harness.record.recording import Settings
    from harness.record.sessions import SPAWN_WINDOW_S
    from harness.record.standins import StandIns, Tokens, default_salt_path, load_salt

    if not args.upstream or args.output is None:
        raise InputError("harness record needs --upstream URL and -o DIR (or --rebuild DIR)")
    try:
        shown = redact_url(args.upstream)
    except ValueError as exc:
        raise InputError(f"--upstream: {exc}") from None
    if args.block_tokens < 1:
        raise InputError("--block-tokens must be at least 1")
    salt = load_salt(args.salt_file or default_salt_path())
    tokens = Tokens(token_ends, args.tokenizer)
    tokens("")  # a tokenizer that cannot load fails here, in one line, not in the writer
    standins = StandIns(salt, tokens, block_tokens=args.block_tokens, keep=args.keep_content)
    window = SPAWN_WINDOW_S if args.spawn_window is None else args.spawn_window
    settings = Settings(
        shown,
        tokenizer=args.tokenizer,
        block_tokens=args.block_tokens,
        keep_content=args.keep_content,
        salt_fingerprint=standins.fingerprint,
        spawn_window_s=window,
        write_every_s=args.write_every,
    )
    return Recording(args.upstream, args.output, standins, settings, args.host, args.port)


def token_ends(name: str) -> Callable[[str], Sequence[int]]:
    """The token counter, as the end offset of each token of a text."""
    if name == "pieces":
        from harness.record.standins import piece_ends
        from harness.trace.code_text import pieces_of

        return piece_ends(pieces_of)
    if name == "reference":
        return _reference_ends
    from harness.trace.chat_tokens import ChatTokenizer

    tokenizer = ChatTokenizer.load(name).tokenizer

    def ends(text: str) -> list[int]:
        out, top = [], 0
        for _, end in tokenizer.encode(text, add_special_tokens=False).offsets:
            top = max(top, end)
            out.append(top)
        return out

    return ends


def _reference_ends(text: str) -> list[int]:
    """`harness serve`'s tokenizer: each token's end, from the text its decoding gives back."""
    from harness.serving.tokenizer import Tokenizer

    tokenizer = Tokenizer()
    stream, out, at = tokenizer.decode_stream(), [], 0
    for i in tokenizer.encode(text):
        at += len(stream.push(i))
        out.append(at)
    if out:
        out[-1] = len(text)
    return out


def _announce(url: str, rec) -> None:
    content = "real content (--keep-content)" if rec.standins.keep else "keyed stand-ins"
    print(f"harness record: listening on {url}, forwarding to {rec.settings.upstream}", flush=True)
    print(
        f"  OpenAI clients: OPENAI_BASE_URL={url}/v1    Anthropic clients: "
        f"ANTHROPIC_BASE_URL={url}",
        flush=True,
    )
    if rec.host not in ("127.0.0.1", "::1", "localhost"):
        print(
            f"harness record: warning: listening on {rec.host}, not loopback: whoever reaches "
            "it can send requests through to the upstream",
            file=sys.stderr,
        )
    print(
        f"  writing {rec.folder}/ ({content}; tokens counted as {rec.settings.tokenizer}); "
        "Ctrl-C to stop",
        flush=True,
    )


def _summary(folder: Path) -> None:
    doc = json.loads((folder / "recording.json").read_text(encoding="utf-8"))
    r, s, reuse = doc["requests"], doc["sessions"], doc["prefix_reuse"]["tokens"]
    shown = "n/a" if reuse is None else f"{reuse:.1%}"
    print(
        f"recorded {r['captured']} requests ({r['in_trace']} in the trace; {r['http_error']} "
        f"HTTP errors, {r['failed']} failed, {r['cancelled']} cancelled): {s['main']} main "
        f"sessions + {s['subagents']} subagents; prefix reuse {shown}; {folder}/trace.jsonl",
        file=sys.stderr,
    )
