"""The recording writer: captured exchanges in, the recording folder out.

The proxy's event loop only hands exchanges over (`WriterProcess.sink`); a process of its own,
in the order they came, reads each request (its API's body into a conversation, the keyed
stand-ins, its tokens), appends its `request` line to requests.jsonl, then, when it ended,
reads its response and appends its `done` line. trace.jsonl and recording.json are rebuilt from the log
(`record.recording`) every `write_every_s` and at `close`, each written whole or not at all, so
the folder holds a valid trace at every moment and after Ctrl-C.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import signal
import sys
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path

from harness.errors import HarnessError
from harness.record import log
from harness.record.capture import Exchange
from harness.record.conversation import BadBody, Conversation, parse
from harness.record.recording import Settings, rebuild
from harness.record.replies import Reply, ReplyReader
from harness.record.standins import StandIns
from harness.trace.recorded import RecordedPrompt

CHAINS = 1024  # Responses ids remembered, for requests that continue a server-kept history


@dataclass
class _Chain:
    """A Responses request a later one may continue: its conversation and its reply."""

    conv: Conversation
    reply: Reply | None = None


class RecordingWriter:
    """The work, in the writer's process: each exchange's lines, the folder's files."""

    def __init__(self, folder: Path, standins: StandIns, settings: Settings, t0: float) -> None:
        self.folder, self.standins, self.settings, self.t0 = folder, standins, settings, t0
        self.log = log.Writer(folder)
        self._prompts: dict[int, RecordedPrompt] = {}  # every request's (a delta's base)
        self._chains: OrderedDict[int, _Chain] = OrderedDict()  # Responses requests, by id
        self._ids: dict[str, int] = {}  # Responses' response ids -> request id
        self._edges: dict[tuple[int, str], int] = {}  # contexts seen: a trie (for `base`)
        self._latest: dict[int, int] = {}
        self._rebuilt = time.monotonic()

    def handle(self, kind: str, ex: Exchange) -> None:
        try:
            self._arrived(ex) if kind == "arrived" else self._ended(ex)
        except Exception as exc:  # one bad exchange must not stop the recording (no content)
            print(
                f"harness record: warning: request {ex.id} not recorded: {type(exc).__name__}",
                file=sys.stderr,
            )
        if time.monotonic() - self._rebuilt >= self.settings.write_every_s:
            rebuild(self.folder, self.settings)
            self._rebuilt = time.monotonic()

    def finish(self) -> None:
        self.log.close()
        rebuild(self.folder, self.settings, final=True)

    # ---- a request arrived -----------------------------------------------------------------

    def _arrived(self, ex: Exchange) -> None:
        line = log.RequestLine(
            id=ex.id, t_sent=ex.t_sent - self.t0, api=ex.api, path=ex.path, headers=ex.headers
        )
        try:
            conv = parse(ex.api, json.loads(_decoded(ex.body, ex.encoding)))
        except (BadBody, ValueError, zlib.error) as exc:
            line.unreadable = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            self.log.write(line)
            return
        line.chained = self._chain(conv)
        prompt, context = self.standins.prompt(conv)
        base = self._base(context)
        self._index(ex.id, context)
        line.model, line.stream, line.max_tokens = conv.model, conv.stream, conv.max_tokens
        line.context, line.system = context, _system_part(conv)
        line.replies = [k + 1 for k, m in enumerate(conv.messages) if m["role"] == "assistant"]
        before = self._prompts.get(base) if base is not None else None
        line.prompt = log.request_prompt(prompt, base, before)
        line.prompt_tokens, line.dropped = prompt.tokens, dict(conv.dropped)
        self._prompts[ex.id] = prompt
        if ex.api == "responses":
            self._chains[ex.id] = _Chain(conv)
            if len(self._chains) > CHAINS:
                self._chains.popitem(last=False)
        self.log.write(line)

    def _chain(self, conv: Conversation) -> bool:
        """A Responses request that names a previous response: its whole conversation is its
        own instructions, that request's conversation, that response's output, then its own
        input (the server kept the rest)."""
        rid = conv.previous_response_id
        before = self._chains.get(self._ids.get(rid, -1)) if rid is not None else None
        if before is None or before.reply is None:
            return False

        def system(m: dict) -> bool:
            return m["role"] in ("system", "developer")

        history = [m for m in before.conv.messages if not system(m)] + [before.reply.message()]
        mine = conv.messages
        conv.messages = (
            [m for m in mine if system(m)] + history + [m for m in mine if not system(m)]
        )
        return True

    def _base(self, context: list[str]) -> int | None:
        """The earlier request sharing the most of this context (the delta's base)."""
        node, base = 0, None
        for key in context:
            nxt = self._edges.get((node, key))
            if nxt is None:
                break
            node, base = nxt, self._latest[nxt]
        return base

    def _index(self, rid: int, context: list[str]) -> None:
        node = 0
        for key in context:
            nxt = self._edges.get((node, key))
            if nxt is None:
                nxt = self._edges[(node, key)] = len(self._edges) + 1
            node = nxt
            self._latest[node] = rid

    # ---- its response ended ----------------------------------------------------------------

    def _ended(self, ex: Exchange) -> None:
        reply = None
        if ex.id in self._prompts:
            reader = ReplyReader(ex.api, ex.streamed)
            with contextlib.suppress(zlib.error, ValueError):  # unreadable: times and status stay
                reader.feed(_decoded(bytes(ex.reply), ex.reply_encoding))
            reply = reader.finish()
            chain = self._chains.get(ex.id)
            if chain is not None and reply.response_id:
                chain.reply = reply
                self._remember_chain(reply.response_id, ex.id)
        self.log.write(self._done_line(ex, reply))

    def _remember_chain(self, response_id: str, rid: int) -> None:
        self._ids[response_id] = rid
        if len(self._ids) > CHAINS:
            del self._ids[next(iter(self._ids))]

    def _done_line(self, ex: Exchange, reply: Reply | None) -> log.DoneLine:
        line = log.DoneLine(
            id=ex.id,
            outcome=ex.outcome,
            status=ex.status,
            t_end=(ex.t_end or time.perf_counter()) - self.t0,
        )
        line.t_first_byte = _since(ex.t_first_byte, self.t0)
        line.t_last_byte = _since(ex.t_last_byte, self.t0)
        if ex.error and self.standins.keep:
            line.error = ex.error
        elif ex.error:
            line.error = ex.error.partition(":")[0]  # the failure's class, never a message
        if reply is None:
            return line
        tokens = reply.normalized()
        line.usage, line.tokens, line.diagnostics = reply.usage, tokens, reply.diagnostics
        line.finish_reason, line.events, line.calls = (
            reply.finish_reason,
            reply.events,
            len(reply.calls),
        )
        if tokens["output_tokens"] is not None:
            line.output_tokens = tokens["output_tokens"]
        else:
            line.output_tokens, line.output_counted = self._count_output(reply), True
        return line

    def _count_output(self, reply: Reply) -> int:
        count = self.standins.count
        return count(reply.reasoning + reply.text) + sum(
            count(c["name"]) + count(c["arguments"]) for c in reply.calls
        )


