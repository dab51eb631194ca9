import pytest

from tests.driver.helpers import started_servers
from tests.driver.sse_server import ServerConfig, SSETestServer


@pytest.fixture
async def server():
    s = SSETestServer(ServerConfig(token_delay=0.001))
    await s.start()
    yield s
    await s.stop()


@pytest.fixture
async def make_server():
    async with started_servers(lambda **cfg: SSETestServer(ServerConfig(**cfg))) as make:
        yield make
