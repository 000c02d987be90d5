"""Hooks: the caller's callbacks on a turn's decisions, which can never change the outcome.

``on_verdict(turn, attempt)``, ``on_retry(turn, attempt, feedback)``,
``on_exhausted(turn, outcome)``, ``on_fail_open(turn, outcome)`` and ``on_skip(turn, outcome)``
(skipped and not-triggered turns). Each may be sync (run in a worker thread) or async. A hook
that raises is logged (``hook_failed``); one that runs past ``hookTimeoutSeconds`` is
abandoned and logged (``hook_timed_out``). Either way the turn goes on as if it had returned.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from replyguard.telemetry import Events, describe_error

Hook = Callable[..., Any]


@dataclass(frozen=True)
class Hooks:
    """The callbacks of one verifier (each optional)."""

    on_verdict: Hook | None = None
    on_retry: Hook | None = None
    on_exhausted: Hook | None = None
    on_fail_open: Hook | None = None
    on_skip: Hook | None = None

    def __post_init__(self) -> None:
        for field in fields(self):
            hook = getattr(self, field.name)
            if hook is not None and not callable(hook):
                raise TypeError(f"{field.name} must be callable, not {type(hook).__name__}")

    async def call(self, name: str, *args: Any, time_limit: float, events: Events) -> None:
        """Run one hook if it is set; never raises (but for cancellation of the turn)."""
        hook: Hook | None = getattr(self, name)
        if hook is None:
            return
        try:
            async with asyncio.timeout(time_limit):
                if inspect.iscoroutinefunction(hook):
                    await hook(*args)
                else:
                    result = await asyncio.to_thread(hook, *args)
                    if inspect.isawaitable(result):
                        await result
        except TimeoutError:
            events.warning("hook_timed_out", hook=name, timeout_seconds=time_limit)
        except Exception as exc:
            events.warning("hook_failed", hook=name, error=describe_error(exc, events.secrets))
