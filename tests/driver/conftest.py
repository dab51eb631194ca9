import pytest

from tests.driver.sse_server import ServerConfig, SSETestServer


@pytest.fixture
async def server():
    s = SSETestServer(ServerConfig(token_delay=0.001))
    await s.start()
    yield s
    await s.stop()


@pytest.fixture
async def make_server():
    started = []

    async def make(**cfg) -> SSETestServer:
        s = SSETestServer(ServerConfig(**cfg))
        await s.start()
        started.append(s)
        return s

    yield make
    for s in started:
        await s.stop()
