"""replyguard in a process that forks: loads kept out of forks, threads' state forgotten.

A process that forks while another of its threads is halfway through an import gives the
child a half-imported module, locked by a thread the child does not have: the child's own
``import litellm`` then waits for ever. A host that forks soon after building a ``Verifier``
(a pre-forking server loading its app first, a task queue's prefork pool, ``multiprocessing``
with its default start method on Linux) meets exactly that, since a verifier's preload imports
litellm in a background thread for a few seconds: before this module, such a child hung at
``import litellm`` every time (forked 0.1, 0.5 and 1 s after the verifier was built).

So every load replyguard starts, on any thread, runs inside ``loading()``; a fork
(``os.fork`` and whatever calls it) first waits for the loads in flight to end, at most
``FORK_WAIT_SECONDS`` (past that it goes ahead), and a load that would start meanwhile waits
for the fork. A child starts with no load in flight. ``subprocess`` does not run these hooks
and never waits.

A child has none of its parent's other threads: an object that runs work on threads of its
own (a thread pool, ``run_sync``'s loop) is handed to ``forgotten_in_children``, and its
``forget()`` runs in each forked child, so that it starts them afresh there instead of handing
work to threads that do not exist.
"""

from __future__ import annotations

import concurrent.futures.thread  # noqa: F401 - its fork hooks first (below)
import contextlib
import logging  # noqa: F401 - its fork hooks first (below)
import os
import threading
import weakref
from collections.abc import Iterator
from typing import Protocol

FORK_WAIT_SECONDS = 30.0
"""How long a fork waits for replyguard's loads in flight before it goes ahead anyway."""

_state = threading.Condition()
_in_flight = 0  # loads running now, on every thread
_forking = False  # between a fork's wait and its end: new loads wait
_depth = threading.local()  # this thread's own nesting of loads


def _own_depth() -> int:
    return getattr(_depth, "value", 0)


@contextlib.contextmanager
def loading() -> Iterator[None]:
    """Mark a load (an import, a validator or the tokenizer built) as in flight: a fork
    waits for it to end. A load inside another of the same thread never waits for a fork (it
    would wait for itself), nor does a fork that a load makes wait for that thread's own."""
    global _in_flight
    depth = _own_depth()
    with _state:
        if not depth:
            _state.wait_for(lambda: not _forking)
        _in_flight += 1
    _depth.value = depth + 1
    try:
        yield
    finally:
        _depth.value = depth
        with _state:
            _in_flight -= 1
            _state.notify_all()


def in_flight() -> int:
    """How many loads are running now, on every thread."""
    with _state:
        return _in_flight


def _before_fork() -> None:
    global _forking
    own = _own_depth()  # a load that itself forks: its own loads are not waited for
    with _state:
        _forking = True
        _state.wait_for(lambda: _in_flight <= own, timeout=FORK_WAIT_SECONDS)


def _after_fork_in_parent() -> None:
    global _forking
    with _state:
        _forking = False
        _state.notify_all()


class _Forgetful(Protocol):
    def forget(self) -> None: ...


_FORGETFUL: weakref.WeakSet[_Forgetful] = weakref.WeakSet()


def forgotten_in_children(owner: _Forgetful) -> None:
    """Call ``owner.forget()`` in every child this process forks from now on (as long as
    ``owner`` lives)."""
    _FORGETFUL.add(owner)


def _after_fork_in_child() -> None:
    global _state, _in_flight, _forking
    # The child's one thread is the one that forked: only its own loads go on here.
    _state, _in_flight, _forking = threading.Condition(), _own_depth(), False
    for owner in list(_FORGETFUL):
        owner.forget()


# Registered after logging's and the thread pools' hooks, so it runs before them: they take a
# lock that a load may need (a logger made, a task submitted), and must not hold it while the
# fork waits for that load. (Hooks registered while the fork waits do not run their ``before``
# part, only their ``after`` ones: a module imported then would release a lock never taken.)
os.register_at_fork(
    before=_before_fork,
    after_in_parent=_after_fork_in_parent,
    after_in_child=_after_fork_in_child,
)
