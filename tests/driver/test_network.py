"""The user's network with real programs on loopback (tests/driver/real_programs.py): tinyproxy as
the forward proxy (absolute form for http://, CONNECT for https://), nginx with TLS from a private
CA (mTLS too) and its own 502 page, for the replay's streams and the one plain client alike."""

from __future__ import annotations

import asyncio
import time

import pytest

from harness.driver.http import HTTPClient, Network, NetworkSettings, WireError
from harness.driver.recorder import collect
from harness.driver.target import RequestSpec
from harness.errors import HarnessWarning
from harness.schema import new_record
from tests.driver.helpers import target
from tests.driver.real_programs import Certificates, Nginx, Tinyproxy, free_port
from tests.driver.sse_server import ServerConfig, SSETestServer
from tests.waits import HANG_S

pytestmark = pytest.mark.slow  # real programs started per test

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def no_proxy_variables(monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certificates(tmp_path_factory.mktemp("certs"))


def spec(i: int, max_tokens: int = 3) -> RequestSpec:
    return RequestSpec(
        request_id=f"s:{i}",
        session_id="s",
        sticky_key="s",
        endpoint=0,
        max_tokens=max_tokens,
        prompt_tokens=4,
        prompt=[1, 2, 3, 4],
    )


async def replay(url: str, n: int = 3, **kw) -> tuple[list[dict], dict]:
    tgt = target(url, api="completions", **kw)
    await tgt.start(check=False)
    try:
        return [await collect(tgt, spec(i), new_record(), 0.0) for i in range(n)], tgt.describe()
    finally:
        await tgt.close()


def statuses(recs: list[dict]) -> list[str]:
    return [r["status"] if r["status"] == "ok" else r["error"]["class"] for r in recs]


async def test_http_proxy_from_the_environment_carries_every_request(server, tmp_path, monkeypatch):
    proxy = Tinyproxy(tmp_path)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    with proxy.start():
        recs, described = await replay(server.url, 4)
    assert statuses(recs) == ["ok"] * 4
    assert proxy.requests() == 4 and len(server.log) == 4
    assert described["network"]["proxy"]["http"] == f"{proxy.url} (from HTTP_PROXY)"


async def test_https_through_a_connect_tunnel_trusting_a_private_ca(
    server, tmp_path, certs, monkeypatch
):
    proxy = Tinyproxy(tmp_path)
    nginx = Nginx(tmp_path, server.url, certs, buffering=False, keepalive_s=30)
    monkeypatch.setenv("https_proxy", proxy.url)
    with proxy.start(), nginx.start():
        recs, described = await replay(nginx.url, 3, network={"ca_bundle": str(certs.ca)})
    assert statuses(recs) == ["ok"] * 3
    assert proxy.requests() >= 1 and nginx.requests() == 3 and len(server.log) == 3
    assert described["network"]["proxy"]["https"] == f"{proxy.url} (from HTTPS_PROXY)"
    assert described["network"]["ca_bundle"] == str(certs.ca)


async def test_no_proxy_and_the_flag_send_directly_past_a_dead_proxy(server, monkeypatch):
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("HTTP_PROXY", dead)
    recs, _ = await replay(server.url, 1)
    assert statuses(recs) == ["ConnectError"]
    message = recs[0]["error"]["message"]
    assert f"through the proxy {dead} (from HTTP_PROXY)" in message and "\n" not in message
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.0/8")
    assert statuses((await replay(server.url, 1))[0]) == ["ok"]
    monkeypatch.delenv("NO_PROXY")
    recs, described = await replay(server.url, 1, network={"proxy": "none"})
    assert statuses(recs) == ["ok"] and described["network"]["proxy"] is None


async def test_a_proxy_that_refuses_the_tunnel_is_one_line_naming_it(
    tmp_path, certs, server, monkeypatch
):
    proxy = Tinyproxy(tmp_path, deny=True)
    nginx = Nginx(tmp_path, server.url, certs)
    with proxy.start(), nginx.start():
        recs, _ = await replay(
            nginx.url, 1, network={"proxy": proxy.url, "ca_bundle": str(certs.ca)}
        )
    (rec,) = recs
    assert rec["error"]["class"] == "ProxyError"
    assert f"the proxy {proxy.url} (from --proxy) refused CONNECT" in rec["error"]["message"]


async def test_an_untrusted_certificate_names_the_options_that_fix_it(
    server, tmp_path, certs, monkeypatch
):
    nginx = Nginx(tmp_path, server.url, certs, buffering=False)
    with nginx.start():
        untrusted, _ = await replay(nginx.url, 1)
        with pytest.warns(HarnessWarning, match="not verified"):  # said on the first screen
            insecure, described = await replay(nginx.url, 1, network={"insecure": True})
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(certs.ca))
        by_requests_variable, _ = await replay(nginx.url, 1)
        monkeypatch.delenv("REQUESTS_CA_BUNDLE")
        monkeypatch.setenv("SSL_CERT_FILE", str(certs.ca))
        by_openssl_variable, _ = await replay(nginx.url, 1)
        (tmp_path / "other").mkdir()
        other = Certificates(tmp_path / "other")  # another private CA
        monkeypatch.setenv("CURL_CA_BUNDLE", str(other.ca))  # outranks SSL_CERT_FILE
        outranked, _ = await replay(nginx.url, 1)
    (rec,) = untrusted
    assert rec["error"]["class"] == "TLSError"
    assert "--ca-bundle" in rec["error"]["message"] and "--insecure" in rec["error"]["message"]
    assert "not trusted by the system's CA store" in rec["error"]["message"]
    assert f"not trusted by {other.ca} (from CURL_CA_BUNDLE)" in outranked[0]["error"]["message"]
    assert statuses(insecure) == statuses(by_requests_variable) == ["ok"]
    assert statuses(by_openssl_variable) == ["ok"]
    assert described["network"]["insecure"] is True


