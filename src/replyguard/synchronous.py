"""One event loop in a daemon thread, serving every ``run_sync`` call of a Verifier.

litellm caches its HTTP clients per event loop, so a fresh loop per call (``asyncio.run``)
would strand them; one long-lived loop keeps them usable. Closing it closes litellm's clients
and cancels whatever is left on it, as ``asyncio.run`` would.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from replyguard.judge import close_litellm_clients

T = TypeVar("T")


async def _shutdown() -> None:
    await close_litellm_clients()
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not current]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


class SyncLoop:
    """A lazily started background loop; ``submit`` runs a coroutine on it and waits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

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
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coroutine, loop)
        return future.result()

    def close(self) -> None:
        """Stop the loop (call at shutdown, when no ``run_sync`` call is in flight)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(_shutdown(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()
