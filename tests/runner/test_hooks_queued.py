"""A sync hook that waited for one of the verifier's hook threads still runs.

Sync hooks share a few threads per verifier. In a burst of turns a hook may wait there for a
free thread longer than ``hookTimeoutSeconds``: the turn stops waiting for it then, as for a
hook still running, but the hook is not dropped from the queue unrun (it was: a burst lost the
``on_verdict`` calls of its later turns). Here the wait is certain: every hook thread is held
by the test until the turns have stopped waiting.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from replyguard import Status, Turn, Verifier
from replyguard.runner import _hooks
from replyguard.runner._hooks import _HOOK_THREADS
from replyguard.testing import ScriptedAgent, ScriptedJudge

TURNS = _HOOK_THREADS + 3
"""More turns than hook threads: the last three hooks wait for a thread."""


async def test_hooks_that_waited_for_a_thread_past_their_time_limit_still_run(
    make_config: Any, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()
    ran: list[str] = []
    all_ran = threading.Event()

    def on_verdict(turn: Turn, attempt: Any) -> None:
        release.wait()
        ran.append(turn.id or "")
        if len(ran) == TURNS:
            all_ran.set()

    config = make_config(verifyAll=True, checks=[], hookTimeoutSeconds=0.05)
    verifier = Verifier(config, judge=ScriptedJudge(["PASS"] * TURNS), on_verdict=on_verdict)
    try:
        outcomes = await asyncio.gather(
            *(
                verifier.run(ScriptedAgent(["Hi"]), Turn(user_message="Hello", id=f"t{i}"))
                for i in range(TURNS)
            )
        )
        assert {o.status for o in outcomes} == {Status.PASSED}
        assert ran == []  # every turn stopped waiting while the threads were held
        timed_out = [r for r in replyguard_logs.records if "hook_timed_out" in r.getMessage()]
        assert len(timed_out) == TURNS
        release.set()
        assert await asyncio.to_thread(all_ran.wait, 60), f"only {sorted(ran)} ran"
    finally:
        release.set()
        verifier.close()
    assert sorted(ran) == sorted(f"t{i}" for i in range(TURNS))
    assert not [r for r in replyguard_logs.records if r.levelno >= logging.ERROR]


async def test_behind_hooks_that_hang_the_hooks_kept_waiting_are_bounded(
    make_config: Any, monkeypatch: pytest.MonkeyPatch, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_hooks, "ABANDONED_LIMIT", _HOOK_THREADS + 1)
    release = threading.Event()
    last_ran = threading.Event()
    ran: list[str] = []

    def on_verdict(turn: Turn, attempt: Any) -> None:
        release.wait()
        ran.append(turn.id or "")
        if turn.id == "last":
            last_ran.set()

    config = make_config(verifyAll=True, checks=[], hookTimeoutSeconds=0.05)
    judge = ScriptedJudge(["PASS"] * (TURNS + 1))
    verifier = Verifier(config, judge=judge, on_verdict=on_verdict)
    try:
        for i in range(TURNS):  # one after another: their hooks time out in this order
            await verifier.run(ScriptedAgent(["Hi"]), Turn(user_message="Hello", id=f"t{i}"))
        assert ran == []
        await asyncio.sleep(0)  # the loop passes each drop on to the threads' queue
        release.set()
        # The hook threads take their queue in order: once the last turn's hook has run, each
        # one before it was taken (run, or skipped when dropped); wait for those kept to end.
        await verifier.run(ScriptedAgent(["Hi"]), Turn(user_message="Hello", id="last"))
        assert await asyncio.to_thread(last_ran.wait, 60)
        kept = {f"t{i}" for i in range(_HOOK_THREADS + 1)}
        for _ in range(6000):
            if kept <= set(ran):
                break
            await asyncio.sleep(0.01)
    finally:
        release.set()
        verifier.close()
    # The four the threads held and one waiting were kept; the two past the limit dropped.
    assert sorted(ran) == sorted([*(f"t{i}" for i in range(_HOOK_THREADS + 1)), "last"])
    timed_out = [r for r in replyguard_logs.records if "hook_timed_out" in r.getMessage()]
    assert len(timed_out) >= TURNS
