"""Real programs on loopback for the network tests: tinyproxy (a forward proxy), nginx (TLS with
a private CA made here by trustme, proxy buffering, a short keep-alive, its own 502 page) and
uvicorn (a short keep-alive). Each is found on PATH or imported; a test that cannot find one
skips, naming it (`.ci/run` installs nginx and tinyproxy; uvicorn and trustme come with the
[test] extra)."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.waits import HANG_S


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def program(name: str) -> str:
    """The path of `name`, or the test skips saying so."""
    found = shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if Path(p).exists()), None
    )
    if found is None:
        pytest.skip(f"{name} is not installed (apt-get install {name}; .ci/run installs it)")
    return found


def wait_listening(port: int, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + HANG_S  # a guard: a dead process fails at once
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited {proc.returncode}: {log.read_text()[-800:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"not listening on {port}: {log.read_text()[-800:]}")


@contextlib.contextmanager
def running(argv: list[str], port: int, log: Path) -> Iterator[subprocess.Popen]:
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_listening(port, proc, log)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Tinyproxy:
    """tinyproxy on 127.0.0.1: every port open to CONNECT; `requests()` reads its log."""

    def __init__(self, folder: Path, deny: bool = False) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / "tinyproxy.log"
        allow = "Allow 10.255.255.1" if deny else "Allow 127.0.0.1"
        conf = folder / "tinyproxy.conf"
        conf.write_text(
            f"Port {self.port}\nListen 127.0.0.1\nTimeout 600\nMaxClients 100\n{allow}\n"
            f'LogFile "{self.log}"\nLogLevel Info\nDisableViaHeader Yes\n'
        )
        self.argv = [program("tinyproxy"), "-d", "-c", str(conf)]

    def requests(self) -> int:
        """Requests it took (each request line it logged: a CONNECT or a forwarded one)."""
        if not self.log.exists():
            return 0
        return self.log.read_text().count("Request (file descriptor")

    def start(self):
        return running(self.argv, self.port, self.folder / "tinyproxy.out")


class Certificates:
    """A private CA (trustme) and what it signed: a server certificate for 127.0.0.1 and
    localhost, a client certificate; PEM files in `folder`."""

    def __init__(self, folder: Path) -> None:
        trustme = pytest.importorskip("trustme", reason="trustme comes with the [test] extra")
        ca = trustme.CA()
        server = ca.issue_cert("127.0.0.1", "localhost")
        client = ca.issue_cert("client@harness.test")
        self.ca = folder / "ca.pem"
        self.server_chain = folder / "server.pem"
        self.server_key = folder / "server.key"
        self.client_cert = folder / "client.pem"
        self.client_key = folder / "client.key"
        ca.cert_pem.write_to_path(str(self.ca))
        with self.server_chain.open("wb") as f:
            for blob in server.cert_chain_pems:
                f.write(blob.bytes())
        server.private_key_pem.write_to_path(str(self.server_key))
        with self.client_cert.open("wb") as f:
            for blob in client.cert_chain_pems:
                f.write(blob.bytes())
        client.private_key_pem.write_to_path(str(self.client_key))


class Nginx:
    """nginx in the foreground, one process, everything under `folder`: TLS with `certs` on
    `port` (mTLS when `client_ca`), proxying to `upstream` with its default buffering or none,
    a keep-alive of `keepalive_s`; a dead upstream gives nginx's own 502 page; or, with
    `redirect`, a 307 to that URL for every request."""

    def __init__(
        self,
        folder: Path,
        upstream: str,
        certs: Certificates | None = None,
        *,
        buffering: bool = True,
        keepalive_s: float = 1.0,
        client_ca: bool = False,
        redirect: str | None = None,
    ) -> None:
        self.folder, self.port = folder, free_port()
        tls = certs is not None
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.access_log = folder / "access.log"
        listen = f"listen 127.0.0.1:{self.port}{' ssl' if tls else ''};"
        lines = [listen]
        if certs is not None:
            lines += [
                f"ssl_certificate {certs.server_chain};",
                f"ssl_certificate_key {certs.server_key};",
            ]
            if client_ca:
                lines += [f"ssl_client_certificate {certs.ca};", "ssl_verify_client on;"]
        # buffering: nginx's defaults (proxy_buffering on, HTTP/1.0 to the upstream), under
        # which a stream reaches the client in one piece; else passed on as it comes
        passing = "proxy_http_version 1.1; proxy_set_header Connection ''; proxy_buffering off;"
        location = (
            f"return 307 {redirect}$request_uri;"
            if redirect
            else f"proxy_pass {upstream}; {'' if buffering else passing}"
        )
        conf = folder / "nginx.conf"
        conf.write_text(
            "daemon off; master_process off; worker_processes 1;\n"
            f"pid {folder}/nginx.pid; error_log {folder}/error.log info;\n"
            "events { worker_connections 256; }\n"
            "http {\n"
            f"  access_log {self.access_log};\n"
            f"  client_body_temp_path {folder}/body; proxy_temp_path {folder}/proxy;\n"
            f"  fastcgi_temp_path {folder}/fcgi; uwsgi_temp_path {folder}/uwsgi;\n"
            f"  scgi_temp_path {folder}/scgi;\n"
            f"  keepalive_timeout {int(keepalive_s * 1000)}ms;\n"
            f"  server {{ {' '.join(lines)} location / {{ {location} }} }}\n"
            "}\n"
        )
        self.argv = [program("nginx"), "-c", str(conf), "-p", str(folder)]

    def requests(self) -> int:
        return len(self.access_log.read_text().splitlines()) if self.access_log.exists() else 0

    def start(self):
        return running(self.argv, self.port, self.folder / "nginx.out")


class Uvicorn:
    """uvicorn serving tests/driver/asgi_sse.py with a keep-alive of `keepalive_s` (whole
    seconds, as its flag takes them); GET /received lists the request ids it took."""

    def __init__(self, folder: Path, keepalive_s: int = 1) -> None:
        pytest.importorskip("uvicorn", reason="uvicorn comes with the [test] extra")
        import sys

        self.folder, self.port = folder, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [
            sys.executable,
            "-m",
            "uvicorn",
            "tests.driver.asgi_sse:app",
            "--port",
            str(self.port),
            "--timeout-keep-alive",
            str(keepalive_s),
            "--log-level",
            "warning",
        ]

    def start(self):
        return running(self.argv, self.port, self.folder / "uvicorn.out")


async def think_loop(
    url: str, workers: int, turns: int, think_s: float, before: bool = False, **target_kw
) -> dict:
    """`workers` agents of `turns` requests, each turn sent `think_s` (±20 %, seeded) after
    the last ended, as an agent's tool calls are, each agent on its own client (so each of its
    requests finds its connection idle for its think time); what came of them, and what the
    server received (GET /received). `before`: the wire as it was before it kept its idle
    connections shorter and resent a stale one's request (15 s, no resend), a baseline."""
    import asyncio
    import random

    from harness.driver.http import HTTPClient, Network, NetworkSettings

    if before:
        target_kw["network"] = {"keepalive_s": 15.0}
    rng = random.Random(7)
    recs: list[dict] = []
    await asyncio.gather(
        *(_agent(url, w, turns, think_s, rng, before, recs, target_kw) for w in range(workers))
    )
    async with HTTPClient(Network(NetworkSettings(proxy="none"))) as http:
        received = set(json.loads((await http.get(f"{url}/received"))[1]))
    failed = [r for r in recs if r["status"] != "ok"]
    return {
        "requests": len(recs),
        "failed": len(failed),
        "failed_never_received": sum(r["request_id"] not in received for r in failed),
        "resent": sum((r["wire"] or {}).get("resent", 0) for r in recs),
        "received": len(received),
    }


async def _agent(url, w, turns, think_s, rng, before, recs, target_kw) -> None:
    import asyncio

    from harness.driver.recorder import collect
    from harness.driver.target import RequestSpec
    from harness.schema import new_record
    from tests.driver.helpers import target

    tgt = target(url, api="completions", **target_kw)
    await tgt.start(check=False)
    if before:
        tgt._pool.closed = True  # type: ignore[union-attr]  # (the resend's guard: no resend)
    try:
        for t in range(turns):
            await asyncio.sleep(think_s * rng.uniform(0.8, 1.2))
            spec = RequestSpec(
                request_id=f"w{w}:{t}",
                session_id=f"w{w}",
                sticky_key=f"w{w}",
                endpoint=0,
                max_tokens=4,
                prompt_tokens=4,
                prompt=[1, 2, 3, 4],
            )
            recs.append(await collect(tgt, spec, new_record(), 0.0))
    finally:
        await tgt.close()
