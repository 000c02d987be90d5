"""A check that runs a command (a linter, the tests, a build) on the reply.

The reply reaches the command on stdin, or as a temporary file named by ``{reply_file}`` in the
arguments; exit status 0 passes, anything else fails with the end of the output as feedback.
The reply is encoded as UTF-8 with ``surrogatepass``: a lone surrogate (half of an emoji cut in
two) reaches the command as the invalid bytes it is, rather than crashing the check or being
quietly replaced, so a command that validates text can refuse it.

- No shell unless ``shell=True``, and then ``command`` is one string (``/bin/sh -c``).
- When the check ends, however it ends (exit, timeout, or cancellation, which is then
  re-raised), every process the command started is killed (``SIGKILL``), even background
  children of a command that succeeded. On Linux the command runs under a small helper process
  (``replyguard.checks.reaper``) that is a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``,
  set on the helper, never on the host): every descendant, a detached one (``setsid``, a double
  fork) included, is killed, and the helper kills them too if the host dies. Elsewhere (or when
  the helper cannot start) the command leads its own session and its process group is killed:
  a descendant that leaves the group (``setsid``, ``setpgid``) survives there. A process handed
  to another service (``systemd-run``, ``docker``, ``at``) is that service's, on any platform.
- stdout and stderr share one pipe of our own (not the process's), read as data arrives and cut
  to its last ``tail_chars`` characters, so a flood cannot grow memory and a process that
  escaped the group while holding the pipe cannot hang the check.
- A command that cannot start (missing program, bad ``cwd``) is a misconfiguration, not a bad
  reply: ``check`` raises ``OSError`` naming the program, which the runner reports as the
  check's error (a FAIL when ``required``). Through a shell, a missing program is the shell's
  exit 127, an ordinary failure.

POSIX only. ``env`` is merged over ``os.environ`` and never shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.resources
import os
import shlex
import signal
import socket
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Literal

from replyguard.checks.base import CheckResult, failed, passed
from replyguard.types import FailCategory, Reply, Turn

PassReply = Literal["stdin", "file", "none"]

_PLACEHOLDER = "{reply_file}"
_ENCODING_ERRORS = "surrogatepass"
# After the process group is killed, how long to wait for the output pipe to reach its end (a
# process that left the group may still hold it open).
_DRAIN_SECONDS = 1.0
# How long the helper may take to report that the command started, and to end the command's
# tree when told to (it gives up on a process after 5 s of killing).
_HELPER_SECONDS = 10.0
# A child subreaper needs Linux's prctl, and a Python to run the helper with.
_REAPER_PLATFORM = sys.platform.startswith("linux") and bool(sys.executable)


class _Tail(asyncio.Protocol):
    """Keeps the last bytes that came through a pipe, and notes when the pipe closed."""

    def __init__(self, keep_bytes: int) -> None:
        self._keep_bytes = keep_bytes
        self._data = b""
        self._cut = False
        self.closed = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        self._data += data
        if len(self._data) > self._keep_bytes:
            self._data = self._data[-self._keep_bytes :]
            self._cut = True

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()

    def text(self, limit: int) -> str:
        """The last ``limit`` characters, after "…" when anything was cut."""
        text = self._data.decode("utf-8", errors="replace")
        if self._cut or len(text) > limit:
            return "…" + text[-limit:]
        return text


class CommandCheck:
    """Runs a command on the reply; a non-zero exit (or a timeout) fails with the output's tail."""

    def __init__(
        self,
        command: Sequence[str] | str,
        *,
        shell: bool = False,
        timeout_seconds: float = 60.0,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        pass_reply: PassReply = "stdin",
        tail_chars: int = 4000,
        name: str | None = None,
        required: bool = False,
        category: FailCategory = FailCategory.INCOMPLETE,
    ) -> None:
        if isinstance(command, str):
            if not shell:
                raise ValueError("command must be a list of arguments unless shell=True")
            words = command.split()
        else:
            if shell:
                raise ValueError("with shell=True, command must be one string")
            command = tuple(command)
            words = list(command)
        if not words or not words[0]:
            raise ValueError("command must not be empty")
        if timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be positive")
        if tail_chars < 1:
            raise ValueError("tail_chars must be at least 1")
        if pass_reply not in ("stdin", "file", "none"):
            raise ValueError(f"pass_reply must be 'stdin', 'file' or 'none', not {pass_reply!r}")
        uses_file = any(_PLACEHOLDER in word for word in words)
        if (pass_reply == "file") != uses_file:
            raise ValueError(
                f"{_PLACEHOLDER} must appear in the command if and only if pass_reply='file'"
            )
        self.command: str | tuple[str, ...] = command
        self.shell = shell
        self.timeout_seconds = timeout_seconds
        self.cwd = cwd
        self.env = dict(env or {})
        self.pass_reply: PassReply = pass_reply
        self.tail_chars = tail_chars
        self.name = name or "command:" + os.path.basename(words[0])
        self.required = required
        self.category = category

    async def check(self, turn: Turn, reply: Reply) -> CheckResult:
        with self._reply_file(reply.text) as path:
            returncode, output = await self._run(self._arguments(path), reply.text)
        if returncode == 0:
            return passed(self.name)
        shown = self.command if isinstance(self.command, str) else shlex.join(self.command)
        if returncode is None:
            what = f"did not finish within {self.timeout_seconds:g} s"
        else:
            what = f"exited with code {returncode}"
        return failed(
            self.name, self.category, f"`{shown}` {what}. Output:\n{output or '(no output)'}"
        )

    @contextlib.contextmanager
    def _reply_file(self, text: str) -> Iterator[str | None]:
        """The path of a private file holding the reply (file mode only), removed afterwards."""
        if self.pass_reply != "file":
            yield None
            return
        fd, path = tempfile.mkstemp(prefix="replyguard-reply-", suffix=".txt")  # mode 0600
        try:
            with open(fd, "wb") as file:
                file.write(_encoded(text))
            yield path
        finally:
            with contextlib.suppress(FileNotFoundError):  # the command may have removed it
                os.unlink(path)

    def _arguments(self, path: str | None) -> tuple[str, ...]:
        if isinstance(self.command, str):
            script = self.command
            if path is not None:
                script = script.replace(_PLACEHOLDER, shlex.quote(path))
            return ("/bin/sh", "-c", script)
        if path is None:
            return self.command
        return tuple(word.replace(_PLACEHOLDER, path) for word in self.command)

    async def _run(self, arguments: tuple[str, ...], reply_text: str) -> tuple[int | None, str]:
        """The exit code (None after a timeout) and the output's tail."""
        loop = asyncio.get_running_loop()
        read_fd, write_fd = os.pipe()
        try:
            transport, output = await loop.connect_read_pipe(
                lambda: _Tail(4 * self.tail_chars),  # a character takes at most 4 bytes
                os.fdopen(read_fd, "rb", buffering=0),
            )
        except BaseException:
            os.close(write_fd)
            raise
        try:
            try:
                process, control = await self._start(arguments, write_fd)
            finally:
                os.close(write_fd)
            try:
                returncode = await self._wait(process, reply_text)
            finally:
                await _end(process, control)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_DRAIN_SECONDS):
                    await output.closed.wait()
            return returncode, output.text(self.tail_chars)
        finally:
            transport.close()
            await output.closed.wait()

    async def _start(
        self, arguments: tuple[str, ...], output: int
    ) -> tuple[asyncio.subprocess.Process, socket.socket | None]:
        """The process to wait for, and the helper's control socket (None without a helper)."""
        if _REAPER_PLATFORM:
            started = await self._start_under_reaper(arguments, output)
            if started is not None:
                return started
        return await self._spawn(arguments, output), None

    async def _spawn(
        self, arguments: tuple[str, ...], output: int, pass_fds: tuple[int, ...] = ()
    ) -> asyncio.subprocess.Process:
        stdin = (
            asyncio.subprocess.PIPE if self.pass_reply == "stdin" else asyncio.subprocess.DEVNULL
        )
        try:
            return await asyncio.create_subprocess_exec(
                *arguments,
                stdin=stdin,
                stdout=output,
                stderr=asyncio.subprocess.STDOUT,
                cwd=self.cwd,
                env={**os.environ, **self.env} if self.env else None,
                start_new_session=True,
                pass_fds=pass_fds,
            )
        except OSError as exc:
            raise self._cannot_start(arguments[0], exc.errno, exc.strerror) from exc

    def _cannot_start(self, program: str, number: int | None, reason: str | None) -> OSError:
        where = f" in {self.cwd!r}" if self.cwd is not None else ""
        message = f"check {self.name!r} cannot start {program!r}{where}: {reason}"
        return OSError(number, message)

    async def _start_under_reaper(
        self, arguments: tuple[str, ...], output: int
    ) -> tuple[asyncio.subprocess.Process, socket.socket] | None:
        """The helper running the command (see ``replyguard.checks.reaper``), or None when the
        helper itself could not run."""
        ours, theirs = socket.socketpair()
        try:
            with theirs:
                helper = (sys.executable, "-I", "-S", "-c", _reaper_source(), str(theirs.fileno()))
                process = await self._spawn((*helper, *arguments), output, (theirs.fileno(),))
            ours.setblocking(False)
            try:
                async with asyncio.timeout(_HELPER_SECONDS):
                    report = await asyncio.get_running_loop().sock_recv(ours, 64)
            except (TimeoutError, OSError):
                report = b""
        except BaseException:
            ours.close()
            raise
        if report == b"ok":
            return process, ours
        ours.close()
        await _kill_group(process)
        if report.startswith(b"errno:"):
            number = int(report.removeprefix(b"errno:"))
            raise self._cannot_start(arguments[0], number, os.strerror(number))
        return None  # the helper did not run: the command runs in its own process group

    async def _wait(self, process: asyncio.subprocess.Process, reply_text: str) -> int | None:
        """Feed the reply (stdin mode) and wait for the exit code; None when time runs out."""
        try:
            async with asyncio.timeout(self.timeout_seconds):
                if process.stdin is not None:
                    await _feed(process.stdin, _encoded(reply_text))
                return await process.wait()
        except TimeoutError:
            return None


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", errors=_ENCODING_ERRORS)


async def _feed(stdin: asyncio.StreamWriter, data: bytes) -> None:
    try:
        stdin.write(data)
        await stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the command exited without reading all of its input: its exit code tells
    finally:
        stdin.close()


async def _end(process: asyncio.subprocess.Process, control: socket.socket | None) -> None:
    """End the command and everything it started, and reap it.

    With a helper: closing its control socket tells it to kill the command's whole tree, and it
    exits once that is done; its process group is killed only if it does not. Without one: the
    command's process group is killed.
    """
    if control is not None:
        control.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_HELPER_SECONDS):
                await process.wait()
                return
    await _kill_group(process)


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGKILL the process's group (it leads its own session), then reap the process."""
    with contextlib.suppress(ProcessLookupError):  # the whole group is already gone
        os.killpg(process.pid, signal.SIGKILL)
    await process.wait()


@functools.cache
def _reaper_source() -> str:
    """The helper's source, run with ``python -c`` (from a wheel, a zip or a checkout)."""
    return importlib.resources.files("replyguard.checks").joinpath("reaper.py").read_text("utf-8")
