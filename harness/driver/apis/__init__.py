"""The APIs the HTTP target speaks, one folder each (its request form, conversion and decoding),
and the registry of their entries: `APIS`, which every other place reads (docs/driver.md, "APIs";
CONTRIBUTING.md, "Adding an API").

A leaf of the driver: it imports the Target protocol's events and nothing of the HTTP transport
(harness/driver/http/) or the replay's settings, so both of those can read the registry."""

from __future__ import annotations

from harness.driver.apis import gemini, messages, openai, responses
from harness.driver.apis.api import API, RequestForm
from harness.driver.apis.hosted_cache import HostedCache
from harness.driver.apis.stream import StreamDecoder, error_message
from harness.driver.apis.urls import Root, server_root

__all__ = [
    "API",
    "APIS",
    "HostedCache",
    "RequestForm",
    "Root",
    "StreamDecoder",
    "api_named",
    "error_message",
    "server_root",
]

APIS: dict[str, API] = {
    api.name: api
    for api in (
        openai.CHAT,
        openai.COMPLETIONS,
        messages.MESSAGES,
        responses.RESPONSES,
        gemini.GEMINI,
    )
}


def api_named(name: str) -> API:
    """The registry's entry for `name`; a ValueError naming the APIs there are."""
    try:
        return APIS[name]
    except KeyError:
        raise ValueError(f"api must be one of {', '.join(APIS)}, got {name!r}") from None
