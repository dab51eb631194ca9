"""Endpoint URLs: one parser; invalid ones refused in one line naming the field, valid ones
redacted without changing where a request goes (a property over generated URLs); IPv6."""

import socket

import pytest
import yarl
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.driver.endpoint import parse_endpoint, redact_url
from harness.driver.http.config import endpoint_url
from tests.driver.helpers import load_manifest, load_records, sess
from tests.driver.test_endings import KEY, _harness, _one_error_line, _trace

VALID = {
    "http://127.0.0.1:8000/v1": "http://127.0.0.1:8000/v1",
    "http://[::1]:8000/v1": "http://[::1]:8000/v1",
    "https://[2001:db8::5]/v1/": "https://[2001:db8::5]/v1/",
    "http://gpu-node_3.cluster.local:65535": "http://gpu-node_3.cluster.local:65535",
    "http://user:s3cret@h:1/proxy/v1?api_key=X": "http://h:1/proxy/v1",
    "http://h:1/v1/chat/completions?k=1": "http://h:1/v1/chat/completions",
}

INVALID = {
    "http://127.0.0.1:99999/v1": "port is out of range (1-65535)",
    "http://127.0.0.1:0/v1": "port 0 is out of range",
    "127.0.0.1:8000": "has no scheme: add http:// (http://127.0.0.1:8000)",
    "localhost:8000/v1?api_key=SECRET": "add http://",
    "http://::1:8000/v1": "an IPv6 address goes in brackets",
    "http://[::1/v1": "not a valid host",
    "http://[zz]:1": "not a valid host",
    "ftp://h:1": "not an http:// or https:// URL",
    "http://": "names no host",
    "http://h:8x/v1": "the port '8x' is not a number",
    "http://300.1.1.1:8000": "not an IPv4 address",
    "http://h:1/v1#frag": "a fragment",
    "http://h :1": "no spaces or control characters",
}


@pytest.mark.parametrize(("url", "redacted"), VALID.items())
def test_valid_endpoints_are_redacted_to_the_same_place(url, redacted):
    assert redact_url(url) == redacted
    assert parse_endpoint(redacted).credentials is False


@pytest.mark.parametrize(("url", "reason"), INVALID.items())
def test_invalid_endpoints_say_what_to_fix(url, reason):
    with pytest.raises(ValueError, match=None) as info:
        parse_endpoint(url)
    message = str(info.value)
    assert reason in message and "\n" not in message, message
    assert "SECRET" not in message


_octet = st.integers(0, 255).map(str)
_ipv4 = st.tuples(_octet, _octet, _octet, _octet).map(".".join)
_ipv6 = st.ip_addresses(v=6).map(lambda a: f"[{a}]")
_label = st.from_regex(r"\A[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?\Z")
# all digits and dots reads as an IPv4 address (and must be one): names have a letter
_name = (
    st.lists(_label, min_size=1, max_size=4)
    .map(".".join)
    .filter(lambda n: not n.replace(".", "").isdigit())
)
_segment = st.from_regex(r"\A[A-Za-z0-9._~-]{1,8}\Z")
_path = st.lists(_segment, max_size=3).map(lambda s: "".join(f"/{p}" for p in s))
_query = st.lists(st.tuples(_segment, _segment), max_size=2).map(
    lambda kv: "&".join(f"{k}={v}" for k, v in kv)
)
_user = st.one_of(st.none(), st.tuples(_segment, _segment).map(lambda up: f"{up[0]}:{up[1]}@"))


@st.composite
def endpoints(draw) -> str:
    scheme = draw(st.sampled_from(["http", "https"]))
    host = draw(st.one_of(_ipv4, _ipv6, _name))
    port = draw(st.one_of(st.none(), st.integers(1, 65535)))
    v1 = draw(st.sampled_from(["", "/v1", "/v1/"]))
    query = draw(_query)
    netloc = f"{draw(_user) or ''}{host}{'' if port is None else f':{port}'}"
    return f"{scheme}://{netloc}{draw(_path)}{v1}{'?' + query if query else ''}"


def _where(url: str) -> tuple:
    """Where aiohttp sends a request for `url` (it parses URLs with yarl)."""
    u = yarl.URL(url)
    return u.scheme, u.host, u.port, u.path


@settings(max_examples=300, deadline=None)
@given(endpoints(), st.sampled_from(["chat", "completions", "messages", "responses"]))
@pytest.mark.slow
def test_redaction_never_changes_where_a_request_goes(url, api):
    redacted = redact_url(url)
    assert "@" not in redacted and "?" not in redacted
    assert _where(endpoint_url(redacted, api)) == _where(endpoint_url(url, api))
    assert _where(endpoint_url(redacted, api, "/models")) == _where(
        endpoint_url(url, api, "/models")
    )
    assert redact_url(redacted) == redacted  # the redacted form is itself a valid endpoint


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="this machine has no ::1")
@pytest.mark.slow
async def test_replay_against_an_ipv6_loopback_endpoint(tmp_path):
    from tests.driver.sse_server import ServerConfig, SSETestServer

    srv = SSETestServer(ServerConfig(token_delay=0.001))
    url = await srv.start(host="::1")
    try:
        path = _trace(tmp_path, [sess("a", [(8, 3, 0)] * 2), sess("b", [(8, 3, 0)])])
        run = tmp_path / "run"
        code, _, err = await _harness(
            "replay", path, "--endpoint", f"{url}/v1", "--model", "m", "-o", run, "--quiet"
        )
        assert code == 0, err
        recs = load_records(run)
        assert [r["status"] for r in recs] == ["ok"] * 3
        assert {r["endpoint"] for r in recs} == {f"{url}/v1"}
        assert load_manifest(run)["endpoints"] == [f"{url}/v1"]
        assert len(srv.log) == 4  # the probe, then three
    finally:
        await srv.stop()


@pytest.mark.parametrize(
    ("endpoint", "extra", "message"),
    [
        ("http://127.0.0.1:99999/v1", [], "field 'target.endpoints.0.url'"),
        ("127.0.0.1:8000/v1", [], "add http://"),
        ("http://::1:8000/v1", [], "brackets"),
        ("http://u:pw-31337@127.0.0.1:9/v1", ["--api-key-env", "ECHO_KEY"], "give one"),
        ("http://u:pw-31337@127.0.0.1:9/v1", ["--header", "Authorization: x"], "give one"),
    ],
)
@pytest.mark.slow
async def test_bad_endpoints_are_one_line_exit_2(tmp_path, endpoint, extra, message):
    path = _trace(tmp_path, [sess("a", [(8, 3, 0)])])
    code, _, err = await _harness(
        "replay", path, "--endpoint", endpoint, "--model", "m", "-o", tmp_path / "r", *extra,
        env={"ECHO_KEY": KEY},
    )  # fmt: skip
    line = _one_error_line(err)
    assert code == 2 and message in line, err
    assert KEY not in err and "pw-31337" not in err
    assert not (tmp_path / "r").exists()  # refused before anything was written


def test_an_in_process_engine_name_is_kept_as_it_is():
    # the in-process engine's endpoints are names, not URLs: the manifest records them unchanged
    assert redact_url("inprocess") == "inprocess"
    assert redact_url("inprocess-1") == "inprocess-1"
