"""Each API entry builds its own URL and its model list's on the endpoint's server root
(harness/driver/apis/urls.py): the registry's four, and a made-up entry whose URL holds the
model under another version segment with a query of its own, added with nothing else told."""

from __future__ import annotations

import pytest

from harness.driver.apis import API, APIS
from harness.driver.http.config import endpoint_url, metrics_url, models_url
from tests.driver.toy_api.request import ToyRequest

ODD = API("odd", "/m/{model}:go", ToyRequest, chat_template=False, version="/v9", query="alt=sse")


@pytest.fixture
def odd(monkeypatch):
    monkeypatch.setitem(APIS, ODD.name, ODD)


@pytest.mark.parametrize(
    ("base", "api", "url", "models"),
    [
        ("http://h:1", "chat", "http://h:1/v1/chat/completions", "http://h:1/v1/models"),
        ("http://h:1/v1/", "messages", "http://h:1/v1/messages", "http://h:1/v1/models"),
        (
            "http://h:1/gw/v1?k=1",
            "responses",
            "http://h:1/gw/v1/responses?k=1",
            "http://h:1/gw/v1/models?k=1",
        ),
        (
            "http://h:1/v1/chat/completions",
            "chat",
            "http://h:1/v1/chat/completions",
            "http://h:1/v1/models",
        ),
        # another API's URL: its root, not its path (/chat/completions ends in /completions)
        (
            "http://h:1/v1/chat/completions",
            "completions",
            "http://h:1/v1/completions",
            "http://h:1/v1/models",
        ),
    ],
)
def test_the_registrys_urls(base, api, url, models):
    assert endpoint_url(base, api, model="m") == url
    assert models_url(base, api) == models


def test_an_entry_with_the_model_in_its_url_and_a_query_of_its_own(odd):
    assert endpoint_url("http://h:1", "odd", model="big-1") == "http://h:1/v9/m/big-1:go?alt=sse"
    assert endpoint_url("http://h:1/v9?key=K", "odd", model="a/b") == (
        "http://h:1/v9/m/a%2Fb:go?key=K&alt=sse"
    )
    given = "http://h:1/v9/m/other:go?alt=sse"  # already its URL: used as it is, no second alt
    assert endpoint_url(given, "odd", model="big-1") == given
    assert models_url(given, "odd") == models_url("http://h:1/v9", "odd") == "http://h:1/v9/models"
    assert (
        metrics_url("http://h:1/v9?key=K")
        == metrics_url(given + "&key=K")
        == ("http://h:1/metrics?key=K")
    )
    # a /v1 endpoint names the server's root: the entry's own version goes on it
    assert endpoint_url("http://h:1/v1", "odd", model="x") == "http://h:1/v9/m/x:go?alt=sse"
