"""What each API entry says for itself, with nothing else in the harness told: its URL and
its model list's on the endpoint's server root (harness/driver/apis/urls.py), how its model
list reads, the hosted prompt cache it can be under. The registry's four, and a made-up entry
whose URL holds the model under another version segment with a query of its own, whose server
lists models its own way, and whose hosted cache publishes no lifetime."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from aiohttp import web

from harness.analysis.hosted_cache import held_entries
from harness.driver.apis import API, APIS, HostedCache
from harness.driver.http import CacheRules
from harness.driver.http.config import endpoint_url, metrics_url, models_url
from harness.errors import TargetError
from harness.report.hosted_cache import rules_line
from tests.driver.helpers import sess, target, trace
from tests.driver.toy_api.request import ToyRequest


def listed_as_names(listing: object) -> dict[str, dict]:
    """`{"models": [{"name": "models/<id>", ...}]}`: the cards by the name after models/."""
    models = listing.get("models") if isinstance(listing, dict) else None
    cards = [m for m in models or () if isinstance(m, dict) and "name" in m]
    return {m["name"].removeprefix("models/"): {**m, "id": m["name"][7:]} for m in cards}


ODD = API(
    "odd",
    "/m/{model}:go",
    ToyRequest,
    chat_template=False,
    version="/v9",
    query="alt=sse",
    models_query="all=1",
    model_list=listed_as_names,
)


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
    assert (
        models_url(given, "odd")
        == models_url("http://h:1/v9", "odd")
        == ("http://h:1/v9/models?all=1")
    )
    assert (
        metrics_url("http://h:1/v9?key=K")
        == metrics_url(given + "&key=K")
        == ("http://h:1/metrics?key=K")
    )
    # a /v1 endpoint names the server's root: the entry's own version goes on it
    assert endpoint_url("http://h:1/v1", "odd", model="x") == "http://h:1/v9/m/x:go?alt=sse"


@pytest.fixture
async def odd_server():
    async def models(request: web.Request) -> web.Response:
        return web.json_response({"models": [{"name": "models/big-1", "owned_by": "odd"}]})

    app = web.Application()
    app.router.add_get("/v9/models", models)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    await runner.cleanup()


async def test_the_preflight_reads_the_entrys_own_model_list(odd, odd_server):
    listed = target(odd_server, api="odd", model="big-1")
    await listed.start()
    assert listed.served == {odd_server: {"owned_by": "odd"}}
    await listed.close()
    other = target(odd_server, api="odd", model="other", preflight=True)
    with pytest.raises(TargetError, match="does not serve model 'other'; it serves: big-1"):
        await other.start()
    await other.close()


# a hosted cache that publishes no lifetime (ttl_s None), with a minimum per model and steps
NOTED = HostedCache("noted", hosts=("odd.example",), minimums=(("big", 2048),), default_min=512,
                    step_tokens=64)  # fmt: skip


@pytest.fixture
def noted(monkeypatch):
    monkeypatch.setitem(APIS, ODD.name, dataclasses.replace(ODD, hosted=(NOTED,)))


def test_an_entrys_hosted_cache_is_a_kind_of_cache_rules(noted):
    assert CacheRules().resolved("odd", ["https://api.odd.example/v9"]).kind == "noted"
    assert CacheRules().resolved("odd", ["http://127.0.0.1:1"]).kind == "none"
    assert CacheRules().resolved("chat", ["https://api.odd.example"]).kind == "none"
    rules = CacheRules(kind="noted")
    assert rules.profile("big-1") == {
        "kind": "noted",
        "min_tokens": 2048,
        "step_tokens": 64,
        "ttl_s": None,
        "prices": None,
    }
    assert rules.profile("small")["min_tokens"] == 512 and rules.step_tokens() == 64
    with pytest.raises(ValueError, match="cache_rules noted needs api 'odd', not 'chat'"):
        rules.check("chat")
    with pytest.raises(ValueError, match=r"one of auto, none, openai, anthropic, .*noted, got 'x'"):
        CacheRules(kind="x")


def test_a_cache_that_publishes_no_lifetime_lets_nothing_expire():
    tr = trace(sess("a", [(3000, 2, 0), (100, 2, 0)], system=16))
    ok = pd.DataFrame(
        {
            "t_sent": [0.0, 1e5],  # a day later
            "prompt_tokens": [3016.0, 3118.0],
            "session_id": ["a", "a"],
            "turn": [0, 1],
            "ideal_shared_tokens": [0.0, 3018.0],
        }
    )
    rules = {"kind": "noted", "min_tokens": 1024, "step_tokens": 64, "ttl_s": None}
    assert held_entries(tr, ok, rules).alive[1] == np.inf  # all of it alive
    assert held_entries(tr, ok, rules | {"ttl_s": 3600.0}).alive[1] == 0.0
    hosted = {"rules": rules, "ideal_hit_rate_under_rules": 0.5, "requests_below_minimum": 0}
    hosted |= {"ineligible_tokens": 0.0, "expired_tokens": 0.0}
    line = rules_line({"hosted": hosted})  # type: ignore[typeddict-item]
    assert line is not None and line.startswith("noted (min 1024 tokens, TTL not published, 64-")


async def test_an_entrys_running_usage_and_its_fields_not_carried(monkeypatch, odd_server):
    running = dataclasses.replace(ODD, running_usage=True, not_carried=("min_tokens", "seed"))
    monkeypatch.setitem(APIS, ODD.name, running)
    t = target(odd_server, api="odd", model="big-1", sampling={"seed": 3})
    await t.start()
    described = t.describe()
    await t.close()
    assert described["token_placement"] == "usage per event" and t.config.continuous_usage
    assert described["min_tokens"] is False and described["ignore_eos"] is True
    assert described["sampling"]["not_carried"] == ["seed"]
