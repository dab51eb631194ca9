"""A hosted API's prompt cache as its API entry declares it (`API.hosted`): the kind that
`target.cache_rules` names, the hosts `auto` knows it by, the minimum cacheable prompt per
model, the step its hits come in, and how long an idle prefix lives. harness/driver/http/
cache_rules.py reads these for the manifest's profile; the analyzer models that profile
(harness/analysis/hosted_cache.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class HostedCache:
    """One hosted prompt cache's rules."""

    kind: str  # the `target.cache_rules` kind
    # `auto` picks these rules where every endpoint's host ends in one of these (none: only
    # when asked for by kind)
    hosts: tuple[str, ...]
    # the minimum cacheable prompt by a part of the model's name: the first found wins, so
    # longer names come first
    minimums: tuple[tuple[str, int], ...] = ()
    default_min: int = 1024  # a model not in `minimums`
    step_tokens: int = 1  # hits come in steps of this many tokens (1: at any length)
    # the `target.cache_rules` option that asks for a lifetime, and the seconds an idle prefix
    # lives by its value (the first is the default); none: the API has one lifetime, `ttl_s`
    ttl_option: str | None = None
    ttls: Mapping[str, float] = field(default_factory=dict)
    ttl_s: float | None = None  # without a ttl option: None where the API publishes none
    # the `target.cache_rules` options of this kind the manifest's profile records
    options: tuple[str, ...] = ()

    def minimum(self, model: str) -> int:
        """The minimum cacheable prompt of `model`."""
        name = model.lower()
        return next((n for part, n in self.minimums if part in name), self.default_min)

    def lifetime(self, asked: str | None) -> float | None:
        """Seconds an idle prefix lives with the ttl option at `asked` (None: the default)."""
        if self.ttl_option is None:
            return self.ttl_s
        return self.ttls[asked or next(iter(self.ttls))]
