"""A real ``redis-server`` for the tests: bound to 127.0.0.1 on a free port, in a temporary
folder, with no persistence, stopped by its pid. It can be killed and started again on the same
port, paused (SIGSTOP) and resumed, and may require a password.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

from support.ports import free_port

REDIS_PASSWORD = "fleet-redis-password-0001"
"""The password the tests' servers require (listed in conftest.KNOWN_KEYS)."""
WRONG_PASSWORD = "fleet-wrong-password-0002"
"""A password they refuse (listed too)."""
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


class RedisServer:
    """One ``redis-server`` process (``start``/``kill``/``pause``/``resume``/``stop``)."""

    def __init__(self, password: str | None = None) -> None:
        self.port = free_port()
        self.password = password
        self._folder = tempfile.mkdtemp(prefix="replyguard-redis-")
        self._process: subprocess.Popen[bytes] | None = None

    def url(self, password: str | None = None) -> str:
        """The URL of this server, with ``password`` (default: the server's own, if any)."""
        secret = password if password is not None else self.password
        auth = f":{secret}@" if secret else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def start(self) -> RedisServer:
        """Start the server and wait until it answers PING."""
        command = [
            REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", self._folder,
            "--save", "", "--appendonly", "no", "--protected-mode", "no", "--loglevel", "warning",
        ]  # fmt: skip
        if self.password:
            command += ["--requirepass", self.password]
        self._process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self._wait_ready()
        return self

    def _wait_ready(self, within: float = 10.0) -> None:
        until = time.monotonic() + within
        while time.monotonic() < until:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self._process.returncode}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as connection,
            ):
                connection.sendall(b"PING\r\n")
                reply = connection.recv(64)
                if reply.startswith((b"+PONG", b"-NOAUTH")):
                    return
            time.sleep(0.01)
        raise RuntimeError("redis-server did not answer within 10 s")

    def kill(self) -> None:
        """SIGKILL the server and reap it (its keys are gone: nothing was persisted)."""
        if self._process is not None and self._process.poll() is None:
            os.kill(self._process.pid, signal.SIGCONT)
            os.kill(self._process.pid, signal.SIGKILL)
            self._process.wait(timeout=10)

    def pause(self) -> None:
        """SIGSTOP: the server holds its connections and answers nothing."""
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after ``pause``."""
        os.kill(self.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Stop the server by its pid and remove its folder."""
        if self._process is not None and self._process.poll() is None:
            os.kill(self._process.pid, signal.SIGCONT)
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)
        shutil.rmtree(self._folder, ignore_errors=True)


@contextlib.contextmanager
def redis_server(password: str | None = None) -> Iterator[RedisServer]:
    """A started ``RedisServer``, stopped after the block."""
    server = RedisServer(password)
    try:
        yield server.start()
    finally:
        server.stop()
