"""`target.cache_rules`: the breakpoints and fields each kind sends, its default from the API and
the endpoints, the profile the manifest keeps, and the analysis' naming by that profile."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from harness.analysis.hosted_cache import Entries, cost, name_misses
from harness.app.scenario import validate
from harness.driver.apis.messages.request import MessagesRequest
from harness.driver.http import CacheRules
from harness.driver.target import RequestSpec
from harness.errors import ScenarioError
from tests.driver.helpers import target

CHAT = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "one"},
    {"role": "assistant", "content": "two"},
    {"role": "user", "content": "three"},
]
TOOLS = [{"type": "function", "function": {"name": "t", "parameters": {}}}]


def body(rules: CacheRules, tools=None) -> dict:
    tgt = target("http://127.0.0.1:1", api="messages", cache_rules=rules)
    req = RequestSpec(
        request_id="r",
        session_id="s",
        sticky_key="s",
        endpoint=0,
        max_tokens=4,
        prompt_tokens=10,
        messages=CHAT,
        tools=tools,
    )
    return MessagesRequest(tgt.config).body(req)


def marked(b: dict) -> list[str]:
    places = [("tools", b.get("tools") or []), ("system", b.get("system") or [])]
    places += [(f"turn{i}", m["content"]) for i, m in enumerate(b["messages"])]
    return [name for name, blocks in places for x in blocks if "cache_control" in x]


def test_anthropic_breakpoints_are_claude_codes_at_most_four():
    b = body(CacheRules(kind="anthropic"), TOOLS)
    assert marked(b) == ["tools", "system", "turn1", "turn2"]
    assert b["system"][-1]["cache_control"] == {"type": "ephemeral"}
    hour = body(CacheRules(kind="anthropic", ttl="1h"))
    assert hour["messages"][-1]["content"][-1]["cache_control"] == {
        "type": "ephemeral",
        "ttl": "1h",
    }


def test_the_top_level_marker_instead_of_blocks():
    b = body(CacheRules(kind="anthropic", top_level=True), TOOLS)
    assert marked(b) == [] and b["cache_control"] == {"type": "ephemeral"}


def test_openai_sends_the_sessions_key_and_retention():
    tgt = target(
        "http://127.0.0.1:1", api="chat", cache_rules=CacheRules(kind="openai", retention="24h")
    )
    req = RequestSpec(
        request_id="r",
        session_id="child",
        sticky_key="root",
        endpoint=0,
        max_tokens=4,
        prompt_tokens=10,
        messages=CHAT,
    )
    b = tgt.body(req)
    assert b["prompt_cache_key"] == "root" and b["prompt_cache_retention"] == "24h"
    plain = target("http://127.0.0.1:1", api="chat").body(req)
    assert "prompt_cache_key" not in plain


@pytest.mark.parametrize(
    ("api", "url", "kind"),
    [
        ("messages", "https://api.anthropic.com", "anthropic"),
        ("responses", "https://api.openai.com/v1", "openai"),
        ("chat", "https://api.openai.com/v1", "openai"),
        ("messages", "http://127.0.0.1:8000", "none"),  # a self-hosted server: nothing modelled
        ("chat", "http://10.0.0.2:8000", "none"),
    ],
)
def test_auto_follows_the_api_and_the_host(api, url, kind):
    assert CacheRules().resolved(api, [url]).kind == kind


def test_profile_minimum_from_the_table_and_ttl():
    rules = CacheRules(kind="anthropic")
    assert rules.profile("claude-opus-4-5-20251101")["min_tokens"] == 4096
    assert rules.profile("claude-3-5-haiku-latest")["min_tokens"] == 2048
    assert rules.profile("claude-sonnet-4-5")["ttl_s"] == 300.0
    openai = CacheRules(kind="openai").profile("gpt-5")
    assert (openai["min_tokens"], openai["step_tokens"]) == (1024, 128)
    assert CacheRules(kind="none").profile("m") is None


SCENARIO = """
name: s
workload: {profile: workloads/agentx-cpu.yaml}
target:
  kind: endpoints
  endpoints: [{url: "http://127.0.0.1:1"}]
  api: API
  cache_rules: RULES
