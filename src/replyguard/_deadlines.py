"""``asyncio.timeout_at`` for the judge call of every verified turn, as a plain ``with``.

``asyncio.timeout`` is an async context manager: entering and leaving it makes two coroutines,
and its state machine reads an enum (an attribute of a class with ``__getattr__`` on Python
3.11, which the interpreter cannot specialise) a few times a call. The judge call (the runner's
deadline around it, and each model's share inside it) enters one or two on every turn.
``Deadline`` does what ``asyncio.Timeout`` does for a deadline never moved, without either:

- at ``when`` (loop time; one already past fires on the next pass of the loop) the task is
  cancelled, and the ``CancelledError`` that reaches the end of the block becomes a
  ``TimeoutError`` raised from it, unless another cancellation of the task (its host's) is
  pending: that one propagates as it is;
- leaving the block first cancels the timer; the task's cancellation count is restored as
  ``asyncio.Timeout`` restores it (``Task.uncancel``).

Entered only from inside a task (``RuntimeError`` otherwise, as ``asyncio.timeout``).

Its timer calls the ``Deadline`` itself (no bound method made): every verified turn holds one
or two while its judge call is in flight, and fewer objects alive per turn means fewer full
collections in a burst (docs/performance.md, "Objects held per turn in flight"). The timer
still copies the caller's context, as ``call_at`` does: a context shared by every timer could
be entered by two threads' loops at once (an error), and looking up one per thread costs
about as many instructions as the copy.
"""

from __future__ import annotations

import asyncio
from types import TracebackType


class Deadline:
    """Cancel the current task at loop time ``when``; see the module."""

    __slots__ = ("_cancelling", "_expired", "_handle", "_task", "_when")

    def __init__(self, when: float) -> None:
        self._when = when
        self._expired = False

    def __enter__(self) -> Deadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("Timeout should be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        loop = task.get_loop()
        if self._when <= loop.time():
            self._handle: asyncio.Handle = loop.call_soon(self)
        else:
            self._handle = loop.call_at(self._when, self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._handle.cancel()
        if (
            self._expired
            and self._task.uncancel() <= self._cancelling
            and exc_type is asyncio.CancelledError
        ):
            raise TimeoutError from exc  # no other cancellation is pending: the deadline's

    def __call__(self) -> None:
        """The timer's callback: the deadline has come."""
        self._task.cancel()
        self._expired = True


def deadline_in(seconds: float) -> Deadline:
    """A ``Deadline`` ``seconds`` from now (``asyncio.timeout(seconds)``)."""
    return Deadline(asyncio.get_running_loop().time() + seconds)
