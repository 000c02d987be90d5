"""Reading the agent's workspace files (rules, HEARTBEAT.md) safely and cheaply.

A file is read only when it resolves inside ``workspaceDir`` (no ``..``, absolute paths, or
symlinks out) and is a regular file (a FIFO would block the event loop), only up to a size cap
(a longer file, or one that grew past it while being read, is cut on a character boundary and
marked), and only again when its size or mtime changed. A missing, unreadable or out-of-bounds
file is skipped with a log event, never an error.

A turn reads its files on two daemon threads of its workspace directory's own
(``read_later``): a disk that hangs (a stalled network mount) holds one of them, never the
event loop, nor the loop's default executor that litellm builds its requests on, nor another
workspace's reads, nor the process's exit; the caller bounds the wait. Idle readers end.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from stat import S_ISREG
from typing import Any, TypeVar

from replyguard.telemetry._events import Events

MAX_FILE_BYTES = 256 * 1024
_READERS = 2
_T = TypeVar("_T")


class _Readers:
    """Up to two daemon threads that read one workspace's files, started on demand and ended
    after ``_IDLE_SECONDS`` with nothing to read. Daemon threads, unlike an executor's: a read
    stuck on a hung mount never holds up the process's exit."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0

    def submit(self, work: Callable[[], Any]) -> Future[Any]:
        """``work()``'s result, from one of the readers; failed at once (RuntimeError) when
        there is no reader and none can be started (a process at its thread limit)."""
        future: Future[Any] = Future()
        with self._lock:
            if self._threads < _READERS:
                reader = threading.Thread(
                    target=self._serve, name="replyguard-workspace", daemon=True
                )
                try:
                    reader.start()
                except RuntimeError as exc:
                    if not self._threads:  # nobody would ever serve it
                        future.set_exception(exc)
                        return future
                else:
                    self._threads += 1
            self._queue.put((future, work))  # with the lock held: an idle reader's exit sees it
        return future

    def _serve(self) -> None:
        while True:
            try:
                future, work = self._queue.get(timeout=_IDLE_SECONDS)
            except queue.Empty:
                with self._lock:  # a submit that put work before this check is served
                    if self._queue.empty():
                        self._threads -= 1
                        if not self._threads:  # a later read makes new readers
                            with _readers_lock:
                                if _readers.get(self._root) is self:
                                    del _readers[self._root]
                        return
                continue
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(work())
            except BaseException as exc:  # handed to the waiting turn
                future.set_exception(exc)


_IDLE_SECONDS = 30.0
_readers: dict[Path, _Readers] = {}
"""Each workspace directory's readers: a mount that hangs holds only its own workspace's."""
_readers_lock = threading.Lock()


def _readers_of(root: Path) -> _Readers:
    with _readers_lock:
        readers = _readers.get(root)
        if readers is None:
            readers = _readers[root] = _Readers(root)
        return readers


def _awaited_on(loop: asyncio.AbstractEventLoop, future: Future[_T]) -> asyncio.Future[_T]:
    """An asyncio future on ``loop`` that takes ``future``'s outcome. Unlike
    ``asyncio.wrap_future``, cancelling it leaves ``future`` alone: other turns share it."""
    waiter: asyncio.Future[_T] = loop.create_future()

    def settle(done: Future[_T]) -> None:
        if waiter.cancelled():
            return
        error = done.exception()
        if error is not None:
            waiter.set_exception(error)
        else:
            waiter.set_result(done.result())

    def hand_over(done: Future[_T]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle, done)

    future.add_done_callback(hand_over)
    return waiter


def _forget_readers() -> None:
    global _readers, _readers_lock
    _readers, _readers_lock = {}, threading.Lock()  # a child has none of its parent's threads


os.register_at_fork(after_in_child=_forget_readers)


