"""litellm's logging worker: one task per process, on the loop of the latest litellm call.

A litellm call on another loop starts a new task there and strands the old one, pending, to
be "destroyed but pending" (printed by asyncio) when collected. The judge stops it on a loop
it closes (``stop_logging_worker``); a ``run_sync`` call brings it to its own loop first and
stops it there before it returns (``worker_isolated``): mixing ``run_sync`` (from threads) and
``await`` in one process prints nothing. When the other loop is too busy to stop it within
``HANDOVER_SECONDS``, its task is held here until it ends and cancelled on its own loop, so it
is never collected pending either.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

HANDOVER_SECONDS = 0.25
"""The longest a ``run_sync`` call waits for litellm's logging worker to stop on another loop."""

_HELD: set[asyncio.Task[Any]] = set()
"""litellm logging-worker tasks left on another loop: held until they end."""

_active: dict[asyncio.AbstractEventLoop, int] = {}
"""``run_sync`` calls in flight per loop (read and written on that loop only)."""


def _logging_worker() -> Any:
    module = sys.modules.get("litellm.litellm_core_utils.logging_worker")
    return getattr(module, "GLOBAL_LOGGING_WORKER", None)


async def stop_logging_worker() -> None:
    """Stop litellm's logging worker if it runs on this loop (it starts again on the next call).

    It runs as a task on the loop of its first call; left there, it is destroyed pending when
    the loop closes.
    """
    worker = _logging_worker()
    if worker is not None and getattr(worker, "_bound_loop", None) is asyncio.get_running_loop():
        await worker.stop()


def _hold_and_cancel(task: asyncio.Task[Any]) -> None:
    """Keep ``task`` referenced until it ends, and cancel it on its own loop."""
    loop = task.get_loop()
    if task.done() or loop.is_closed():
        return
    _HELD.add(task)  # from now on it cannot be collected while pending

    def cancel() -> None:
        task.add_done_callback(_HELD.discard)
        task.cancel()

    try:
        loop.call_soon_threadsafe(cancel)
    except RuntimeError:  # the loop closed meanwhile
        _HELD.discard(task)


async def _settle_and_stop(worker: Any) -> None:
    """On the worker's loop: let a finished call hand its logging over first, then stop it."""
    for _ in range(3):
        await asyncio.sleep(0)
    await worker.stop()


async def _stop_worker_elsewhere() -> None:
    """Stop litellm's logging worker on the other loop it runs on, if any (bounded wait)."""
    worker = _logging_worker()
    bound = getattr(worker, "_bound_loop", None)
    if bound is None or bound is asyncio.get_running_loop() or bound.is_closed():
        return
    task = getattr(worker, "_worker_task", None)
    try:
        future = asyncio.run_coroutine_threadsafe(_settle_and_stop(worker), bound)
    except RuntimeError:  # that loop is closed: nothing runs there any more
        return
    try:
        async with asyncio.timeout(HANDOVER_SECONDS):
            await asyncio.wrap_future(future)
    except Exception:  # a busy or stopped loop: litellm moves the worker as it always did
        future.cancel()
        if task is not None:
            _hold_and_cancel(task)


async def _stop_worker_here() -> None:
    # litellm hands a finished call's success logging to the worker from a task of its own,
    # a loop iteration or two after the call returns: let it run first.
    for _ in range(3):
        await asyncio.sleep(0)
    worker = _logging_worker()
    loop = asyncio.get_running_loop()
    # Only the last call in flight on this loop stops it: a stop racing another call's start
    # would leave a worker task behind.
    if not _active.get(loop) and getattr(worker, "_bound_loop", None) is loop:
        await worker.stop()


async def worker_isolated(coroutine: Coroutine[Any, Any, T]) -> T:
    """``coroutine`` with litellm's logging worker brought here first and stopped after."""
    loop = asyncio.get_running_loop()
    _active[loop] = _active.get(loop, 0) + 1
    if _active[loop] == 1:
        await _stop_worker_elsewhere()
    try:
        return await coroutine
    finally:
        _active[loop] -= 1
        if not _active[loop]:
            del _active[loop]
            await _stop_worker_here()
