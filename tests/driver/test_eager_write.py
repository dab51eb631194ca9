"""The request body goes to the socket from the task that sends it, in the same event-loop turn
(wire.py `EagerRequest`), not a turn later from aiohttp's write task; `started` runs a
coroutine up to its first wait at once and leaves the rest to a task, unchanged."""

import asyncio
import sys

import aiohttp
import orjson
import pytest

from harness.driver.http.wire import EagerRequest, WireBody, started


async def _twice(fut: asyncio.Future, log: list) -> str:
    log.append("before")
    got = await fut
    log.append(got)
    return got + "!"


async def test_started_runs_up_to_the_first_wait_then_the_task_finishes_it():
    log: list = []
    fut = asyncio.get_running_loop().create_future()
    rest = started(_twice(fut, log))
    assert log == ["before"]  # run now, in the caller
    task = asyncio.ensure_future(rest)
    await asyncio.sleep(0)
    assert not task.done()
    fut.set_result("x")
    assert await task == "x!" and log == ["before", "x"]


async def _done_at_once() -> int:
    return 7


async def _fails_at_once() -> None:
    raise ValueError("no")


async def test_started_coroutine_that_ends_or_fails_at_once():
    assert await started(_done_at_once()) == 7
    rest = started(_fails_at_once())  # the error is the task's, not the caller's
    with pytest.raises(ValueError, match="no"):
        await rest


async def test_a_cancel_reaches_the_started_coroutine():
    log: list = []
    fut = asyncio.get_running_loop().create_future()

    async def waits() -> None:
        try:
            await fut
        except asyncio.CancelledError:
            log.append("cancelled")
            raise

    task = asyncio.ensure_future(started(waits()))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log == ["cancelled"] and fut.cancelled()


class _Turns:
    """Counts the event loop's turns (a callback that re-arms itself each turn)."""

    def __init__(self) -> None:
        self.n, self._loop = 0, asyncio.get_running_loop()
        self._handle = self._loop.call_soon(self._tick)

    def _tick(self) -> None:
        self.n += 1
        self._handle = self._loop.call_soon(self._tick)

    def stop(self) -> None:
        self._handle.cancel()


class _TurnBody(WireBody):
    """A body that notes the loop turn (of `turns`) its write began in."""

    def __init__(self, pieces, turns: _Turns) -> None:
        super().__init__(pieces)
        self.turns, self.turn = turns, -1

    async def write_with_length(self, writer, content_length) -> None:
        self.turn = self.turns.n
        await super().write_with_length(writer, content_length)


async def _turns_to_write(server, request_class) -> int:
    """Loop turns between the call of `post` and its body's write, on a pooled connection."""
    url = server.url + "/v1/chat/completions"
    body = orjson.dumps(
        {"model": "m", "max_tokens": 2, "stream": True, "stream_options": {"include_usage": True}}
        | {"messages": [{"role": "user", "content": "hi"}]}
    )
    async with aiohttp.ClientSession(request_class=request_class) as session:
        for _ in range(2):  # the first opens the connection, the second reuses it
            turns = _Turns()
            wire = _TurnBody((body,), turns)
            at_post = turns.n
            async with session.post(url, data=wire) as resp:
                assert resp.status == 200
                await resp.read()
            turns.stop()
    assert wire.t_write > 0 and wire.turn >= 0
    return wire.turn - at_post


async def test_the_body_goes_in_the_turn_of_the_post(server):
    assert await _turns_to_write(server, EagerRequest) == 0


async def test_aiohttp_alone_writes_a_turn_later_on_this_python(server):
    """What `EagerRequest` is for (Python < 3.12): the test above can fail."""
    if sys.version_info >= (3, 12):
        pytest.skip("aiohttp starts its write task eagerly from Python 3.12")
    assert await _turns_to_write(server, aiohttp.ClientRequest) >= 1
