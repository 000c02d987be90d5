"""Loading what a first judgement needs, in the background, once per process.

A ``Verifier`` built with ``preload=True`` (the default) starts one daemon thread that imports
the judge side of an assessment (``runner._judging``), compiles the judge prompt's templates
and builds the validators of the models every judged turn uses, then, when the verifier
judges through litellm, imports litellm with what its first call to each judge model's route
would load (``replyguard.judge._litellm``), and then loads the tokenizer (``o200k_base``):
the seconds that would fall on the first judged turn run off the caller's thread and event
loop while the host goes on starting up, so that turn waits only for what is not done yet
(``Verifier.warmup()`` and the first judgement wait for the rest off the loop too).
Each part starts at most once per process, whatever number of verifiers is built. A fault here
is swallowed: the first judgement meets it again, and fails open.

litellm comes first: every judgement through it needs it. The tokenizer is needed only by a
prompt too large to fit the budget by its size, and loading it takes about half a second of
CPU, most of it in tiktoken's Rust code holding the GIL: the thread starts it only while no
judgement (nor, in ``Verifier.run``, the verifying of an agent's reply) is in flight
(``judging``), so that it never slows a first turn that does not need it. A judgement that
needs it loads it itself, off the loop.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import threading
from collections.abc import Awaitable, Iterable
from typing import TypeVar

from replyguard._forks import loading
from replyguard._templates import template
from replyguard.context import _tokens as tokens
from replyguard.judge._litellm import first_use, load_litellm, load_routes

# What every judged turn builds on first use: the judge side of an assessment (the prompt
# build and the judge call, imported with the first reply its checks do not decide), the judge
# prompt's templates, compiled, and the validators of its models (built on first use, not at
# import).
_T = TypeVar("_T")
_TURN_MODULES = ("replyguard.runner._judging",)
_TURN_TEMPLATES = ("judge_system.j2", "judge_context.j2")
_TURN_MODELS = (
    "replyguard.types:Turn",
    "replyguard.types:Reply",
    "replyguard.types:RunMeta",
    "replyguard.types:Outcome",
    "replyguard.types:TokenUsage",
    "replyguard.types:Attempt",
    "replyguard.types:Verdict",
    "replyguard.types:CheckResult",
    "replyguard.judge._protocol:JudgeReply",
)

_lock = threading.Lock()
_exiting = threading.Event()
EXIT_WAIT = 30.0
"""How long the interpreter's exit waits for the part a preload thread is in the middle of."""
_started: set[str] = set()
_done: set[str] = set()
_threads: list[threading.Thread] = []


class _Judgements:
    """How many judgements are in flight in this process, and a wait for none to be."""

    def __init__(self) -> None:
        self._idle = threading.Condition()
        self._count = 0

    def __enter__(self) -> None:
        with self._idle:
            self._count += 1

    def __exit__(self, *exc: object) -> None:
        with self._idle:
            self._count = max(self._count - 1, 0)  # one entered in a parent, left in its child
            if not self._count:
                self._idle.notify_all()

    def forget(self) -> None:
        """In a forked child: none in flight (the parent's other threads are not here), and a
        lock no thread of the child holds."""
        self._idle, self._count = threading.Condition(), 0

    def wait_idle(self) -> None:
        with self._idle:
            self._idle.wait_for(lambda: not self._count or _exiting.is_set())

    def release_waiters(self) -> None:
        """Wake ``wait_idle`` (the interpreter is exiting)."""
        with self._idle:
            self._idle.notify_all()


_judgements = _Judgements()
_NOTHING = contextlib.nullcontext()


def judging() -> contextlib.AbstractContextManager[None]:
    """Mark replyguard's own work on a turn as in flight for its duration (a judgement; in
    ``Verifier.run``, everything after the agent's reply): the tokenizer's preload waits for
    none to be. Once the tokenizer is loaded nothing waits, and nothing is counted."""
    return _NOTHING if tokens.loaded() else _judgements


