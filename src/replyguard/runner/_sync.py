"""One event loop in a daemon thread, serving every ``run_sync`` call of a Verifier.

litellm caches its HTTP clients per event loop, so a fresh loop per call (``asyncio.run``)
would strand them; one long-lived loop keeps them usable. Closing it runs the verifier's own
closer there (its HTTP clients of that loop), then cancels whatever is left on it, as
``asyncio.run`` would. Calls in flight when it is closed finish first: the last of them stops
the loop; a call made after ``close`` starts a new one.

litellm's logging worker is one task, on the loop of the latest litellm call: a call on another
loop starts a new task there and strands the old one, pending, to be "destroyed but pending"
(printed by asyncio) when collected. So each ``run_sync`` call first stops the worker on the
loop it runs on (waiting for that at most ``_HANDOVER_SECONDS``), and stops it on its own loop
before it returns: mixing ``run_sync`` (from threads) and ``await`` in one process prints
nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_HANDOVER_SECONDS = 0.25
"""The longest a ``run_sync`` call waits for litellm's logging worker to stop on another loop."""


def _logging_worker() -> Any:
    module = sys.modules.get("litellm.litellm_core_utils.logging_worker")
    return getattr(module, "GLOBAL_LOGGING_WORKER", None)


async def _stop_worker_elsewhere() -> None:
    """Stop litellm's logging worker on the other loop it runs on, if any (bounded wait)."""
    worker = _logging_worker()
    bound = getattr(worker, "_bound_loop", None)
    task = getattr(worker, "_worker_task", None)
    if bound is None or bound is asyncio.get_running_loop() or task is None or task.done():
        return
    try:
        future = asyncio.run_coroutine_threadsafe(worker.stop(), bound)
    except RuntimeError:  # that loop is closed: nothing runs there any more
        return
    try:
        async with asyncio.timeout(_HANDOVER_SECONDS):
            await asyncio.wrap_future(future)
    except Exception:  # a busy or stopped loop: litellm moves the worker as it always did
        future.cancel()


async def _stop_worker_here() -> None:
    # litellm hands a finished call's success logging to the worker from a task of its own,
    # a loop iteration or two after the call returns: let it run first.
    for _ in range(3):
        await asyncio.sleep(0)
    worker = _logging_worker()
    if worker is not None and getattr(worker, "_bound_loop", None) is asyncio.get_running_loop():
        await worker.stop()


async def _isolated(coroutine: Coroutine[Any, Any, T]) -> T:
    """``coroutine`` with litellm's logging worker brought here first and stopped after."""
    await _stop_worker_elsewhere()
    try:
        return await coroutine
    finally:
        await _stop_worker_here()


Closer = Callable[[], Awaitable[None]]
"""What to run on the loop before it stops (the verifier's clients of that loop)."""


async def _shutdown(closer: Closer | None) -> None:
    if closer is not None:
        await closer()
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not current]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


class SyncLoop:
    """A lazily started background loop; ``submit`` runs a coroutine on it and waits."""

    def __init__(self, closer: Closer | None = None) -> None:
        self._closer = closer
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._in_flight: dict[asyncio.AbstractEventLoop, int] = {}
        self._retiring: dict[asyncio.AbstractEventLoop, threading.Thread] = {}

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the background loop from any thread and return its result."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coroutine.close()
            raise RuntimeError("run_sync() was called inside a running event loop; await run()")
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="replyguard-sync", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            loop = self._loop
            self._in_flight[loop] = self._in_flight.get(loop, 0) + 1
        try:
            future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(
                _isolated(coroutine), loop
            )
            return future.result()
        finally:
            with self._lock:
                self._in_flight[loop] -= 1
                last = not self._in_flight[loop]
                if last:
                    del self._in_flight[loop]
                thread_to_stop = self._retiring.pop(loop, None) if last else None
            if thread_to_stop is not None:
                self._stop(loop, thread_to_stop)

    def close(self) -> None:
        """Stop the loop now, or, while ``run_sync`` calls are in flight on it, once the last
        of them has returned (it is detached at once: a later call starts a new loop)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
            if loop is None or thread is None:
                return
            if self._in_flight.get(loop):
                self._retiring[loop] = thread
                return
        self._stop(loop, thread)

    def _stop(self, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
        asyncio.run_coroutine_threadsafe(_shutdown(self._closer), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()
