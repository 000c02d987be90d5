"""A judge call cut off from outside: awaited through ``shielded``, cancelled once, given a
moment to close its connection, then let go (``let_go``); and the loop pass a cut-off call
needs to close its socket (``closing_pass``)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import Any, TypeVar

_T = TypeVar("_T")

# How long a judge call cancelled from outside is given to close its connection (a few
# milliseconds) before the turn goes on without waiting for it (``let_go``).
_SETTLE_SECONDS = 0.1
# Judge calls given up on while still closing, held until they end (or their loop is closed).
_UNSETTLED: set[asyncio.Task[Any]] = set()


def shielded(call: asyncio.Task[_T]) -> asyncio.Future[_T]:
    """``asyncio.shield(call)`` for a task just started: a future that ends as ``call`` does,
    which cancelling does not cancel ``call`` (``let_go`` does, at most once).

    ``shield``'s own future with one done callback (made once, not two closures): on
    ``call``'s end, one callback passes its outcome on, where ``shield`` scheduled a second
    to unhook the first. A callback left on ``call`` after the future was cancelled reads its
    exception, as ``shield`` does (``let_go``'s ``_forget`` reads it too)."""
    outer: asyncio.Future[_T] = call.get_loop().create_future()
    call.add_done_callback(functools.partial(_pass_on, outer))
    return outer


def _pass_on(outer: asyncio.Future[_T], call: asyncio.Task[_T]) -> None:
    """``call`` ended: its outcome handed to ``outer`` (``shield``'s inner callback)."""
    if outer.cancelled():
        if not call.cancelled():
            call.exception()  # retrieved: no "never retrieved" log of a call given up on
        return
    if call.cancelled():
        outer.cancel()
        return
    exc = call.exception()
    if exc is not None:
        outer.set_exception(exc)
    else:
        outer.set_result(call.result())


async def let_go(call: asyncio.Task[Any]) -> None:
    """After the caller of ``call`` (a judge call in a task of its own, awaited through
    ``shielded``) was cancelled: cancel ``call`` at most once, and wait for it a moment.

    A cancelled HTTP request closes its connection in a few steps (httpcore's clean-up awaits
    a lock and the stream's close); a second cancellation arriving meanwhile ends the clean-up
    before the socket is closed, and the connection stays open at the provider until its
    client is closed. Two are common: the turn's deadline and the judgement's fall a few
    milliseconds after this model's own share, and a busy loop runs them while the first
    clean-up is still under way. So the call runs in its own task, shielded: the caller's
    cancellation cancels it once (not at all when its own share already did), and waits up
    to ``_SETTLE_SECONDS`` for it to finish (cancellations meanwhile are held back; the
    caller raises its own once this returns). A call still closing after that ends by itself.
    """
    if not call.done() and not call.cancelling():
        call.cancel()
    await _settled(call)


async def _settled(call: asyncio.Task[Any]) -> None:
    """Wait up to ``_SETTLE_SECONDS`` for ``call`` to end, holding back cancellations."""
    for given_up in list(_UNSETTLED):  # a snapshot: run_sync's loop may add from its thread
        if given_up.get_loop().is_closed():  # a host closed it with the call unfinished:
            _UNSETTLED.discard(given_up)  # nothing will run it again, nor let it go
    _UNSETTLED.add(call)
    call.add_done_callback(_forget)
    loop = asyncio.get_running_loop()
    until = loop.time() + _SETTLE_SECONDS
    while not call.done() and (left := until - loop.time()) > 0:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait((call,), timeout=left)


def _forget(call: asyncio.Task[Any]) -> None:
    """A settled call's end, read (it was given up on: nobody else reads it)."""
    _UNSETTLED.discard(call)
    if not call.cancelled():
        call.exception()


async def closing_pass() -> None:
    """One pass of the event loop after a call was cut off mid-request.

    Cutting the call off closes its connection's transport, but the socket itself is closed
    by a callback the loop runs on its next pass; without this pass the turn could end (and a
    host could stop its loop, or block it) with the hung request's connection still open at
    the provider.
    """
    await asyncio.sleep(0)
