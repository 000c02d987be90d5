"""A loopback HTTP server playing an LLM provider, for end-to-end tests through ``apiBase``.

It speaks the OpenAI chat-completions wire format on ``.../chat/completions`` and the
Anthropic messages format on ``.../messages``, answering each request from a script of
``Step`` values (text, status, delay, a body or raw bytes, a dropped connection, a stall in the
middle of the body, or a listener that goes away). An OpenAI request that asks for a stream
(``"stream": true``) is answered with Server-Sent Events of ``chat.completion.chunk`` objects,
one per piece of ``Step.chunks``, as OpenAI streams them; an Anthropic request that asks
for one gets Anthropic's events (``message_start``, ``content_block_delta`` per piece,
``message_delta`` with the usage, ``message_stop``). It runs its own event loop in a thread, so
both ``await verifier.run`` and ``verifier.run_sync`` can use it, and sets ``TCP_NODELAY`` and
writes each response in one send.

It counts the client connections it holds open (``open_connections``): a client that gives up
on a hung request is seen to close its connection at once, even while the server is stalling.
Each answer the client closed before its end (during a ``delay``, a stall, or between the
paced pieces of a stream) is recorded in ``cut`` (``wait_for_cut`` waits for them), with how
many pieces of it had been sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Step:
    """How to answer one request."""

    text: str | None = "PASS"
    status: int = 200
    delay: float = 0.0
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    prompt_tokens: int = 900
    completion_tokens: int = 12
    raw: bytes | None = None
    """Written as they are instead of an HTTP response; then the connection is closed."""
    stall_mid_body: bool = False
    """Send the headers (with the full ``content-length``) and half the body, then nothing."""
    stop_listening: bool = False
    """After this answer, close the connection and the listener: later connections are refused."""
    after_requests: int = 0
    """Hold this answer until this many requests have arrived in all (a barrier: requests that
    were sent one after another, each waiting for its answer, never get past it; at most 10 s)."""
    after_answers: int = 0
    """Hold this answer until this many answers have been written in all (at most 10 s)."""
    chunks: tuple[str, ...] | None = None
    """A streamed answer's text pieces, each its own event (None: ``text`` in one piece)."""
    stall_after: int | None = None
    """A streamed answer sends this many pieces, then nothing until the client closes."""
    pace: float = 0.0
    """Seconds between a streamed answer's pieces (a close meanwhile ends the answer)."""
    cut_after: int | None = None
    """A streamed answer sends this many events, then ends the connection without finishing
    the stream (no finish reason, no terminating chunk)."""


@dataclass(frozen=True)
class Cut:
    """An answer the client closed before its end."""

    path: str
    sent: int
    """How many of the answer's pieces (stream events) had been sent (0: none)."""


@dataclass
class Seen:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def prompt_texts(self) -> list[str]:
        """The texts of the prompt as sent, system first, whatever the wire format.

        OpenAI sends ``messages`` with string content; Anthropic moves the system message to a
        top-level ``system`` list of blocks and may send content as a list of text blocks.
        """
        texts = [_block_text(self.body["system"])] if "system" in self.body else []
        texts += [_block_text(m.get("content")) for m in self.body.get("messages", [])]
        return texts

    @property
    def prompt(self) -> str:
        """Every prompt text in one string, for searching."""
        return "\n".join(self.prompt_texts)


def _block_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(str(block.get("text", "")) for block in content if isinstance(block, dict))


def openai_body(step: Step, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": step.text},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": step.prompt_tokens,
            "completion_tokens": step.completion_tokens,
            "total_tokens": step.prompt_tokens + step.completion_tokens,
        },
    }


def openai_chunks(step: Step, model: str, *, usage: bool) -> list[dict[str, Any]]:
    """A streamed OpenAI answer: a chunk per piece, the finish reason, then (when the request
    asked for it with ``stream_options.include_usage``) the usage in a chunk of its own."""
    pieces = step.chunks if step.chunks is not None else (step.text or "",)

    def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
        }

    out = [chunk({"role": "assistant", "content": piece}, None) for piece in pieces]
    out.append(chunk({}, "stop"))
    if usage:
        out.append({**chunk({}, None), "choices": [], "usage": openai_body(step, model)["usage"]})
    return out