async def test_mtls_without_a_client_certificate_names_the_option(server, tmp_path, certs):
    nginx = Nginx(tmp_path, server.url, certs, buffering=False, client_ca=True)
    tls = {"ca_bundle": str(certs.ca)}
    with nginx.start():
        refused, _ = await replay(nginx.url, 1, network=tls)
        mutual = tls | {"client_cert": str(certs.client_cert), "client_key": str(certs.client_key)}
        accepted, _ = await replay(nginx.url, 2, network=mutual)
    assert statuses(accepted) == ["ok", "ok"]
    (rec,) = refused
    assert rec["status"] == "error"
    assert "--client-cert" in rec["error"]["message"] or rec["error"]["class"] == "HTTP400"


async def test_nginx_502_page_is_one_line_and_the_record_keeps_the_page(tmp_path):
    nginx = Nginx(tmp_path, f"http://127.0.0.1:{free_port()}")
    with nginx.start():
        recs, _ = await replay(nginx.url, 1)
    (rec,) = recs
    assert rec["error"]["class"] == "HTTP502"
    assert rec["error"]["message"] == "HTTP 502 Bad Gateway: 502 Bad Gateway"
    assert "<center>nginx" in rec["error"]["body"]


async def test_the_plain_client_takes_the_same_proxy_and_trust(server, tmp_path, certs):
    proxy = Tinyproxy(tmp_path)
    nginx = Nginx(tmp_path, server.url, certs, buffering=False)
    settings = NetworkSettings(proxy=proxy.url, ca_bundle=str(certs.ca))
    with proxy.start(), nginx.start():
        async with HTTPClient(Network(settings), timeout=HANG_S) as http:
            status, body = await http.get(f"{nginx.url}/metrics")
        async with HTTPClient(Network(NetworkSettings(proxy=proxy.url)), timeout=HANG_S) as http:
            with pytest.raises(WireError) as refused:
                await http.get(f"{nginx.url}/metrics")
    assert status == 200 and b"vllm:prefix_cache_queries" in body
    assert refused.value.error_class == "TLSError" and proxy.requests() == 2


