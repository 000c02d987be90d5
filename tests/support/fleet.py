"""Instances of a fleet, each its own OS process forked by ``fleet_worker.py``, driven over a
pair of pipes each."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

WORKER = Path(__file__).with_name("fleet_worker.py")


class Instance:
    """One instance: send it commands, read its verdicts."""

    def __init__(self, commands: int, answers: int) -> None:
        self._commands = os.fdopen(commands, "w")
        self._answers = os.fdopen(answers)

    def ready(self) -> None:
        line = self._answers.readline().strip()
        if line != "ready":
            raise RuntimeError(f"the fleet instance did not start: {line!r}")

    def send(self, config: dict[str, Any], turns: int, concurrency: int = 1, **more: Any) -> None:
        """Start judging ``turns`` turns, ``concurrency`` at a time (``answer`` reads them)."""
        command = {"config": config, "turns": turns, "concurrency": concurrency, **more}
        self._commands.write(json.dumps(command) + "\n")
        self._commands.flush()

    def answer(self) -> list[dict[str, Any]]:
        """The verdicts of the last command: ``reason``, ``cost``, ``sharedState`` each."""
        line = self._answers.readline()
        if not line:
            raise RuntimeError("the fleet instance exited")
        verdicts: list[dict[str, Any]] = json.loads(line)["verdicts"]
        return verdicts

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._commands.close()
        self._answers.close()


@contextlib.contextmanager
def fleet_of(count: int) -> Iterator[list[Instance]]:
    """``count`` instances, each its own process; stopped (by closing their pipes) after."""
    ours, theirs = [], []
    for _ in range(count):
        command_read, command_write = os.pipe()
        answer_read, answer_write = os.pipe()
        ours.append((command_write, answer_read))
        theirs.append((command_read, answer_write))
    arguments = [f"{read},{write}" for read, write in theirs]
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), *arguments], pass_fds=[fd for p in theirs for fd in p]
    )
    for read, write in theirs:
        os.close(read)
        os.close(write)
    instances = [Instance(*pair) for pair in ours]
    try:
        for instance in instances:
            instance.ready()
        yield instances
    finally:
        for instance in instances:
            instance.close()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
