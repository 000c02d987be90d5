"""A minimal loopback judge for benchmarks: asyncio, ``TCP_NODELAY``, one write per response.

It answers every POST with ``PASS`` in the wire format its path asks for (``.../messages``:
Anthropic, anything else: OpenAI chat completions). The first path segment picks the
behaviour, so one server serves every scenario and both sides of a comparison use the very
same ``api_base``:

- ``/fast/...``  answer at once;
- ``/d100/...``  answer after 100 ms (any number of milliseconds);
- ``/hang/...``  never answer; the connection is closed when the client closes it;
- ``/hold/...``  answer once ``GET /_release`` is sent (every request held until then);
- ``/s1000/...`` stream an OpenAI chat completion as Server-Sent Events: 1,000 chunks of
  ``"w<n> "`` (any number), then a final chunk with the usage; ``/s1000p2/...`` waits 2 ms
  before each chunk, ``/s1000x20/...`` makes chunk 20 say ``"as an AI "`` (suffixes combine:
  ``/s1000p1x20/...``). A stream stops when the client closes it.

``GET /_stats`` returns ``{"requests": n, "open": n, "connections": n, "chunks": n,
"streams_cut": n}`` (requests answered or hung so far, connections open now, connections
accepted so far, stream chunks written, streams the client closed before their end).

Run it in a thread of the calling process (``JudgeServer``, for tests) or in a process of its
own (``JudgeServerProcess``, for benchmarks: the server then does not compete with the
measured code for the GIL). ``python benchmarks/judge_server.py`` serves on a free port and
prints ``PORT <n>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Any

_VERDICT = "The reply does what was asked.\nPASS"


def _openai(model: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": _VERDICT},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 900, "completion_tokens": 12, "total_tokens": 912},
        }
    ).encode()


def _anthropic(model: str) -> bytes:
    return json.dumps(
        {
            "id": "msg_bench",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": _VERDICT}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 900, "output_tokens": 12},
        }
    ).encode()


def _response(status: str, payload: bytes) -> bytes:
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(payload)}\r\n\r\n"
    ).encode("latin-1") + payload


_STREAM = re.compile(r"s(\d+)(?:p(\d+))?(?:x(\d+))?")
"""A streaming path's first segment: chunks, pause before each (ms), the odd chunk out."""


def _chunk(model: str, text: str | None, usage: dict[str, int] | None = None) -> bytes:
    event: dict[str, Any] = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "delta": {"content": text} if text is not None else {},
                "finish_reason": None if text is not None else "stop",
            }
        ],
    }
    if usage is not None:
        event["usage"] = usage
    data = f"data: {json.dumps(event)}\n\n".encode()
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


class _Handler:
    def __init__(self) -> None:
        self.requests = 0
        self.open = 0
        self.connections = 0
        self.chunks = 0
        self.streams_cut = 0
        self._bodies: dict[tuple[str, str], bytes] = {}
        self._held = asyncio.Event()  # ``/hold/`` requests wait on it; ``/_release`` sets it

    def body(self, path: str, raw: bytes) -> bytes:
        try:
            model = str(json.loads(raw).get("model", "unknown")) if raw else "unknown"
        except ValueError:
            model = "unknown"
        kind = "anthropic" if path.rstrip("/").endswith("/messages") else "openai"
        key = (kind, model)
        cached = self._bodies.get(key)
        if cached is None:  # the ``created`` stamp is frozen at the first answer: fine here
            payload = _anthropic(model) if kind == "anthropic" else _openai(model)
            cached = self._bodies[key] = _response("200 OK", payload)
        return cached

    async def client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.open += 1
        self.connections += 1
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:  # shutdown while a request waits on its delay
            pass
        finally:
            self.open -= 1
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        first, _, rest = head.partition(b"\r\n")
        method, path, _ = first.decode("latin-1").split(" ", 2)
        length = 0
        for line in rest.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        raw = await reader.readexactly(length) if length else b""
        if method == "GET" and path.startswith("/_stats"):
            stats = json.dumps(
                {
                    "requests": self.requests,
                    "open": self.open,
                    "connections": self.connections,
                    "chunks": self.chunks,
                    "streams_cut": self.streams_cut,
                }
            ).encode()
            writer.write(_response("200 OK", stats))
            return True
        if method == "GET" and path.startswith("/_release"):
            self._held.set()
            self._held = asyncio.Event()
            writer.write(_response("200 OK", b"{}"))
            return True
        self.requests += 1
        mode = path.lstrip("/").split("/", 1)[0]
        if mode == "hang":
            while await reader.read(65536):  # until the client gives up and closes
                pass
            return False
        streamed = _STREAM.fullmatch(mode)
        if streamed is not None:
            await self._stream(reader, writer, raw, *streamed.groups())
            return True
        if mode.startswith("d") and mode[1:].isdigit():
            await asyncio.sleep(int(mode[1:]) / 1000)
        elif mode == "hold":
            await self._held.wait()
        writer.write(self.body(path, raw))  # headers and body in one write
        return True

    async def _stream(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        raw: bytes,
        count: str,
        pause: str | None,
        odd: str | None,
    ) -> None:
        """Server-Sent Events, chunk by chunk, until the end or until the client closes."""
        model = str(json.loads(raw).get("model", "unknown")) if raw else "unknown"
        total, wait = int(count), int(pause or 0) / 1000
        closed = asyncio.create_task(reader.read())  # b"" when the client closes
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        try:
            for index in range(total):
                if wait:
                    await asyncio.sleep(wait)
                if closed.done():
                    raise ConnectionError("the client closed the stream")
                text = "as an AI " if str(index) == odd else f"w{index} "  # litellm refuses repeats
                writer.write(_chunk(model, text))
                self.chunks += 1
                await writer.drain()
            usage = {"prompt_tokens": 20, "completion_tokens": total, "total_tokens": total + 20}
            writer.write(_chunk(model, None, usage) + _chunk_done())
            await writer.drain()
        except ConnectionError:  # seen as the client's close, or as a failed write
            self.streams_cut += 1
            raise
        finally:
            closed.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await closed


def _chunk_done() -> bytes:
    data = b"data: [DONE]\n\n"
    return f"{len(data):x}\r\n".encode() + data + b"\r\n0\r\n\r\n"


async def serve(port: int = 0) -> tuple[asyncio.Server, _Handler]:
    handler = _Handler()
    server = await asyncio.start_server(handler.client, "127.0.0.1", port, backlog=4096)
    return server, handler


class JudgeServer:
    """The judge on its own event loop in a daemon thread of this process."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._handler: _Handler | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def requests(self) -> int:
        assert self._handler is not None
        return self._handler.requests

    def __enter__(self) -> JudgeServer:
        self._thread.start()
        self._server, self._handler = asyncio.run_coroutine_threadsafe(serve(), self._loop).result(
            10
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            assert self._server is not None
            self._server.close()
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


class JudgeServerProcess:
    """The judge in a child process (its own interpreter, its own GIL)."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}/_stats", timeout=5) as response:
            data: dict[str, Any] = json.loads(response.read())
            return data

    def command(self) -> list[str]:
        """What runs the server: a script that prints ``PORT <n>`` once it listens."""
        return [sys.executable, os.path.abspath(__file__)]

    def __enter__(self) -> JudgeServerProcess:
        self._process = subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line.startswith("PORT "):
            self._process.kill()
            raise RuntimeError(f"the judge server did not start: {line!r}")
        self.port = int(line.split()[1])
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(10)
        if self._process.stdout is not None:
            self._process.stdout.close()


async def _main() -> None:
    server, _ = await serve()
    print("PORT", server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main())
