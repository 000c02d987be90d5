"""Where ``run_sync`` runs a turn: on the loop of the verifier's async API when it can, else on
one event loop in a daemon thread, serving every such call of a Verifier.

litellm keeps one logging worker per process, bound to the loop of its latest call; a call on
another loop moves it and strands the old loop's task. So once the async API has run on a loop
(``note_host``), a ``run_sync`` call from another thread hands its turn to that loop, if it is
running and takes it up within ``_HANDOVER_SECONDS`` (a handshake makes sure the turn runs on
exactly one loop). A loop that cannot (busy, or blocked on this very call: ``blocked_context``)
leaves the turn to the background loop below.

litellm caches its HTTP clients per event loop, so a fresh loop per call (``asyncio.run``)
would strand them; one long-lived loop keeps them usable. Closing it runs the verifier's own
closer there (its HTTP clients of that loop), then cancels whatever is left on it, as
``asyncio.run`` would. Calls in flight when it is closed finish first: the last of them stops
the loop; a call made after ``close`` starts a new one.

Each ``run_sync`` call on the background loop runs with litellm's logging worker brought to
that loop first and stopped there after (``replyguard.judge._worker``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from replyguard._forks import forgotten_in_children
from replyguard.judge._worker import worker_isolated

T = TypeVar("T")

_HANDOVER_SECONDS = 0.25
"""The longest a ``run_sync`` call waits for the host loop to take its turn up."""


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


_BLOCKED_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "replyguard_blocked_loop", default=None
)
"""A loop whose thread is blocked waiting for this ``run_sync`` call (an adapter's sync entry
point called on a running loop): never handed the call."""


def blocked_context() -> contextvars.Context:
    """A copy of the caller's context in which its running loop is marked blocked (for sync
    entry points that block that loop while a worker thread calls ``run_sync``)."""
    context = contextvars.copy_context()
    context.run(_BLOCKED_LOOP.set, asyncio.get_running_loop())
    return context


def _on_host(
    host: asyncio.AbstractEventLoop, make: Callable[[], Coroutine[Any, Any, T]]
) -> concurrent.futures.Future[Any] | None:
    """Hand the call to ``host``: its future, or None when ``host`` did not take it up in time
    (its thread busy or blocked), in which case ``make`` was never called there."""
    lock = threading.Lock()
    state = ["waiting"]
    taken = threading.Event()

    async def guarded() -> T | None:
        with lock:
            if state[0] == "abandoned":
                return None
            state[0] = "taken"
        taken.set()
        return await make()

    try:
        future = asyncio.run_coroutine_threadsafe(guarded(), host)
    except RuntimeError:  # closed meanwhile
        return None
    if not taken.wait(_HANDOVER_SECONDS):
        with lock:
            if state[0] == "waiting":
                state[0] = "abandoned"
                return None
    return future


def _result_on(host: asyncio.AbstractEventLoop, future: concurrent.futures.Future[Any]) -> Any:
    """The turn's result; a clear error, not a wait for ever, if ``host`` is closed before the
    turn ends (a stopped loop may still run again, so that one is waited for)."""
    while True:
        try:
            return future.result(timeout=_HANDOVER_SECONDS)
        except concurrent.futures.TimeoutError:
            if host.is_closed() and not future.done():
                future.cancel()
                raise RuntimeError(
                    "the event loop running this run_sync turn was closed before it ended"
                ) from None


class SyncLoop:
    """A lazily started background loop; ``submit`` runs a coroutine on it and waits."""

    def __init__(self, closer: Closer | None = None) -> None:
        self._closer = closer
        self.forget()
        # A forked child's first run_sync starts a loop of its own (it waited for ever on the
        # parent's loop, which nothing runs in the child).
        forgotten_in_children(self)

    def forget(self) -> None:
        """No loop, no host loop and nothing in flight (built, or in a forked child: the
        loops' threads and the calls in flight are the parent's, and so is the lock, maybe
        held by one of them; a host loop that was running there runs nothing here)."""
        self._host: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._in_flight: dict[asyncio.AbstractEventLoop, int] = {}
        self._retiring: dict[asyncio.AbstractEventLoop, threading.Thread] = {}

    def note_host(self, loop: asyncio.AbstractEventLoop) -> None:
        """Remember ``loop``: the verifier's async API runs there (called on each entry)."""
        if loop is self._loop:
            return
        if self._host is None or self._host() is not loop:
            self._host = weakref.ref(loop)

    def submit(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run the coroutine ``make()`` from any thread without a running loop and return its
        result: on the loop where the verifier's async API runs, when that loop is running and
        takes it up within ``_HANDOVER_SECONDS``, else on the background loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("run_sync() was called inside a running event loop; await run()")
        host = self._host() if self._host is not None else None
        if host is not None and host is not _BLOCKED_LOOP.get() and host.is_running():
            future = _on_host(host, make)
            if future is not None:
                return _result_on(host, future)  # type: ignore[no-any-return]
        return self._on_own_loop(make)

    def _on_own_loop(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
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
                worker_isolated(make()), loop
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
