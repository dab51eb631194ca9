"""The APIs the HTTP target speaks, one folder each (its request form, conversion and decoding),
and the registry of their entries: `APIS`, which every other place reads (docs/driver.md, "APIs";
CONTRIBUTING.md, "Adding an API")."""

from __future__ import annotations

from harness.driver.http.apis import messages, openai, responses
from harness.driver.http.apis.api import API, RequestForm

__all__ = ["API", "APIS", "RequestForm", "api_named"]

APIS: dict[str, API] = {
    api.name: api
    for api in (openai.CHAT, openai.COMPLETIONS, messages.MESSAGES, responses.RESPONSES)
}


def api_named(name: str) -> API:
    """The registry's entry for `name`; a ValueError naming the APIs there are."""
    try:
        return APIS[name]
    except KeyError:
        raise ValueError(f"api must be one of {', '.join(APIS)}, got {name!r}") from None
