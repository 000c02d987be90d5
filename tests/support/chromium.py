"""Headless Chromium driven through the DevTools protocol over a pipe, from async tests.

``--remote-debugging-pipe`` makes Chromium read protocol commands from its file descriptor 3
and write answers and events to descriptor 4, each message JSON ended by a NUL byte: no port,
no websocket library. A reader thread hands each answer to the awaiting coroutine, so the
test's event loop (which may be serving the page) keeps running while it waits.

    async with Chromium() as browser:
        page = await browser.open(url)
        await page.wait_for("document.title === 'Chat'")
        png = await page.screenshot()
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fcntl
import itertools
import json
import os
import shutil
import signal
import tempfile
import threading
from typing import Any

CHROMIUM = shutil.which("chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--remote-debugging-pipe",
)
WAIT_FOR = """
(predicate, seconds) => new Promise((resolve, reject) => {
  const check = () => { try { return predicate(); } catch (error) { return false; } };
  if (check()) return resolve(true);
  const observer = new MutationObserver(() => {
    if (check()) { observer.disconnect(); clearTimeout(timer); resolve(true); }
  });
  const timer = setTimeout(() => { observer.disconnect(); reject(new Error("timed out")); },
                           seconds * 1000);
  observer.observe(document, {subtree: true, childList: true, characterData: true,
                              attributes: true});
})
"""
"""Resolves once ``predicate()`` holds, checked now and after every change of the DOM (no
polling); rejects after ``seconds``."""


class BrowserError(RuntimeError):
    """A DevTools command failed, or a script threw."""


class Page:
    """One tab, attached in flat mode (commands carry its session id)."""

    def __init__(self, browser: Chromium, session: str) -> None:
        self._browser = browser
        self._session = session

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        return await self._browser.send(method, session=self._session, **params)

    async def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (a promise is awaited)."""
        answer = await self.send(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in answer:
            details = answer["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise BrowserError(f"{expression!r} threw: {text}")
        return answer["result"].get("value")

    async def wait_for(self, predicate: str, *, seconds: float = 10.0) -> None:
        """Wait until the JavaScript expression ``predicate`` is true (re-checked on every DOM
        change)."""
        await self.evaluate(f"({WAIT_FOR})(() => ({predicate}), {seconds})")

    async def screenshot(self) -> bytes:
        """The page as a PNG."""
        answer = await self.send("Page.captureScreenshot", format="png")
        return base64.b64decode(answer["data"])


class Chromium:
    """A headless Chromium with a fresh profile, closed (and its profile removed) on exit."""

    def __init__(self, *, width: int = 900, height: int = 700) -> None:
        if CHROMIUM is None:
            raise RuntimeError("chromium is not installed (Debian: apt-get install chromium)")
        self._size = f"--window-size={width},{height}"
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._expected: list[tuple[str, str | None, asyncio.Future[dict[str, Any]]]] = []
        self._lock = threading.Lock()

    async def __aenter__(self) -> Chromium:
        self._loop = asyncio.get_running_loop()
        self._profile = tempfile.TemporaryDirectory(prefix="chromium-")
        commands_read, self._commands = os.pipe()  # Chromium reads fd 3
        self._answers, answers_write = os.pipe()  # Chromium writes fd 4
        self._pid = _spawn(
            [
                str(CHROMIUM),
                *FLAGS,
                self._size,
                f"--user-data-dir={self._profile.name}",
                "about:blank",
            ],
            commands_read,
            answers_write,
        )
        os.close(commands_read)
        os.close(answers_write)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(BrowserError, OSError, TimeoutError):
            async with asyncio.timeout(10):
                await self.send("Browser.close")
        with contextlib.suppress(OSError):
            os.close(self._commands)
        exited = asyncio.ensure_future(asyncio.to_thread(os.waitpid, self._pid, 0))
        done, _ = await asyncio.wait({exited}, timeout=10)
        if not done:
            os.kill(self._pid, signal.SIGKILL)
        await exited
        await asyncio.to_thread(self._reader.join, 10)
        os.close(self._answers)
        self._profile.cleanup()

    def _read(self) -> None:
        """Answers from Chromium, each handed to the coroutine that sent its command."""
        buffer = b""
        while chunk := os.read(self._answers, 1 << 16):
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                with self._lock:
                    future = self._waiting.pop(message.get("id", -1), None)
                    if future is None and "method" in message:
                        future = self._take_expected(message)
                if future is not None:
                    self._loop.call_soon_threadsafe(_settle, future, message)
        with self._lock:
            left = [*self._waiting.values(), *(f for _, _, f in self._expected)]
            self._waiting, self._expected = {}, []
        for future in left:
            self._loop.call_soon_threadsafe(
                _settle, future, {"error": {"message": "chromium went away"}}
            )

    def _take_expected(self, event: dict[str, Any]) -> asyncio.Future[dict[str, Any]] | None:
        for index, (method, session, future) in enumerate(self._expected):
            if method == event["method"] and session in (None, event.get("sessionId")):
                del self._expected[index]
                return future
        return None

    def expect(self, method: str, *, session: str | None = None) -> asyncio.Future[Any]:
        """A future for the next event ``method`` (of ``session``), registered now: create it
        before sending the command that causes the event."""
        future: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        with self._lock:
            self._expected.append((method, session, future))
        return future

    async def send(self, method: str, *, session: str | None = None, **params: Any) -> Any:
        """Send one command; its result (an error answer raises ``BrowserError``)."""
        number = next(self._ids)
        message: dict[str, Any] = {"id": number, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        future: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        with self._lock:
            self._waiting[number] = future
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        answer = await future
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error'].get('message')}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    async def open(self, url: str) -> Page:
        """A new tab showing ``url``, once its document has loaded."""
        target = await self.send("Target.createTarget", url="about:blank")
        attached = await self.send(
            "Target.attachToTarget", targetId=target["targetId"], flatten=True
        )
        page = Page(self, attached["sessionId"])
        await page.send("Page.enable")
        loaded = self.expect("Page.loadEventFired", session=attached["sessionId"])
        await page.send("Page.navigate", url=url)
        async with asyncio.timeout(30):
            await loaded
        return page


def _settle(future: asyncio.Future[dict[str, Any]], message: dict[str, Any]) -> None:
    if not future.done():
        future.set_result(message)


def _spawn(argv: list[str], commands_read: int, answers_write: int) -> int:
    """Start ``argv`` with the two pipe ends as its descriptors 3 and 4, and no output.

    ``posix_spawn`` moves them there without running Python code in the child (which a
    ``preexec_fn`` would, unsafely in a process with threads). Copies numbered 10 and up are
    moved, so that neither move can overwrite the other end when one is numbered 3 or 4."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (commands_read, answers_write)]
    try:
        return os.posix_spawn(
            argv[0],
            argv,
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, high[0], 3),
                (os.POSIX_SPAWN_DUP2, high[1], 4),
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            ],
        )
    finally:
        for fd in high:
            os.close(fd)
