"""Sampling the harness sets on every request (`target.sampling`): greedy unless asked otherwise.

A server samples at its model's default when a request names no temperature (vLLM: the model's
generation config, else 1.0), so a benchmark that sends none measures whatever that default is:
acceptance of speculative decoding, reply lengths and the text a live history sends back all
move with it. Here the harness decides, and the manifest says what it sent (docs/driver.md,
"Sampling"). Each API carries the settings in its own fields:

| setting | completions, chat | Messages | Responses |
| --- | --- | --- | --- |
| temperature | `temperature` | `temperature` | `temperature` |
| top_p | `top_p` | `top_p` | `top_p` |
| top_k | `top_k` (vLLM, SGLang) | `top_k` | `top_k` (vLLM) |
| seed | `seed` | not sent: Anthropic's API has no seed | `seed` (vLLM) |

A setting left null is not sent (the server's default holds for it).
"""

from __future__ import annotations

from pydantic import Field

from harness.yamlconf import Strict


class Sampling(Strict):
    """What every request asks the server to sample with."""

    temperature: float | None = Field(
        0.0,
        ge=0,
        le=2,
        allow_inf_nan=False,
        description="0 = greedy (the default: figures that depend on the text, such as "
        "speculative acceptance, repeat); null sends none, so the server's default applies",
    )
    top_p: float | None = Field(
        None, gt=0, le=1, allow_inf_nan=False, description="nucleus sampling (null: not sent)"
    )
    top_k: int | None = Field(
        None, ge=-1, description="top-k sampling (null: not sent; -1 or 0 mean off on vLLM)"
    )
    seed: int | None = Field(
        None, description="the server's sampling seed (null: not sent; Messages has no field)"
    )

    def fields(self, not_carried: tuple[str, ...] = ()) -> dict:
        """The body fields an API's requests carry (`not_carried`: those it has no field for)."""
        dumped = self.model_dump().items()
        return {k: v for k, v in dumped if v is not None and k not in not_carried}

    def describe(self, not_carried: tuple[str, ...] = ()) -> dict:
        """The manifest's record: the settings, what the API sent of them, what it could not."""
        sent = self.fields(not_carried)
        unsent = [k for k, v in self.model_dump().items() if v is not None and k not in sent]
        return {**self.model_dump(), "sent": sent, "not_carried": unsent}