def judged(work: Awaitable[_T]) -> Awaitable[_T]:
    """What to await for ``work`` within ``judging()``: once the tokenizer is loaded, nothing
    to enter (``work`` itself, no coroutine around it)."""
    if tokens.loaded():
        return work
    return _counted(work)


async def _counted(work: Awaitable[_T]) -> _T:
    with _judgements:
        return await work


def _load(parts: tuple[str, ...]) -> None:
    for part in parts:
        if _exiting.is_set():  # the interpreter is exiting: start nothing more
            return
        if part == "tokenizer":
            _judgements.wait_idle()  # not a load: a fork meanwhile does not wait for it
            if _exiting.is_set():
                return
        with contextlib.suppress(Exception), loading():  # an error: met again by a judgement
            if part == "turn":
                prepare_turn()
            elif part == "litellm":
                load_litellm()
            elif part.startswith("route:"):
                load_routes((part.removeprefix("route:"),))
            else:
                tokens.encoding()
        with _lock:
            _done.add(part)


def _forget_threads() -> None:
    """In a forked child: the preload threads are the parent's, so the parts they had not
    done yet are not started here (a verifier built in the child starts them), and nothing
    is in flight. A fork never lands inside a part (``replyguard._forks``)."""
    global _lock
    _lock = threading.Lock()
    _judgements.forget()
    _started.intersection_update(_done)
    _threads.clear()


os.register_at_fork(after_in_child=_forget_threads)


def _at_exit() -> None:
    """At the interpreter's exit: start no further part, and let the part in progress finish
    (at most ``EXIT_WAIT`` seconds). The interpreter halts a daemon thread wherever it is when
    it finalizes: one halted in the middle of an import keeps that module's import lock for
    ever, and the first import made during the shutdown (litellm's HTTP handler's ``__del__``
    imports on collection) then waited for it for ever: a script that built a verifier and
    ended at once could hang at exit."""
    _exiting.set()
    _judgements.release_waiters()
    wait_for_preload(timeout=EXIT_WAIT)


atexit.register(_at_exit)


def prepare_turn() -> None:
    """Import the judge side of an assessment, compile the judge prompt's templates and build
    the validators of the models every judged turn uses (about 20 ms in all), as their first
    use would."""
    for module in _TURN_MODULES:
        with contextlib.suppress(Exception):  # met again by the first judgement
            importlib.import_module(module)
    for name in _TURN_TEMPLATES:
        with contextlib.suppress(Exception):  # met again by the first judgement
            template(name)
    for name in _TURN_MODELS:
        first_use(name)


def start_preload(*, litellm: bool, models: Iterable[str] = ()) -> bool:
    """Start importing litellm (when asked) with what the routes of the judge ``models``
    load on their first call, then loading the tokenizer, in a daemon thread; each part at
    most once per process. True when a thread was started."""
    routes = tuple(f"route:{model}" for model in dict.fromkeys(models)) if litellm else ()
    wanted = ("turn", "litellm", *routes, "tokenizer") if litellm else ("turn", "tokenizer")
    with _lock:
        parts = tuple(part for part in wanted if part not in _started)
        _started.update(parts)
        if not parts:
            return False
        thread = threading.Thread(
            target=_load, args=(parts,), name="replyguard-preload", daemon=True
        )
        _threads.append(thread)
    try:
        thread.start()
    except RuntimeError:  # no thread to be had (a process at its limit): left to first use
        with _lock:
            _started.difference_update(parts)
            _threads.remove(thread)
        return False
    return True


def wait_for_preload(timeout: float | None = None) -> bool:
    """Wait until every preload thread started so far has finished (or ``timeout`` seconds
    passed); True when none is still running. For code about to replace ``sys.modules``
    wholesale (a test framework's snapshot of it), which would otherwise drop modules that
    a preload thread is halfway through importing."""
    with _lock:
        threads = list(_threads)
    for thread in threads:
        if thread.is_alive() and thread is not threading.current_thread():
            thread.join(timeout)
    return not any(thread.is_alive() for thread in threads)
