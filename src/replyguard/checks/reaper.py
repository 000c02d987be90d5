"""The helper process a command check runs its command under, on Linux: a child subreaper.

Run as ``python -I -S -c <this file's source> CONTROL_FD PROGRAM [ARG...]`` (``CommandCheck``
does that; importing this module does nothing). It marks itself a child subreaper
(``prctl(PR_SET_CHILD_SUBREAPER)``, on itself only, never on the host), so every descendant of
the command that is orphaned, a detached one (``setsid``, double fork) included, becomes its
child instead of init's. It starts the command with its own stdin, stdout and stderr, then lets
go of them (only the command's tree holds the pipes), and reports on the control socket:
``b"ok"``, or ``b"errno:<n>"`` when the command could not start.

It then waits for either the command to exit or the control socket to reach its end (the check
timed out, was cancelled, or the host died), kills every descendant it has (``SIGKILL``,
repeated until none is left, orphans reparented to it included), and exits as the command did:
its exit code, or the signal that ended it.

Only the standard library is used, and nothing of replyguard: it runs with ``-I -S``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import select
import signal
import socket
import sys
import time

_PR_SET_CHILD_SUBREAPER = 36
_KILL_ROUNDS_SECONDS = 5.0
"""How long to keep killing (a process in uninterruptible sleep dies when it wakes)."""


def _become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _descendants(root: int) -> list[int]:
    """Every process below ``root``, from ``/proc``'s parent links."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    queue = [root]
    while queue:
        for pid in children.get(queue.pop(), ()):
            found.append(pid)
            queue.append(pid)
    return found


class _Command:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.status: int | None = None

    def reap(self, block: bool = False) -> int:
        """Reap whatever children have ended; how many. ``block``: wait for the command."""
        reaped = 0
        while True:
            try:
                pid, status = os.waitpid(self.pid if block else -1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return reaped
            if pid == 0:
                return reaped
            reaped += 1
            if pid == self.pid:
                self.status = status
                if block:
                    return reaped

    def kill_everything(self) -> None:
        """SIGKILL every descendant until none is left (or time runs out)."""
        me = os.getpid()
        deadline = time.monotonic() + _KILL_ROUNDS_SECONDS
        while time.monotonic() < deadline:
            pids = _descendants(me)
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            reaped = self.reap()
            if not pids:
                try:
                    if os.waitpid(-1, os.WNOHANG) == (0, 0):
                        time.sleep(0.001)  # a child not yet visible in /proc
                        continue
                except ChildProcessError:
                    return  # no child and no descendant left
            elif not reaped:
                time.sleep(0.001)

    def wait(self, control: socket.socket) -> None:
        """Until the command exits or the control socket ends."""
        try:
            watched = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            watched = None
        try:
            fds = [control.fileno(), *([watched] if watched is not None else [])]
            while self.status is None:
                ready, _, _ = select.select(fds, [], [], None if watched is not None else 0.01)
                if control.fileno() in ready:
                    return
                self.reap()
        finally:
            if watched is not None:
                os.close(watched)


def _exit_as(status: int | None) -> None:
    if status is not None and os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        os._exit(128 + number)
    os._exit(os.WEXITSTATUS(status) if status is not None else 1)


def main(argv: list[str]) -> None:
    control = socket.socket(fileno=int(argv[0]))
    control.set_inheritable(False)  # the command must not hold it
    _become_subreaper()
    try:
        pid = os.posix_spawnp(argv[1], argv[1:], os.environ)
    except OSError as exc:
        control.sendall(f"errno:{exc.errno or errno.EIO}".encode())
        os._exit(127)
    command = _Command(pid)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    control.sendall(b"ok")
    command.wait(control)
    command.kill_everything()
    if command.status is None:
        command.reap(block=True)
    _exit_as(command.status)


if __name__ == "__main__":
    main(sys.argv[1:])
