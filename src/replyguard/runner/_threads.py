"""Threads for the host's sync code: a sync agent's calls, a sync hook's.

Each owner (a verifier's agents, its hooks) has a bounded pool of its own, started on first
use, not asyncio's default executor: slow sync code queues behind its own kind, never in front
of the checks' and the host's work there. A forked child starts every pool afresh: the threads
are its parent's, and a pool built there would take each call and run none (a child's first
sync agent call waited for ever).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Callable
from typing import Any

from replyguard._forks import forgotten_in_children


class ThreadPool:
    """A bounded pool of ``threads`` threads named ``name``, started on first use; ``close``
    shuts it down (calls already running or queued there still finish), and a later call
    starts a new one."""

    def __init__(self, threads: int, name: str) -> None:
        self.threads = threads
        self.name = name
        self.forget()
        forgotten_in_children(self)

    def forget(self) -> None:
        """No pool (built, or in a forked child: the pool's threads are the parent's, and its
        lock may have been held by one of them)."""
        self._lock = threading.Lock()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def executor(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    self.threads, thread_name_prefix=self.name
                )
            return self._pool

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)  # calls queued or running still finish

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` in one of the pool's threads, in a copy of the caller's context
        (so ``current_turn()`` reads the same inside the sync code)."""
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor(), context.run, function, *args)
