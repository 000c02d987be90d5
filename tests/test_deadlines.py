"""``replyguard._deadlines.Deadline``: ``asyncio.timeout_at``'s behaviour as a plain ``with``,
side by side with ``asyncio.timeout_at`` itself in each case (events, never wall figures)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from replyguard._deadlines import Deadline, deadline_in


class _Stdlib:
    """``asyncio.timeout_at`` entered with a plain ``with``'s shape, for the side by side."""

    def __init__(self, when: float) -> None:
        self._timeout = asyncio.timeout_at(when)

    async def __aenter__(self) -> None:
        await self._timeout.__aenter__()

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._timeout.__aexit__(*exc)


@contextlib.asynccontextmanager
async def _entered(kind: str, when: float) -> Any:
    if kind == "ours":
        with Deadline(when):
            yield
    else:
        async with _Stdlib(when):
            yield


KINDS = ("ours", "asyncio")


async def _hang() -> None:
    await asyncio.Event().wait()


@pytest.mark.parametrize("kind", KINDS)
async def test_a_deadline_that_passes_raises_timeout_error_from_the_cancellation(kind: str) -> None:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    with pytest.raises(TimeoutError) as caught:
        async with _entered(kind, loop.time() + 0.01):
            await _hang()
    assert isinstance(caught.value.__cause__, asyncio.CancelledError)
    assert task.cancelling() == 0  # the deadline's own cancellation is taken back


@pytest.mark.parametrize("kind", KINDS)
async def test_a_deadline_already_past_fires_on_the_next_pass(kind: str) -> None:
    loop = asyncio.get_running_loop()

    async def past() -> None:
        async with _entered(kind, loop.time() - 1):
            await asyncio.sleep(0)
            await _hang()

    with pytest.raises(TimeoutError):
        await past()


@pytest.mark.parametrize("kind", KINDS)
async def test_work_done_in_time_leaves_no_timer_behind(kind: str) -> None:
    loop = asyncio.get_running_loop()
    async with _entered(kind, loop.time() + 60):
        await asyncio.sleep(0)
    scheduled: list[asyncio.TimerHandle] = loop._scheduled  # type: ignore[attr-defined]
    assert all(handle.cancelled() for handle in scheduled if handle.when() > loop.time() + 30)


@pytest.mark.parametrize("kind", KINDS)
async def test_the_hosts_cancellation_propagates_as_it_is(kind: str) -> None:
    loop = asyncio.get_running_loop()
    inside = asyncio.Event()

    async def guarded() -> None:
        async with _entered(kind, loop.time() + 60):
            inside.set()
            await _hang()

    task = asyncio.ensure_future(guarded())
    await inside.wait()
    task.cancel()
    await asyncio.wait((task,))
    assert task.cancelled()  # the host's CancelledError came out, not a TimeoutError


@pytest.mark.parametrize("kind", KINDS)
async def test_a_host_cancellation_in_the_deadlines_pass_wins(kind: str) -> None:
    """The deadline fires and the host cancels the task in the same pass of the loop, before
    the task runs again: the host's cancellation propagates (a ``CancelledError``, not a
    ``TimeoutError``), as ``asyncio.timeout`` decides."""
    loop = asyncio.get_running_loop()

    async def guarded() -> None:
        async with _entered(kind, loop.time() - 1):  # fires on the next pass
            task = asyncio.current_task()
            assert task is not None
            loop.call_soon(task.cancel)  # the host's, queued right after the deadline's
            await _hang()

    task = asyncio.ensure_future(guarded())
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


def test_outside_a_running_loop_it_refuses() -> None:
    with pytest.raises(RuntimeError), Deadline(0.0):
        pass


async def test_deadline_in_counts_from_now() -> None:
    with pytest.raises(TimeoutError), deadline_in(0.01):
        await _hang()
    with deadline_in(60):  # ample: the work ends first, nothing raised
        await asyncio.sleep(0)
