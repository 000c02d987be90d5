"""The patterns' time limit (``patterns.TIME_LIMIT``) is counted from when a check's searches
start in their worker thread, not from when the check queued them.

The checks search operator patterns in asyncio's default executor (a handful of threads). In a
burst of turns, or beside other work there, a check's searches wait for a free thread; counted
from the moment they were queued, a wait of ``TIME_LIMIT`` used up the whole budget before a
pattern ran, and the check passed (failing open) without searching: a forbidden pattern let
through, a required one never asked for. Here the wait is made certain, not likely: the
default executor has one thread, held by the test until the patterns' clock (a fake) has
moved past ``TIME_LIMIT``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from replyguard.checks import patterns
from replyguard.checks.base import CheckResult
from replyguard.checks.json_check import JsonCheck
from replyguard.checks.rules import RuleCheck
from replyguard.config._checks import FieldRule
from replyguard.types import Reply, Turn

TURN = Turn(user_message="Summarise the report.")


class Clock:
    """The patterns' monotonic clock, moved by the test (``regex``'s own timeout still runs on
    the real clock, with whatever budget is left by this one)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@asynccontextmanager
async def one_busy_thread() -> AsyncIterator[threading.Event]:
    """The loop's default executor as one thread, busy until the event yielded is set."""
    loop = asyncio.get_running_loop()
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="held")
    loop.set_default_executor(pool)
    release = threading.Event()
    busy = loop.run_in_executor(None, release.wait)
    try:
        yield release
    finally:
        release.set()
        await busy
        pool.shutdown(wait=True)


async def after_a_queue_wait(
    check: Callable[[], Any], clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> CheckResult:
    """``check()``'s result when its searches waited for a thread longer than the whole
    budget (by the patterns' clock)."""
    monkeypatch.setattr(patterns, "time", clock)
    async with one_busy_thread() as release:
        task = asyncio.ensure_future(check())
        for _ in range(5):  # the check runs up to its hand-off to the (busy) thread
            await asyncio.sleep(0)
        assert not task.done()
        clock.now += 2 * patterns.TIME_LIMIT  # the wait for a free thread
        release.set()
        result: CheckResult = await task
    return result


@pytest.mark.parametrize(
    ("check", "text", "named"),
    [
        (RuleCheck(must_not_match=[r"\bpassword\b"]), "Your password is hunter2.", "password"),
        (RuleCheck(must_match=[r"^Summary:"]), "Here it is.", "^Summary:"),
    ],
    ids=["forbidden", "required"],
)
async def test_a_rules_pattern_is_searched_after_a_wait_for_a_thread(
    check: RuleCheck, text: str, named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    reply = Reply(text=text)
    result = await after_a_queue_wait(lambda: check.check(TURN, reply), Clock(), monkeypatch)
    assert (result.passed, result.error) == (False, None)
    assert named in (result.feedback or "")


async def test_a_json_fields_pattern_is_searched_after_a_wait_for_a_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    check = JsonCheck(fields={"name": FieldRule(pattern="^x")})
    reply = Reply(text=json.dumps({"name": "tea"}))
    result = await after_a_queue_wait(
        lambda: check.check(Turn(user_message="give me JSON"), reply), Clock(), monkeypatch
    )
    assert (result.passed, result.error) == (False, None)
    assert result.feedback == "Fix the JSON: Field name must match the pattern '^x'."


async def test_searches_that_outrun_the_budget_once_started_still_time_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The budget still binds the searches themselves: the clock moving past it between two
    patterns (the first slow) leaves the check failing open with the pattern named."""
    clock = Clock()
    monkeypatch.setattr(patterns, "time", clock)
    searched = patterns.search

    def slow_search(pattern: Any, text: str, until: float | None = None, **keys: Any) -> Any:
        found = searched(pattern, text, until, **keys)
        clock.now += 2 * patterns.TIME_LIMIT  # this search took the whole budget
        return found

    monkeypatch.setattr(patterns, "search", slow_search)
    check = RuleCheck(must_match=["Summary"], must_not_match=["password"])
    result = await check.check(TURN, Reply(text="Summary: your password is hunter2."))
    assert result.passed
    assert "password" in (result.error or "")