_EMPTY_TEXT = {"type": "text", "text": ""}


def anthropic_events(step: Step, model: str) -> list[tuple[str, dict[str, Any]]]:
    """A streamed Anthropic answer, as ``(event name, data)``: the message's start (with its
    input tokens), a text block with a delta per piece, the stop reason and output tokens."""
    pieces = step.chunks if step.chunks is not None else (step.text or "",)
    start = {**anthropic_body(step, model), "content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": step.prompt_tokens, "output_tokens": 1}
    out: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": _EMPTY_TEXT},
        ),
    ]
    out += [
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}},
        )
        for p in pieces
    ]
    out += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": step.completion_tokens},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return out


def anthropic_body(step: Step, model: str) -> dict[str, Any]:
    content = [] if step.text is None else [{"type": "text", "text": step.text}]
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": step.prompt_tokens, "output_tokens": step.completion_tokens},
    }


# The error ``type`` each provider puts in its error body, by HTTP status.
_OPENAI_ERROR_TYPES = {401: "invalid_request_error", 429: "requests", 500: "server_error"}
_ANTHROPIC_ERROR_TYPES = {401: "authentication_error", 429: "rate_limit_error", 500: "api_error"}


@dataclass(frozen=True)
class Wire:
    """One provider's wire format, and a judge / agent model pair that makes litellm speak it."""

    name: str
    judge_model: str
    agent_model: str
    """A model of another family than the judge's, so the cross-family check stays quiet."""
    path: str
    """Where litellm posts, relative to ``apiBase``."""
    url: str
    """The provider's public endpoint (what respx mocks when no ``apiBase`` is set)."""
    key_header: str
    key_prefix: str

    def answer(self, step: Step, model: str) -> dict[str, Any]:
        """A successful response body in this wire format."""
        return openai_body(step, model) if self.name == "openai" else anthropic_body(step, model)

    def encoded_answer(self, text: str) -> Step:
        """A step answering ``text`` from the judge model, its body encoded now: a server
        thread shares the GIL with the turn under test, and encoding a huge answer while the
        client reads shows as the client's loop lag (or ends a judgement by its deadline)."""
        model = self.judge_model.split("/", 1)[1]
        return Step(body=json.dumps(self.answer(Step(text=text), model)).encode())

    def error(self, status: int, message: str) -> bytes:
        """An error body in this provider's shape, carrying ``message``."""
        if self.name == "openai":
            kind = _OPENAI_ERROR_TYPES.get(status, "server_error")
            body: dict[str, Any] = {
                "error": {"message": message, "type": kind, "param": None, "code": None}
            }
        else:
            kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
            body = {"type": "error", "error": {"type": kind, "message": message}}
        return json.dumps(body).encode()


OPENAI = Wire(
    name="openai",
    judge_model="openai/gpt-4o-mini",
    agent_model="anthropic/claude-sonnet-4-5",
    path="/chat/completions",
    url="https://api.openai.com/v1/chat/completions",
    key_header="authorization",
    key_prefix="Bearer ",
)
ANTHROPIC = Wire(
    name="anthropic",
    judge_model="anthropic/claude-sonnet-4-5",
    agent_model="openai/gpt-4o",
    path="/v1/messages",
    url="https://api.anthropic.com/v1/messages",
    key_header="x-api-key",
    key_prefix="",
)


