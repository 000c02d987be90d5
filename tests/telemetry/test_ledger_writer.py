"""The ledger's writer thread: a burst waits in one queue and goes out in few writes; a line
whose turn stopped waiting is still written; the queue is bounded behind a write that hangs.

A write that hangs is played by ``HeldWriter`` in place of ``append_locked`` (the disk): it
holds the writer thread until the test lets it go, then writes for real.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replyguard.telemetry import Events, _ledger
from replyguard.telemetry._ledger import Ledger, append_locked, ledger_line


class HeldWriter:
    """``append_locked`` that holds each write until ``release`` is set, then writes it."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.batches: list[int] = []

    def __call__(self, path: str, data: bytes, until: float) -> None:
        self.batches.append(data.count(b"\n"))
        self.entered.set()
        if not self.release.wait(60):
            raise OSError("the test never let the write go")
        append_locked(path, data, until)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldWriter]:
    writer = HeldWriter()
    monkeypatch.setattr(_ledger, "append_locked", writer)
    yield writer
    writer.release.set()  # a failed test never leaves the writer thread waiting


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def writers_done(seconds: float = 60) -> None:
    """Wait until no ledger writer thread is left (bounded: a stuck one fails the test)."""
    until = time.monotonic() + seconds
    while any(t.name == "replyguard-ledger" for t in threading.enumerate()):
        assert time.monotonic() < until, "the ledger's writer thread never ended"
        time.sleep(0.01)


def failures(logs: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in logs.records if "ledger_write_failed" in r.getMessage()]


async def test_a_burst_behind_a_write_goes_out_in_one_more_write(
    tmp_path: Path, held: HeldWriter, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(str(path), Events())
    first = asyncio.create_task(ledger.append({"i": 0}, time_limit=60))
    assert await asyncio.to_thread(held.entered.wait, 60)
    burst = [asyncio.create_task(ledger.append({"i": i}, time_limit=60)) for i in range(1, 200)]
    await asyncio.sleep(0)  # each task of the burst has queued its line and waits
    held.release.set()
    await asyncio.gather(first, *burst)
    assert held.batches == [1, 199]
    assert sorted(r["i"] for r in records(path)) == list(range(200))
    assert failures(replyguard_logs) == []


async def test_a_line_whose_turn_stopped_waiting_is_still_written(
    tmp_path: Path, held: HeldWriter, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(str(path), Events())
    await ledger.append({"i": "gave up"}, time_limit=0)
    assert await asyncio.to_thread(held.entered.wait, 60)
    cancelled = asyncio.create_task(ledger.append({"i": "cancelled"}, time_limit=60))
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert records(path) == []
    held.release.set()
    await asyncio.to_thread(writers_done)
    assert [r["i"] for r in records(path)] == ["gave up", "cancelled"]
    assert held.batches == [1, 1]
    (message,) = failures(replyguard_logs)
    assert "did not finish within 0 s" in message


async def test_behind_a_write_that_hangs_the_queue_is_bounded_and_a_line_past_it_refused(
    tmp_path: Path,
    held: HeldWriter,
    monkeypatch: pytest.MonkeyPatch,
    replyguard_logs: pytest.LogCaptureFixture,
) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(str(path), Events())
    size = len(ledger_line({"i": 0}))
    monkeypatch.setattr(_ledger, "QUEUE_LIMIT", 2 * size)
    await ledger.append({"i": 0}, time_limit=0)  # the writer takes it and hangs
    assert await asyncio.to_thread(held.entered.wait, 60)
    await ledger.append({"i": 1}, time_limit=0)
    await ledger.append({"i": 2}, time_limit=0)  # two lines wait: the queue is full
    await ledger.append({"i": 3}, time_limit=60)  # refused without waiting for the writer
    assert not held.release.is_set()
    refused = failures(replyguard_logs)[-1]
    assert f"{2 * size} bytes already wait for a write that has not finished" in refused
    held.release.set()
    await asyncio.to_thread(writers_done)
    assert [r["i"] for r in records(path)] == [0, 1, 2]
    assert held.batches == [1, 2]


def test_a_line_whose_loop_has_closed_is_written_and_the_writer_stays_quiet(
    tmp_path: Path, held: HeldWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(str(path), Events())
    asyncio.run(ledger.append({"i": "late"}, time_limit=0))  # its loop closes before the write
    assert held.entered.wait(60)
    held.release.set()
    writers_done()
    assert [r["i"] for r in records(path)] == ["late"]
    assert raised == []


async def test_a_failed_write_is_logged_by_every_turn_whose_line_it_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    def full(path: str, data: bytes, until: float) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_ledger, "append_locked", full)
    ledger = Ledger(str(tmp_path / "ledger.jsonl"), Events())
    await asyncio.gather(*(ledger.append({"i": i}, time_limit=60) for i in range(5)))
    found = failures(replyguard_logs)
    assert len(found) == 5
    assert all("No space left on device" in message for message in found)


def test_a_child_forked_while_the_writer_writes_gets_a_writer_of_its_own(
    tmp_path: Path, held: HeldWriter
) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(str(path), Events())
    asyncio.run(ledger.append({"i": "parent"}, time_limit=0))  # the writer takes it and waits
    assert held.entered.wait(60)
    child = os.fork()
    if child == 0:  # the child: its parent's writer thread is not here
        code = 1
        try:
            held.release.set()
            asyncio.run(ledger.append({"i": "child"}, time_limit=60))
            code = 0 if any(r["i"] == "child" for r in records(path)) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    held.release.set()
    writers_done()
    assert os.waitstatus_to_exitcode(status) == 0
    assert sorted(r["i"] for r in records(path)) == ["child", "parent"]