def _since(t: float | None, t0: float) -> float | None:
    return None if t is None else t - t0


def _decoded(data: bytes, encoding: str) -> bytes:
    if encoding in ("gzip", "x-gzip", "deflate"):
        return zlib.decompressobj(wbits=47).decompress(data)
    return data


def _system_part(conv: Conversation) -> int:
    """Context entries of the system part: the tools' key, then the leading system messages."""
    n = 1
    for m in conv.messages:
        if m["role"] not in ("system", "developer"):
            break
        n += 1
    return n


def _serve(queue, ready, folder: Path, standins: StandIns, settings: Settings, t0: float) -> None:
    """The writer process: exchanges from the queue until its end, then the folder's files.
    Ctrl-C reaches the whole process group: the proxy's process decides when this one ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    writer = RecordingWriter(folder, standins, settings, t0)
    standins.count("ready")  # the token counter built before the first request, not during it
    ready.set()
    try:
        while True:
            try:
                item = queue.get()
            except EOFError:  # the proxy's process is gone: write what came
                break
            if item is None:
                break
            writer.handle(*item)
    finally:
        writer.finish()


class WriterProcess:
    """The recording writer in a process of its own, so that reading requests and making
    stand-ins never holds the proxy's event loop (one interpreter lock would: each of its
    switches is up to 5 ms, added to a stream's chunks). The proxy only hands exchanges over."""

    def __init__(self, folder: Path, standins: StandIns, settings: Settings) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._queue, self._ready = ctx.Queue(), ctx.Event()
        args = (self._queue, self._ready, folder, standins, settings, time.perf_counter())
        self._process = ctx.Process(target=_serve, args=args, name="harness-record-writer")
        self._process.start()

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until the process has started (its imports and token counter are seconds of CPU on
        a busy machine: the first requests would pay for them)."""
        while not self._ready.wait(0.2):
            if not self._process.is_alive() or (timeout := timeout - 0.2) <= 0:
                raise HarnessError("the recording writer did not start (see the lines above)")

    def sink(self, kind: str, ex: Exchange) -> None:
        """Called by the proxy (its event loop): hand over, never block. A copy goes (the queue
        pickles it later, on its own thread); an ended exchange without its request body, which
        went when it arrived."""
        copy = replace(ex, reply=bytearray()) if kind == "arrived" else replace(ex, body=b"")
        self._queue.put((kind, copy))

    def close(self) -> None:
        """Finish what was handed over; trace.jsonl and recording.json are written then."""
        self._queue.put(None)
        self._queue.close()
        self._queue.join_thread()
        self._process.join()
        if self._process.exitcode != 0:
            raise HarnessError(f"the recording writer failed (exit code {self._process.exitcode})")