class ProviderServer:
    """Start with ``with ProviderServer() as server:``; point ``apiBase`` at ``server.url``."""

    def __init__(self, steps: list[Step] | None = None, *, default: Step | None = None) -> None:
        self._steps: deque[Step] = deque(steps or [])
        self._default = default
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self.seen: list[Seen] = []
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._tasks: set[asyncio.Task[None]] = set()
        self._responder: Callable[[Seen], Step] | None = None
        self._open = 0
        self.connections = 0
        """How many client connections were accepted so far."""
        self.port = 0
        self.answers = 0
        """How many answers were written to the end so far."""
        self.cut: list[Cut] = []
        """The answers the client closed before their end, in order."""
        self._arrivals = asyncio.Condition()  # notified on the server's loop at each request

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def open_connections(self) -> int:
        """Client connections open right now (closed ones are counted out when the server sees
        the close, even in the middle of a ``delay`` or a stall)."""
        with self._lock:
            return self._open

    def _wait(self, condition: Callable[[], bool], seconds: float) -> None:
        with self._changed:
            self._changed.wait_for(condition, timeout=seconds)

    async def wait_for_open_connections(self, count: int = 0, *, within: float = 2.0) -> int:
        """Wait until ``count`` client connections are open; return how many are open when that
        happened or ``within`` seconds ran out.

        It waits in a worker thread, so the caller's loop can close its connections meanwhile.
        """
        await asyncio.to_thread(self._wait, lambda: self._open == count, within)
        return self.open_connections

    def open_connections_now(self, count: int = 0, *, within: float = 2.0) -> int:
        """Like ``wait_for_open_connections``, but blocking the calling thread: the caller's
        event loop runs nothing meanwhile, so only what it had already done before the call
        (a socket it has really closed) can bring the count down."""
        self._wait(lambda: self._open == count, within)
        return self.open_connections

    async def wait_for_cut(self, count: int = 1, *, within: float = 5.0) -> int:
        """Wait until the client has closed ``count`` answers before their end (``cut``);
        return how many it had when that happened or ``within`` seconds ran out."""
        await asyncio.to_thread(self._wait, lambda: len(self.cut) >= count, within)
        with self._lock:
            return len(self.cut)

    def _record_cut(self, path: str, sent: int) -> None:
        with self._changed:
            self.cut.append(Cut(path, sent))
            self._changed.notify_all()

    async def wait_for_requests(self, count: int = 1, *, within: float = 2.0) -> int:
        """Wait until ``count`` requests have arrived (their steps about to run); return how
        many had arrived when that happened or ``within`` seconds ran out."""
        await asyncio.to_thread(self._wait, lambda: len(self.seen) >= count, within)
        return len(self.seen)

    def push(self, *steps: Step) -> None:
        with self._lock:
            self._steps.extend(steps)

    def respond_with(self, responder: Callable[[Seen], Step]) -> None:
        """Answer every request the script does not cover with ``responder(request)``.

        It runs on the server's thread, possibly for many requests at once: keep it pure.
        """
        self._responder = responder

    def _next(self, seen: Seen) -> Step:
        with self._lock:
            if self._steps:
                return self._steps.popleft()
        if self._responder is not None:
            return self._responder(seen)
        if self._default is None:
            return Step(text=None, status=500, body=b'{"error": "the test script ran out"}')
        return self._default

    def __enter__(self) -> ProviderServer:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        future.result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        await self._server.wait_closed()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        with self._changed:
            self._open += 1
            self.connections += 1
            self._changed.notify_all()
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # Shutdown cancels a handler still sleeping on a ``delay``; ending it normally
            # keeps Python 3.11's stream callback from logging the cancellation as an error.
            pass
        finally:
            self._tasks.discard(task)  # type: ignore[arg-type]
            writer.close()
            with contextlib.suppress(BaseException):
                await writer.wait_closed()
            with self._changed:
                self._open -= 1
                self._changed.notify_all()

    @staticmethod
    async def _until_closed(reader: asyncio.StreamReader, seconds: float | None) -> bool:
        """Wait ``seconds`` (None: for ever); True as soon as the client closes instead.

        A client waiting for its response sends nothing, so any read here ends only at the
        client's close (or a reset).
        """
        try:
            async with asyncio.timeout(seconds):
                while await reader.read(65536):
                    pass
        except TimeoutError:
            return False
        except ConnectionError:
            pass
        return True

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        _method, path, _version = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        raw = await reader.readexactly(length) if length else b""
        body = json.loads(raw) if raw else {}
        seen = Seen(path=path, headers=headers, body=body)
        with self._changed:
            self.seen.append(seen)
            self._changed.notify_all()
        async with self._arrivals:
            self._arrivals.notify_all()
        step = self._next(seen)
        if step.after_requests:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(10), self._arrivals:
                    await self._arrivals.wait_for(lambda: len(self.seen) >= step.after_requests)
        if step.after_answers:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(10), self._arrivals:
                    await self._arrivals.wait_for(lambda: self.answers >= step.after_answers)
        if step.delay and await self._until_closed(reader, step.delay):
            self._record_cut(path, 0)
            return False
        if step.raw is not None:
            writer.write(step.raw)
            await writer.drain()
            return False
        if step.drop:
            transport = writer.transport
            sock = writer.get_extra_info("socket")
            if sock is not None:  # an RST rather than a clean FIN
                sock.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                )
            transport.abort()
            return False
        model = str(body.get("model", "unknown"))
        streamed = body.get("stream") is True
        if streamed and step.body is None and step.status == 200:
            return await self._stream(reader, writer, step, model, body, path)
        if step.body is not None:
            payload = step.body
        elif path.rstrip("/").endswith("/messages"):
            payload = json.dumps(anthropic_body(step, model)).encode()
        else:
            payload = json.dumps(openai_body(step, model)).encode()
        try:
            reason = http.HTTPStatus(step.status).phrase
        except ValueError:  # 529, Anthropic's "overloaded"
            reason = "Status"
        response_headers = {"content-type": "application/json", **step.headers}
        response_headers["content-length"] = str(len(payload))
        if step.stop_listening:
            response_headers["connection"] = "close"
            assert self._server is not None
            self._server.close()  # the listening socket only; this connection stays open
        head_out = f"HTTP/1.1 {step.status} {reason}\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in response_headers.items()
        )
        if step.stall_mid_body:
            writer.write(head_out.encode("latin-1") + b"\r\n" + payload[: len(payload) // 2])
            await writer.drain()
            await self._until_closed(reader, None)
            self._record_cut(path, 0)
            return False
        writer.write(head_out.encode("latin-1") + b"\r\n" + payload)
        await writer.drain()
        await self._answered()
        return not step.stop_listening

    async def _answered(self) -> None:
        async with self._arrivals:
            self.answers += 1
            self._arrivals.notify_all()

    async def _stream(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        step: Step,
        model: str,
        body: dict[str, Any],
        path: str,
    ) -> bool:
        """Answer with Server-Sent Events in the request's wire format, each written (chunked)
        as soon as it is made, ``step.pace`` seconds apart; False when the connection ended."""
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        if path.rstrip("/").endswith("/messages"):
            events = [
                f"event: {name}\ndata: {json.dumps(data)}\n\n"
                for name, data in anthropic_events(step, model)
            ]
        else:
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = openai_chunks(step, model, usage=usage)
            events = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
        for sent, event in enumerate(events):
            if sent == step.cut_after:
                writer.transport.abort()
                return False
            if sent == step.stall_after:
                await self._until_closed(reader, None)
                self._record_cut(path, sent)
                raise ConnectionError("the client closed a stalled stream")
            if sent and step.pace and await self._until_closed(reader, step.pace):
                self._record_cut(path, sent)
                return False
            data = event.encode()
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        await self._answered()
        return True


@contextlib.contextmanager
def provider_process(answer: str, *, first: str = "PASS", times: int = 1) -> Iterator[str]:
    """A ``ProviderServer`` in a child process, answering ``first`` to the first request and
    ``answer`` repeated ``times`` times to every later one; yields its URL.

    For tests of the client's event loop: a server thread in the same process would compete
    for the GIL while it writes a large answer, and its time would show as the client's lag.
    """
    import subprocess
    import sys

    child = subprocess.Popen(
        [sys.executable, __file__, first, answer, str(times)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError("the provider process did not start")
        yield url
    finally:
        with child:  # closes its pipes; the child serves until its stdin closes
            if child.stdin is not None:
                child.stdin.close()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()


def _serve_until_stdin_closes(first: str, answer: str, times: int) -> None:
    import sys

    with ProviderServer([Step(text=first)], default=Step(text=answer * times)) as server:
        print(server.url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    import sys

    _serve_until_stdin_closes(sys.argv[1], sys.argv[2], int(sys.argv[3]))
