"""The ``Check`` protocol, its result, and the wrapper that lets plain functions be checks.

A check is cheap and deterministic: it looks at the turn and one reply and says pass or fail
with a category and feedback, like the judge, but without a model. A check may also:

- pass *decisively* (``decisive=True``): the reply needs no judge at all (HEARTBEAT_OK with no
  open tasks);
- return a parsed ``value`` (the JSON it read), handed to the caller on the ``Outcome``;
- return ``deliver_text``: the text to deliver instead of the reply (repaired JSON).

Checks never raise on bad replies; a check that crashes is reported by the runner as that
check's error (see ``replyguard.checks.run_checks``).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from replyguard.types import CheckResult, FailCategory, Reply, Turn

__all__ = ["Check", "CheckResult", "FunctionCheck", "as_check", "failed", "passed"]


@runtime_checkable
class Check(Protocol):
    """A deterministic validator of one reply."""

    name: str
    """Shown in feedback and logs; unique within a verifier."""
    required: bool
    """When True, a crash of this check counts as a FAIL rather than being ignored."""

    async def check(self, turn: Turn, reply: Reply) -> CheckResult:
        """Judge ``reply`` for ``turn`` without a model."""
        ...


def passed(name: str, **extra: Any) -> CheckResult:
    """A passing result."""
    return CheckResult(name=name, passed=True, **extra)


def failed(name: str, category: FailCategory, feedback: str, **extra: Any) -> CheckResult:
    """A failing result."""
    return CheckResult(name=name, passed=False, category=category, feedback=feedback, **extra)


class FunctionCheck:
    """A plain function (sync or async) used as a check.

    The function takes ``(turn, reply)`` and returns a ``CheckResult``, a ``bool``, or a
    ``(passed, message)`` pair (or an awaitable of one); a failure without its own category
    gets ``category``. An ``async def`` function runs on the event loop; any other function
    runs in a worker thread (``asyncio.to_thread``), so a slow one neither holds up the other
    checks nor escapes the time limit. A thread cannot be stopped, though: one that runs over
    is abandoned to finish on its own, and is reported as not finishing in time.
    """

    def __init__(
        self,
        function: Callable[[Turn, Reply], Any],
        *,
        name: str | None = None,
        required: bool = False,
        category: FailCategory = FailCategory.RULE_VIOLATION,
    ) -> None:
        self.function = function
        self.name = name or getattr(function, "__name__", None) or type(function).__name__
        self.required = required
        self.category = category

    async def check(self, turn: Turn, reply: Reply) -> CheckResult:
        if _is_async(self.function):
            result = self.function(turn, reply)
        else:
            result = await asyncio.to_thread(self.function, turn, reply)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, CheckResult):
            return result
        if isinstance(result, bool):
            ok, message = result, None
        elif isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], bool):
            ok, message = result[0], (str(result[1]) if result[1] is not None else None)
        else:
            raise TypeError(
                f"check {self.name!r} returned {type(result).__name__}; "
                "expected a CheckResult, a bool or a (bool, message) pair"
            )
        if ok:
            return passed(self.name)
        return failed(self.name, self.category, message or f"the check {self.name!r} failed")


def _is_async(function: object) -> bool:
    """Whether ``function``, or the ``__call__`` of a callable object, is an ``async def``."""
    method = inspect.getattr_static(type(function), "__call__", None)
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(method)


def as_check(candidate: Check | Callable[[Turn, Reply], Any]) -> Check:
    """A ``Check`` as it is, or a function wrapped in ``FunctionCheck``."""
    if isinstance(candidate, Check):
        return candidate
    if callable(candidate):
        return FunctionCheck(candidate)
    raise TypeError(f"not a check: {type(candidate).__name__}")
