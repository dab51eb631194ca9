"""ReplayConfig checks itself once, when built: errors name the field; the scenario's `load:` is
its `Load`, so a scenario file gets the same checks with the file, line and dotted field."""

import pytest
from pydantic import ValidationError

from harness.app.scenario import validate
from harness.driver.config import ReplayConfig
from harness.errors import ScenarioError


def test_open_loop_needs_a_rate():
    with pytest.raises(ValidationError) as err:
        ReplayConfig(load="open")
    assert err.value.errors()[0]["loc"] == ("session_rate",)


def test_a_scenario_gets_the_same_checks_under_its_own_keys(tmp_path):
    doc = {"name": "s", "workload": {"profile": "p.yaml"}, "load": {"mode": "open"}}
    with pytest.raises(ScenarioError, match="field 'load.session_rate': .*needs a session rate"):
        validate(doc)
    doc["load"] = {"cooldown_s": 5}
    with pytest.raises(ScenarioError, match="field 'load.cooldown_s': .*needs max_duration_s"):
        validate(doc)
    doc["load"] = {"max_duration": 5}  # the code's name is not a file key
    with pytest.raises(ScenarioError, match="field 'load.max_duration': unknown key"):
        validate(doc)


def test_a_missing_tokenizer_file_names_the_field(tmp_path):
    doc = {"name": "s", "workload": {"profile": "p.yaml", "tokenizer": str(tmp_path / "no.json")}}
    with pytest.raises(ScenarioError, match="field 'workload.tokenizer': .*no such file"):
        validate(doc)


def test_the_manifest_keeps_the_code_names():
    keys = set(ReplayConfig(max_duration=5.0).as_dict())
    assert {"load", "max_duration", "drain_s", "retry", "api", "run_id"} <= keys
    assert not {"mode", "max_duration_s"} & keys


def test_an_apis_option_needs_its_api():
    with pytest.raises(ValidationError, match="cache_control is an option of api 'messages'"):
        ReplayConfig(api="chat", cache_control=True)
    with pytest.raises(ValidationError, match="previous_response_id is an option of api"):
        ReplayConfig(api="messages", previous_response_id=True)
    assert ReplayConfig(api="responses", previous_response_id=True).previous_response_id


def test_session_header_families_from_a_flags_comma_list_or_a_list():
    assert ReplayConfig(session_headers="dynamo, smg").session_headers == ("dynamo", "smg")
    assert ReplayConfig().session_headers == ("x-session-id",)
    with pytest.raises(ValidationError):
        ReplayConfig(session_headers=["x-session-id", "nginx"])