"""


def test_the_scenario_takes_a_kind_and_refuses_another_apis():
    s = validate(yaml.safe_load(SCENARIO.replace("API", "messages").replace("RULES", "anthropic")))
    assert s.target.cache_rules.kind == "anthropic"
    with pytest.raises(ScenarioError, match="cache_rules anthropic needs api 'messages'"):
        validate(yaml.safe_load(SCENARIO.replace("API", "chat").replace("RULES", "anthropic")))


def test_a_hosted_kind_sets_the_ideals_block():
    from harness.app.build import block_size

    url = SCENARIO.replace("http://127.0.0.1:1", "https://api.anthropic.com")
    auto = validate(yaml.safe_load(url.replace("API", "messages").replace("RULES", "auto")))
    assert block_size(auto) == 1  # anthropic caches at its breakpoints
    openai = validate(yaml.safe_load(SCENARIO.replace("API", "chat").replace("RULES", "openai")))
    assert block_size(openai) == 128
    none = validate(yaml.safe_load(SCENARIO.replace("API", "chat").replace("RULES", "auto")))
    assert block_size(none) == 16 and str(none.target.cache_rules) == "auto"


def frame(ideal, cached, evicted) -> pd.DataFrame:
    n = len(ideal)
    out = pd.DataFrame({"reported": [True] * n, "ideal": ideal, "cached": cached, "prompt": 5000.0})
    for c in ("evicted", "unexplained", "no_hits", "last_block", "in_flight", "misrouted"):
        out[f"miss_{c}"] = 0.0
    out["miss_granularity"] = out["miss_prompt_cap"] = 0.0
    out["miss_evicted"] = evicted
    return out


def test_openai_step_and_minimum_in_the_ideal():
    rules = {"kind": "openai", "min_tokens": 1024, "step_tokens": 128, "ttl_s": 3600.0}
    named = name_misses(frame([900.0, 1300.0], [0.0, 1280.0], [900.0, 20.0]), rules)
    assert named["miss_ineligible"].tolist() == [900.0, 0.0]
    assert named["miss_granularity"].tolist() == [0.0, 20.0]  # 1300 serves 1280: 10 steps
    assert named["ideal_hosted"].tolist() == [0.0, 1280.0]


def test_expired_is_the_missed_ideal_past_the_alive_prefix():
    rules = {"kind": "anthropic", "min_tokens": 100, "step_tokens": 1, "ttl_s": 300.0}
    held = Entries(alive=np.array([500.0, np.inf]), written=np.array([np.inf, 1200.0]))
    named = name_misses(frame([2000.0, 2000.0], [500.0, 0.0], [1500.0, 2000.0]), rules, held)
    assert (named["miss_expired"][0], named["miss_evicted"][0]) == (1500.0, 0.0)
    # past what was ever written (only a prompt under the minimum had it): ineligible
    assert named["miss_ineligible"][1] == 800.0 and named["miss_expired"][1] == 0.0
    assert named["miss_evicted"][1] == 1200.0  # written, alive: the cache lost it


def test_cost_in_input_tokens_at_anthropics_multipliers():
    use = {
        "prompt_tokens": 1000.0,
        "cache_read_tokens": 600.0,
        "cache_write_tokens": 300.0,
        "cache_write_5m_tokens": 300.0,
        "cache_write_1h_tokens": 0.0,
        "uncached_tokens": 100.0,
        "output_tokens": 10.0,
    }
    c = cost(use, None, "5m")
    assert c["with_cache"] == pytest.approx(100 + 60 + 375)
    assert c["saved"] == pytest.approx(1000 - 535) and c["unit"] == "input tokens"
