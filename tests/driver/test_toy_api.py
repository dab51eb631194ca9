"""Adding an API touches only its own folder and its registry entry: a made-up Toy API
(tests/driver/toy_api/, one entry `TOY`) is replayed through the registry against a server
that speaks it, with nothing else in the harness told about it (CONTRIBUTING.md, "Adding an
API")."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import harness.driver.apis as apis
from harness.driver.apis import APIS
from harness.driver.config import ReplayConfig
from harness.driver.http import HTTPTarget, HTTPTargetConfig, endpoint_url
from tests.driver.helpers import TEST_TIMEOUTS, replay, sess, trace
from tests.driver.test_http_wing import leaf_breaches
from tests.driver.toy_api import TOY
from tests.driver.toy_server import MODEL, ToyServer
from tests.test_imports import cycles, import_graph


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(APIS, TOY.name, TOY)  # its one line in harness/driver/apis/__init__.py
    return TOY


@pytest.fixture
async def toy_server():
    server = await ToyServer().start()
    yield server
    await server.stop()


@pytest.mark.slow
async def test_a_toy_api_replays_through_the_registry(toy, toy_server, tmp_path):
    tr = trace(sess("a", [(12, 3, 0), (8, 2, 0)], system=16), sess("b", [(8, 2, 0)], system=16))
    kw = {"model": MODEL, "preflight": True}  # the probe goes through the Toy form too
    result, recs, manifest = await replay(tr, toy_server.url, tmp_path, api="toy", target_kw=kw)

    assert [r["status"] for r in recs] == ["ok"] * 3
    paths = [e["path"] for e in toy_server.log]
    assert paths == ["/v1/toy"] * 4  # the preflight's probe, then the three turns
    bodies = [e["body"] for e in toy_server.log[1:]]
    assert all(set(b) == {"model", "tokens", "limit", "stream"} for b in bodies)
    by_id = {r["request_id"]: r for r in recs}
    assert by_id["a:0"]["completion_tokens"] == 3 == sum(by_id["a:0"]["chunk_tokens"])
    assert by_id["a:0"]["prompt_tokens"] == by_id["a:0"]["prompt_tokens_expected"]
    # turn 1 holds turn 0's prompt and reply: the server's cache hit reaches the record
    assert by_id["a:1"]["cached_tokens"] > 0
    assert manifest["target"]["api"] == "toy"
    assert manifest["replay"]["chat_template"] is False


def test_the_registry_gives_the_toy_its_url_and_validation(toy):
    assert endpoint_url("http://h:1", "toy") == "http://h:1/v1/toy"
    assert endpoint_url("http://h:1/v1/toy", "toy", "/models") == "http://h:1/v1/models"
    assert ReplayConfig(api="toy").api == "toy"
    target = HTTPTarget(HTTPTargetConfig(endpoints=("http://h:1",), model="m", api="toy"))
    assert target.describe()["sampling"]["sent"] == {"temperature": 0.0}


def test_an_api_not_in_the_registry_is_refused():
    with pytest.raises(ValueError, match="api must be one of chat, completions, messages"):
        ReplayConfig(api="toy")
    with pytest.raises(ValueError, match="got 'toy'"):
        HTTPTargetConfig(endpoints=("http://h:1",), model="m", api="toy", timeouts=TEST_TIMEOUTS)


def test_the_toy_folder_moved_into_the_wing_keeps_its_rules(tmp_path):
    """CONTRIBUTING.md points at tests/driver/toy_api/ as the way to add an API: copied into
    harness/driver/apis/toy/ and registered, it must import nothing of the HTTP wing at run time
    and take `API` from its module, not from the registry that imports it (a cycle)."""
    wing = tmp_path / "harness" / "driver" / "apis"
    shutil.copytree(Path(apis.__file__).parent, wing, ignore=shutil.ignore_patterns("__pycache__"))
    for parent in (wing.parent, wing.parent.parent):
        (parent / "__init__.py").write_text("")
    (wing / "toy").mkdir()
    for path in (Path(__file__).parent / "toy_api").glob("*.py"):
        text = path.read_text().replace("tests.driver.toy_api", "harness.driver.apis.toy")
        (wing / "toy" / path.name).write_text(text)
    registry = wing / "__init__.py"
    text = registry.read_text().replace("import gemini,", "import gemini, toy,")
    registry.write_text(
        text.replace("        gemini.GEMINI,\n", "        gemini.GEMINI,\n        toy.TOY,\n")
    )
    assert "toy.TOY" in registry.read_text()
    assert leaf_breaches(tmp_path / "harness") == []
    assert cycles(import_graph(tmp_path / "harness")) == []
