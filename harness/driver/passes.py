"""The prompt sources of a replay's passes over its trace (cycle 0, and each later cycle with its
own salt: harness.trace.cycles), held while a pass has families running.

A pass whose families have all ended, once a later pass has started, sends nothing more (tasks
come in order): its source goes, with its content caches. All passes share the first pass's word
and text caches (a segment's words do not depend on the salt). A cycled soak holds the passes in
flight, not every pass so far (it grew ~1 MB a pass: docs/measurements/soak.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from harness.driver.apis import api_named
from harness.driver.config import ReplayConfig
from harness.trace.content import Content, load_hf_token_counter, load_hf_token_encoder
from harness.trace.cycles import cycle_salt
from harness.trace.model import Trace
from harness.trace.requests import RequestSource


class Passes:
    def __init__(self, trace: Trace, config: ReplayConfig) -> None:
        self.trace, self.config = trace, config
        tokenizer = config.tokenizer
        self._counter = load_hf_token_counter(tokenizer) if tokenizer else None
        self._encoder = load_hf_token_encoder(tokenizer) if tokenizer else None
        self._sources: dict[int, RequestSource] = {}
        self._families: Counter[int] = Counter()  # families running, by cycle
        self._first_content: Content | None = None  # whose caches every pass shares
        self._latest = 0

    def __len__(self) -> int:
        return len(self._sources)

    def source(self, cycle: int) -> RequestSource:
        """The prompts of pass `cycle`."""
        source = self._sources.get(cycle)
        if source is None:
            source = self._sources[cycle] = self._new_source(cycle)
        return source

    def first_tools(self) -> list[dict] | None:
        """The tool schemas the run's first request carries (None: it carries none), for a
        target's preflight to send the same shape; the prompt is built as the run builds it
        (a session's first prompt is built afresh each time, so the run's own is unchanged)."""
        if not self.trace.main_sessions:
            return None
        s = self.trace.main_sessions[0]
        prompt = next(p for p in self.source(0).prompt_steps(s.id, 0) if p is not None)
        return prompt.tools

    def prepare(self) -> None:
        """What the first prompts need loaded, loaded before the run's clock starts."""
        self.source(0).content.prepare()

    def family_started(self, cycle: int) -> None:
        self._families[cycle] += 1
        self._latest = max(self._latest, cycle)
        self._drop_finished()

    def family_ended(self, cycle: int, sessions: Iterable[str]) -> None:
        self.source(cycle).forget(sessions)
        self._families[cycle] -= 1
        self._drop_finished()

    def _drop_finished(self) -> None:
        done = [c for c, n in self._families.items() if n == 0 and c < self._latest]
        for c in done:
            del self._families[c]
            self._sources.pop(c, None)

    def _new_source(self, cycle: int) -> RequestSource:
        c = self.config
        source = RequestSource(
            self.trace,
            # chat messages where the API's server renders them, else token ids or text
            api="chat" if api_named(c.api).chat_template else "completions",
            prompt_format=c.prompt_format,
            salt=cycle_salt(c.salt, cycle),
            token_counter=self._counter,
            token_encoder=self._encoder,
            live=c.history == "live",
        )
        if self._first_content is None:
            self._first_content = source.content
        else:  # one word cache for all passes, not one per pass in flight
            source.content.share_caches(self._first_content)
        return source