async def test_a_stream_nginx_buffered_is_told_apart_from_one_it_passed_on(tmp_path):
    """Passed on, the upstream writes each token only once the client has read the one before
    (a late process cannot merge two into one read); buffered, nginx holds them all."""
    import pandas as pd

    from harness.analysis import buffering

    found = {}
    for on in (True, False):
        (tmp_path / str(on)).mkdir()
        rec: dict = {}
        upstream = SSETestServer(ServerConfig(token_delay=0.004), pace=None if on else read(rec))
        await upstream.start()
        nginx = Nginx(tmp_path / str(on), upstream.url, buffering=on)
        try:
            with nginx.start():
                recs = await replay_into(nginx.url, rec, 6)
        finally:
            await upstream.stop()
        assert statuses(recs) == ["ok"] * 6
        found[on] = buffering.streaming(pd.DataFrame(recs))
    assert found[True]["buffered"] and found[True]["reads_per_reply_p50"] <= 2, found
    assert not found[False]["buffered"] and found[False]["reads_per_reply_p50"] >= 6
    assert buffering.warnings(found[True])[0].startswith(buffering.WARNING)


def read(rec: dict):
    """Waits until the record being filled (`rec["now"]`) holds `tokens` tokens."""

    async def wait(tokens: int) -> None:
        deadline = time.monotonic() + HANG_S  # a guard: a client that stopped reading hangs
        while sum(rec["now"]["chunk_tokens"]) < tokens:
            assert time.monotonic() < deadline, "the client stopped reading"
            await asyncio.sleep(0.001)

    return wait


async def replay_into(url: str, rec: dict, n: int) -> list[dict]:
    """`n` requests of 12 tokens in turn, each record in `rec["now"]` while it is filled."""
    tgt = target(url, api="completions")
    await tgt.start(check=False)
    recs = []
    try:
        for i in range(n):
            rec["now"] = new_record()
            recs.append(await collect(tgt, spec(i, max_tokens=12), rec["now"], 0.0))
    finally:
        await tgt.close()
    return recs


async def test_a_host_only_the_proxy_could_reach_fails_naming_the_proxy(tmp_path, monkeypatch):
    proxy = Tinyproxy(tmp_path)
    monkeypatch.setenv("http_proxy", proxy.url)
    with proxy.start():
        recs, _ = await replay("http://no-such-host.invalid:8000", 1)
    (rec,) = recs
    message = rec["error"]["message"]
    assert rec["error"]["class"].startswith("HTTP5") and "\n" not in message
    assert f"through the proxy {proxy.url} (from HTTP_PROXY)" in message


async def test_nginx_307_to_another_port_needs_the_flag(server, tmp_path):
    nginx = Nginx(tmp_path, "", redirect=server.url)
    with nginx.start():
        refused, _ = await replay(nginx.url, 1)
        followed, _ = await replay(nginx.url, 2, network={"redirect_other_hosts": True})
    (rec,) = refused
    assert rec["error"]["class"] == "HTTP307" and len(server.log) == 2
    assert f"redirect to {server.url}/v1/completions" in rec["error"]["message"]
    assert statuses(followed) == ["ok", "ok"]
    assert followed[0]["wire"]["redirects"] == [f"307 {server.url}/v1/completions"]


def test_a_proxy_password_reaches_no_file_of_the_run(tmp_path, capsys):
    from harness.app.cli import main
    from harness.trace.native import write_trace
    from tests.trace.tiny import no_think, small_generated

    trace = tmp_path / "t.jsonl"
    write_trace(no_think(small_generated(sessions=1, seed=5)), trace)
    dead = f"http://bob:s3cret-pw@127.0.0.1:{free_port()}"
    out = tmp_path / "run"
    argv = ["replay", str(trace), "--endpoint", "http://127.0.0.1:9", "--model", "m"]
    argv += ["--proxy", dead, "--no-scrape-metrics", "--max-requests", "1", "-o", str(out)]
    assert main(argv) == 2  # /models through a dead proxy: the endpoint cannot be reached
    said = capsys.readouterr().err
    assert "through the proxy http://127.0.0.1:" in said and "(from --proxy)" in said
    files = [p for p in out.iterdir() if p.suffix in (".json", ".jsonl", ".yaml")]
    written = "".join(p.read_text() for p in files) + said
    assert "s3cret-pw" not in written and "bob" not in written
    assert "127.0.0.1" in (out / "scenario.yaml").read_text()  # the proxy kept, less its secret
