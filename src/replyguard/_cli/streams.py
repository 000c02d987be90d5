"""The command's standard streams when a host closed them or stopped reading them.

A command run with a standard stream closed (``<&-``, ``>&-``, a service manager's defaults)
has ``None`` for it in ``sys``: ``print(..., file=sys.stderr)`` would then write to stdout,
into the verdict JSON. A reader that stops early (``| head``) makes the next write raise
``BrokenPipeError``, and Python's own flush at exit raise it again.
"""

from __future__ import annotations

import contextlib
import os
import sys

PIPE_CLOSED = 141
"""The exit status of a command whose output's reader stopped reading (a shell reports one
killed by SIGPIPE so)."""


def open_closed_streams() -> None:
    """Give a closed stdout or stderr a sink: what would go there is dropped."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115


def discard_stdout() -> None:
    """After ``BrokenPipeError`` on stdout: send the rest of it, and Python's flush at exit,
    nowhere."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