class Workspace:
    """The files of one workspace directory, cached by path, size and mtime."""

    def __init__(self, directory: str | None, events: Events) -> None:
        self._root = Path(directory).resolve() if directory else None
        self._events = events
        self._cache: dict[Path, tuple[int, int, str]] = {}
        self._queued: dict[tuple[str, ...], tuple[_Readers, Future[tuple[str | None, ...]]]] = {}
        self._lock = threading.Lock()

    @property
    def root(self) -> Path | None:
        """The resolved workspace directory, if one is configured."""
        return self._root

    def _inside(self, name: str) -> Path | None:
        if self._root is None:
            return None
        relative = Path(name)
        if relative.is_absolute() or ".." in relative.parts:
            self._events.warning("workspace_file_refused", file=name, why="outside workspace")
            return None
        try:
            path = (self._root / relative).resolve()
        except (OSError, RuntimeError, ValueError) as exc:  # symlink loop, NUL byte, ...
            self._events.warning("workspace_file_unreadable", file=name, error=type(exc).__name__)
            return None
        if not path.is_relative_to(self._root):
            self._events.warning("workspace_file_refused", file=name, why="links outside workspace")
            return None
        return path

    def read_later(self, names: Sequence[str]) -> asyncio.Future[tuple[str | None, ...]] | None:
        """The texts of ``names`` (as ``read`` gives them), read on the workspace's threads;
        None when there is no workspace to read (nothing to wait for). Call on the event loop.
        """
        if self._root is None or not names:
            return None
        loop = asyncio.get_running_loop()
        wanted = tuple(names)
        readers = _readers_of(self._root)
        with self._lock:
            # A read of the same files still queued (not started: it will see the disk as it
            # is when it starts) serves this turn too, so a hung disk queues one read, not
            # one per turn, and a burst of turns reads once. Only on these readers: after a
            # fork, a read queued in the parent is never served.
            pool, queued = self._queued.get(wanted, (None, None))
            if pool is not readers or queued is None or queued.running() or queued.done():
                queued = readers.submit(lambda: self.read_all(wanted))
                self._queued[wanted] = (readers, queued)
        return _awaited_on(loop, queued)

    def read_all(self, names: Sequence[str]) -> tuple[str | None, ...]:
        """``read`` of each of ``names``, in order."""
        return tuple(self.read(name) for name in names)

    def read(self, name: str) -> str | None:
        """The text of ``name`` inside the workspace, or None when it cannot be used."""
        path = self._inside(name)
        if path is None:
            return None
        try:
            stat = path.stat()
        except FileNotFoundError:
            self._events.debug("workspace_file_missing", file=name)
            return None
        except (OSError, ValueError) as exc:
            self._events.warning("workspace_file_unreadable", file=name, error=type(exc).__name__)
            return None
        if not S_ISREG(stat.st_mode):  # a FIFO or device would block the event loop
            self._events.warning("workspace_file_refused", file=name, why="not a regular file")
            return None
        key = (stat.st_size, stat.st_mtime_ns)
        with self._lock:
            cached = self._cache.get(path)
        if cached is not None and cached[:2] == key:
            return cached[2]
        text = self._load(path, name, stat.st_size)
        if text is not None:
            with self._lock:
                self._cache[path] = (*key, text)
        return text

    def _load(self, path: Path, name: str, size: int) -> str | None:
        try:
            # O_NONBLOCK: should the file be swapped for a FIFO after the stat, opening it
            # still returns at once, and the regular-file check below refuses it.
            descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            with os.fdopen(descriptor, "rb") as handle:
                opened = os.fstat(handle.fileno())
                if not S_ISREG(opened.st_mode):
                    raise IsADirectoryError("not a regular file")
                # One byte over the cap tells a file that grew since the stat from one that fits.
                data = handle.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            self._events.warning("workspace_file_unreadable", file=name, error=type(exc).__name__)
            return None
        if len(data) <= MAX_FILE_BYTES:
            return data.decode("utf-8", errors="replace")
        # The cut may fall inside a character: its first bytes are dropped, not shown as U+FFFD.
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = decoder.decode(data[:MAX_FILE_BYTES], final=False)
        total = max(size, opened.st_size, len(data))
        self._events.warning("workspace_file_truncated", file=name, bytes=total)
        return text + f"\n[… {name} was cut at {MAX_FILE_BYTES:,} bytes of {total:,} …]"
