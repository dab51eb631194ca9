"""What the wire does past one plain exchange, against the hand-framed loopback server of
test_wire.py: a reused connection closed before any answer (sent once more, fresh, and
recorded), a server's Keep-Alive timeout, 307/308 redirects (followed with the method and body,
bounded, each hop recorded; another host or a POST's 301 refused in one line naming the
Location), and the plain client's redirects for a GET."""

from __future__ import annotations

import asyncio

import pytest

from harness.driver.http import HTTPClient, Network, NetworkSettings
from harness.driver.http.wire import WireError
from harness.driver.recorder import OutcomeCounts, collect
from harness.schema import new_record
from tests.driver.helpers import target
from tests.driver.test_wire import SSE_HEAD, chunked, ok, raw, spec, stream_body

__all__ = ["raw"]  # the fixture, used by name

STREAM = [SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n", chunked(stream_body())]


async def records(url: str, n: int, pause: float = 0.0, **kw) -> list[dict]:
    tgt = target(url, api="completions", **kw)
    await tgt.start(check=False)
    out = []
    try:
        for i in range(n):
            out.append(await collect(tgt, spec(i), new_record(), 0.0))
            await asyncio.sleep(pause)
    finally:
        await tgt.close()
    return out


async def test_a_reused_connection_closed_before_any_answer_is_sent_again_fresh(raw):
    srv, url = await raw(lambda n: [None] if n == 2 else STREAM)  # the 2nd: closed unanswered
    first, second = await records(url, 2)
    assert ok(first) and ok(second) and srv.connections == 2
    assert first["wire"] is None
    assert second["wire"]["resent"] == 1 and "ConnectionClosed" in second["wire"]["resent_why"]
    counts = OutcomeCounts()
    for rec in (first, second):
        counts.observe(rec)
    assert counts.counts()["wire"] == {"resent": 1}  # apart from the failures: there are none
    assert counts.counts()["errors_by_class"] == {}


async def test_a_fresh_connection_closed_before_any_answer_is_not_sent_again(raw):
    srv, url = await raw(lambda n: [None])
    (rec,) = await records(url, 1)
    assert rec["error"]["class"] == "ConnectionClosed" and rec["wire"] is None
    assert len(srv.heads) == 1


async def test_a_connection_cut_after_the_answer_began_is_not_sent_again(raw):
    cut = [SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n", None]
    srv, url = await raw(lambda n: cut if n == 2 else STREAM)
    first, second = await records(url, 2)
    assert ok(first) and second["error"]["class"] == "ConnectionClosed"
    assert second["wire"] is None and len(srv.heads) == 2


async def test_a_server_keep_alive_timeout_under_the_margin_is_never_reused(raw):
    said = SSE_HEAD + b"Keep-Alive: timeout=1\r\nTransfer-Encoding: chunked\r\n\r\n"
    srv, url = await raw(lambda n: [said, chunked(stream_body())])
    recs = await records(url, 3)
    assert all(ok(r) for r in recs) and srv.connections == 3  # 1 s less the 1 s margin


def redirect(status: int, location: str) -> list:
    line = b"HTTP/1.1 %d Moved\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n"
    return [line % (status, location.encode())]


async def test_307_and_308_are_followed_with_the_method_and_body_each_hop_recorded(raw):
    answers = {1: redirect(307, "/v2/completions"), 2: redirect(308, "/v3/completions")}
    srv, url = await raw(lambda n: answers.get(n, STREAM))
    (rec,) = await records(url, 1)
    assert ok(rec)
    heads = [h.decode().split("\r\n") for h in srv.heads]
    assert [h[0] for h in heads] == [
        "POST /v1/completions HTTP/1.1",
        "POST /v2/completions HTTP/1.1",
        "POST /v3/completions HTTP/1.1",
    ]
    lengths = {line for h in heads for line in h if line.startswith("Content-Length")}
    assert len(lengths) == 1  # the same body each time
    assert rec["wire"]["redirects"] == [f"307 {url}/v2/completions", f"308 {url}/v3/completions"]


async def test_redirects_are_bounded(raw):
    srv, url = await raw(lambda n: redirect(307, f"/v1/completions?hop={n}"))
    (rec,) = await records(url, 1, network={"max_redirects": 2})
    assert rec["error"]["class"] == "HTTP307" and len(srv.heads) == 3
    assert "more than 2 redirects (--max-redirects)" in rec["error"]["message"]


async def test_a_redirect_to_another_host_needs_the_flag(raw):
    other, other_url = await raw(lambda n: STREAM)
    srv, url = await raw(lambda n: redirect(307, f"{other_url}/v1/completions"))
    (refused,) = await records(url, 1)
    assert refused["error"]["class"] == "HTTP307" and not other.heads
    message = refused["error"]["message"]
    assert (
        f"redirect to {other_url}/v1/completions" in message and "--redirect-other-hosts" in message
    )
    (followed,) = await records(url, 1, network={"redirect_other_hosts": True})
    assert ok(followed) and len(other.heads) == 1


async def test_a_post_is_not_sent_again_after_a_301(raw):
    srv, url = await raw(lambda n: redirect(301, "/elsewhere"))
    (rec,) = await records(url, 1)
    assert rec["error"]["class"] == "HTTP301" and len(srv.heads) == 1
    assert "/elsewhere" in rec["error"]["message"] and "give that URL" in rec["error"]["message"]


async def test_the_plain_client_follows_a_get_through_302(raw):
    body = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
    srv, url = await raw(lambda n: redirect(302, "/metrics") if n in (1, 3) else [body])
    async with HTTPClient(Network(NetworkSettings(proxy="none"))) as http:
        resp = await http.request("GET", f"{url}/old-metrics")
        assert await resp.read() == b"hello"
    assert resp.redirects == [f"302 {url}/metrics"]
    async with HTTPClient(Network(NetworkSettings(proxy="none"))) as http:
        passed_on = await http.request("GET", f"{url}/old-metrics", follow=False)
        assert passed_on.status == 302 and passed_on.headers["location"] == "/metrics"
        passed_on.close()


async def test_the_plain_client_sends_again_fresh_when_a_reused_connection_closed_unanswered(raw):
    # tinyproxy and servers closing an idle connection: the preflight, /metrics, `harness probe`
    # and `harness record`'s upstream go through the plain client, which must resend as the
    # target does
    body = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
    srv, url = await raw(lambda n: [None] if n == 2 else [body])
    async with HTTPClient(Network(NetworkSettings(proxy="none"))) as http:
        for _ in range(2):
            resp = await http.request("POST", f"{url}/v1/completions", body=b"{}")
            assert await resp.read() == b"hello"
    assert srv.connections == 2 and len(srv.heads) == 3


async def test_the_plain_client_does_not_resend_on_a_fresh_connection(raw):
    srv, url = await raw(lambda n: [None])
    async with HTTPClient(Network(NetworkSettings(proxy="none"))) as http:
        with pytest.raises(WireError, match="closed"):
            await http.request("POST", f"{url}/v1/completions", body=b"{}")
    assert len(srv.heads) == 1
