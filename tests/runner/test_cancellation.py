"""A caller that cancels ``run()`` cancels the verifier's work with it, and nothing is left.

Cancellation is the caller's to see: ``run()`` raises ``CancelledError`` (it does not fail open).
What the turn had started must stop with it: the judge's HTTP request (the provider sees its
connection close) and a command check's process (killed, not orphaned). No task may be left
pending or destroyed while pending, and no client left unclosed (warnings are errors).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from replyguard import Turn, Verifier, VerifierConfig
from replyguard.testing import ScriptedAgent
from support.fault_matrix import (
    FIRST_REPLY,
    USER_MESSAGE,
    WIRES,
    config,
    tasks_left_behind,
)
from support.ports import free_port
from support.provider_server import ProviderServer, Step, Wire

WIRE_PARAMS = [pytest.param(wire, id=wire.name) for wire in WIRES]
HANGS = [
    pytest.param(Step(delay=60), id="hang-before-headers"),
    pytest.param(Step(stall_mid_body=True), id="hang-mid-body"),
]
# The first judge call of the process imports litellm (seconds): wait that long for a request.
FIRST_REQUEST_WITHIN = 20.0


@dataclass
class Cancelled:
    """What a cancelled ``run()`` left: its exception, connections, tasks."""

    raised: BaseException | None
    connections_before_aclose: int
    tasks_left: list[str]


def _loop_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What asyncio reported: "Task was destroyed but it is pending!", "Unclosed client session"."""
    return [r.getMessage() for r in caplog.records if r.name == "asyncio"]


async def _cancel(task: asyncio.Task[Any]) -> BaseException | None:
    task.cancel()
    try:
        await task
    except BaseException as exc:  # the exception itself is what the tests look at
        return exc
    return None


@pytest.fixture
async def cancelled_judgement(
    provider: ProviderServer, wire: Wire, hang: Step, caplog: pytest.LogCaptureFixture
) -> Cancelled:
    """A turn cancelled by its caller while the judge's provider hangs."""
    caplog.set_level(logging.ERROR, logger="asyncio")
    provider.push(hang)
    verifier = Verifier(config(wire, provider.url, timeoutSeconds=30))
    run = verifier.run(ScriptedAgent([FIRST_REPLY]), Turn(user_message=USER_MESSAGE))
    task = asyncio.create_task(run)
    try:
        assert await provider.wait_for_requests(1, within=FIRST_REQUEST_WITHIN) == 1
        if hang.stall_mid_body:
            await asyncio.sleep(0.05)  # let the headers and half the body reach the client
        raised = await _cancel(task)
        connections = await provider.wait_for_open_connections(0)
    finally:
        task.cancel()  # when the request never came
        await verifier.aclose()
    return Cancelled(raised, connections, tasks_left_behind())


judged = pytest.mark.parametrize("wire", WIRE_PARAMS)
hanging = pytest.mark.parametrize("hang", HANGS)


@judged
@hanging
async def test_cancelled_run_raises_cancelled_error_to_the_caller(
    cancelled_judgement: Cancelled,
) -> None:
    assert isinstance(cancelled_judgement.raised, asyncio.CancelledError)


@judged
@hanging
async def test_cancelled_run_closes_the_judge_connection(cancelled_judgement: Cancelled) -> None:
    """The provider sees the request's connection close before the verifier is closed."""
    assert cancelled_judgement.connections_before_aclose == 0


@judged
@hanging
async def test_cancelled_run_leaves_no_task_behind(cancelled_judgement: Cancelled) -> None:
    assert cancelled_judgement.tasks_left == []


@judged
@hanging
async def test_cancelled_run_leaves_no_destroyed_task_or_unclosed_client(
    cancelled_judgement: Cancelled, caplog: pytest.LogCaptureFixture
) -> None:
    gc.collect()  # a pending task nothing refers to any more is destroyed (and reported) now
    assert _loop_errors(caplog) == []


# --- a command check ------------------------------------------------------------------------


@dataclass
class CancelledCommand:
    raised: BaseException | None
    pid: int


def _pid_in(path: Path) -> int | None:
    """The pid the command wrote to ``path``, if it has yet."""
    text = path.read_text() if path.exists() else ""
    return int(text) if text.isdigit() else None


def _gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


async def _until(condition: Callable[[], bool], *, within: float) -> bool:
    for _ in range(int(within / 0.01)):
        if condition():
            return True
        await asyncio.sleep(0.01)
    return condition()


@pytest.fixture
async def cancelled_command(
    tmp_path: Path, make_config: Callable[..., VerifierConfig]
) -> AsyncIterator[CancelledCommand]:
    """A turn cancelled by its caller while a command check's process runs."""
    pidfile = tmp_path / "command.pid"
    code = f"import time,os;open({str(pidfile)!r},'w').write(str(os.getpid()));time.sleep(60)"
    verifier = Verifier(
        make_config(
            verifyAll=True,
            apiBase=f"http://127.0.0.1:{free_port()}",
            checks=[{"type": "command", "command": [sys.executable, "-c", code]}],
        )
    )
    task = asyncio.create_task(
        verifier.run(ScriptedAgent([FIRST_REPLY]), Turn(user_message=USER_MESSAGE))
    )
    try:
        assert await _until(lambda: _pid_in(pidfile) is not None, within=10)
        pid = _pid_in(pidfile)
        assert pid is not None
        yield CancelledCommand(await _cancel(task), pid)
    finally:
        task.cancel()  # when the command never started
        await verifier.aclose()
        pid = _pid_in(pidfile)
        if pid is not None and not _gone(pid):  # leave no process of a failed test running
            os.kill(pid, signal.SIGKILL)


async def test_run_cancelled_during_a_command_check_raises_cancelled_error(
    cancelled_command: CancelledCommand,
) -> None:
    assert isinstance(cancelled_command.raised, asyncio.CancelledError)


async def test_run_cancelled_during_a_command_check_kills_the_command(
    cancelled_command: CancelledCommand,
) -> None:
    assert await _until(lambda: _gone(cancelled_command.pid), within=5)
