"""Hooks: the caller's callbacks on a turn's decisions, which can never change the outcome.

``on_verdict(turn, attempt)``, ``on_retry(turn, attempt, feedback)``,
``on_exhausted(turn, outcome)``, ``on_fail_open(turn, outcome)`` and ``on_skip(turn, outcome)``
(skipped and not-triggered turns). Each may be sync or async. A hook gets a deep copy of the
turn, so it cannot change what the judge sees. A hook that raises is logged (``hook_failed``);
one still running after ``hookTimeoutSeconds`` is abandoned (``hook_timed_out``) — never waited
on again, even if it ignores cancellation. Sync hooks run on the verifier's own small thread
pool, so hung hooks cannot starve anything else; one that waited there for a thread past its
time limit still runs when a thread is free (the turn no longer waits for it), unless
``ABANDONED_LIMIT`` hooks are abandoned already (behind hooks that hang): then it is dropped.
The runner does not count hook time against the turn's deadline.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from replyguard.runner._agents import copy_any_depth
from replyguard.runner._threads import ThreadPool
from replyguard.telemetry._events import Events, describe_error
from replyguard.types import Turn

Hook = Callable[..., Any]
_HOOK_THREADS = 4
ABANDONED_LIMIT = 1000
"""The most hooks a verifier keeps that its turns stopped waiting for; past it, a sync hook
still waiting for a thread (behind hooks that hang) is dropped, so memory stays bounded."""
_NAMES = ("on_verdict", "on_retry", "on_exhausted", "on_fail_open", "on_skip")


@dataclass(frozen=True)
class Hooks:
    """The callbacks of one verifier (each optional)."""

    on_verdict: Hook | None = None
    on_retry: Hook | None = None
    on_exhausted: Hook | None = None
    on_fail_open: Hook | None = None
    on_skip: Hook | None = None
    _threads: ThreadPool = field(
        default_factory=lambda: ThreadPool(_HOOK_THREADS, "replyguard-hook"),
        repr=False,
        compare=False,
    )
    _abandoned: set[asyncio.Future[Any]] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        for item in fields(self):
            hook = getattr(self, item.name)
            if item.name in _NAMES and hook is not None and not callable(hook):
                raise TypeError(f"{item.name} must be callable, not {type(hook).__name__}")

    def close(self) -> None:
        """Let the hook threads end once the hooks already started have run (a hung sync
        hook's thread cannot be stopped); a hook called later starts a new pool."""
        self._threads.close()

    def _start(self, hook: Hook, args: tuple[Any, ...]) -> asyncio.Future[Any]:
        if inspect.iscoroutinefunction(hook):
            return asyncio.ensure_future(hook(*args))
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self._threads.executor(), functools.partial(hook, *args))

    async def call(
        self, name: str, turn: Turn, *args: Any, time_limit: float, events: Events
    ) -> None:
        """Run one hook if it is set; never raises, never waits past ``time_limit``."""
        hook: Hook | None = getattr(self, name)
        if hook is None:
            return
        try:
            future = self._start(hook, (_private_copy(turn), *args))
        except Exception as exc:  # a hook that could not even start (an async one's own call)
            events.warning("hook_failed", hook=name, error=describe_error(exc, events.secrets))
            return
        done, _ = await asyncio.wait({future}, timeout=time_limit)
        if not done:
            # A sync hook is left to run: cancelling it would only drop it from the queue when
            # it still waits there for a thread (a burst of turns), a running one cannot stop.
            # Past ``ABANDONED_LIMIT`` (behind hooks that hang) it is dropped if still queued.
            if isinstance(future, asyncio.Task) or len(self._abandoned) >= ABANDONED_LIMIT:
                future.cancel()
            self._abandoned.add(future)  # kept referenced until it really ends
            future.add_done_callback(self._forget)
            events.warning("hook_timed_out", hook=name, timeout_seconds=time_limit)
            return
        try:
            result = future.result()
            if inspect.isawaitable(result):  # a sync hook that returned a coroutine
                await asyncio.wait_for(result, timeout=time_limit)
        except Exception as exc:
            events.warning("hook_failed", hook=name, error=describe_error(exc, events.secrets))

    def _forget(self, future: asyncio.Future[Any]) -> None:
        self._abandoned.discard(future)
        if not future.cancelled():
            future.exception()  # retrieve it, so asyncio does not log "never retrieved"


def _private_copy(turn: Turn) -> Turn:
    """A deep copy of ``turn`` for a hook. History or metadata that ``deepcopy`` cannot copy
    (nested deeper than the recursion limit, or holding a value that cannot be copied: a lock,
    a socket) is copied without it: its dicts and lists copied, anything else shared (it
    raised out of the turn, before the hook ran)."""
    try:
        return turn.model_copy(deep=True)
    except Exception:
        history = [copy_any_depth(message) for message in turn.history]
        update = {"history": history, "metadata": copy_any_depth(turn.metadata)}
        return turn.model_copy(update={**update, "rules": list(turn.rules)})
