"""The Toy stream into target events: a `piece` is one token, the `tally` the usage and the end."""

from __future__ import annotations

from harness.driver.apis.typed_events import TypedEventDecoder
from harness.driver.target import Done, Event, Failure, Usage


class ToyDecoder(TypedEventDecoder):
    __slots__ = ()

    def decode(self, payload: bytes, obj: object, t: float) -> int:
        if type(obj) is not dict:
            return self._fail(t, "MalformedEvent", f"not a JSON object: {payload[:200]!r}")
        if obj["type"] == "piece":
            return self.kept(obj["text"])
        if obj["type"] == "tally":
            self.usage, self.done = obj, True
        return 0

    def finish(self, t: float) -> list[Event]:
        if not self.done or self.usage is None:
            return [Failure(t, "error", "IncompleteStream", "stream ended without its tally")]
        u = self.usage
        return [Usage(u["prompt"], u["output"], u["cached"]), Done(t)]
