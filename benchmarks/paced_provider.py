"""A loopback judge with a hosted model's latency, for the user-felt wait (``benchmarks/wait.py``).

    python benchmarks/paced_provider.py [--ttft S] [--prefill TOKENS_PER_S] [--decode TOKENS_PER_S]

prints ``PORT <n>`` and serves until stopped. Each answer's first token comes ``ttft`` plus the
prompt's prefill (its tokens, estimated as its JSON body's characters / 4, at ``prefill``
tokens per second) after the request arrived; every later token ``1 / decode`` seconds after
the one before. A streamed request (``"stream": true``) gets its tokens as they are made, in
its wire's real format (OpenAI chunks on ``.../chat/completions``, Anthropic's events on
``.../messages``); any other gets the whole answer in one body once its last token is made.
A client that closes the connection stops the answer there (the server watches for the close
while it waits).

Defaults: a fast judge model as published (docs/benchmarks/wait.md cites them): a time to first
token of 0.4 s (GPT-4o mini, apikeyhealth.com "The Latency Trade-off", 2026), decoding at
60 tokens/s (GPT-4o mini at 59 tokens/s, measured with ``tacho`` and posted at
community.openai.com/t/inference-speed-of-different-models/1307310; Artificial Analysis lists
Claude 3.5 Haiku at 65-68 tokens/s), and prefill at 20,000 tokens/s (20-30 ms per 500 prompt
tokens, nirmalya.net/posts/2026/02/prompt-size-impact-on-llm-response).

What the judge answers: the first path segment picks the verdict (``/pass/``: PASS; ``/fail/``:
FAIL; ``/failfirst/``: FAIL unless the prompt holds the previous attempt's feedback, so a
retried turn then passes; ``/m/``: a panel member, by its model: ``FAIL_MODELS`` fail, and each
decodes at its own published rate, ``MEMBER_DECODE``). The order follows the request: verdict
first when the prompt asks for it (``judgeAnswer: "verdict_first"``), else reasoning first, in
JSON when the request carries a JSON schema (``response_format`` or Anthropic's
``output_format``), else in text; ``REASONING_TOKENS`` tokens of reasoning.

``GET /_stats`` returns ``{"requests", "cut", "generated", "prompt_tokens"}``: requests
answered or cut, answers the client closed before their end, tokens generated in all (an
answer cut off counts the tokens made before the close, streamed or not) and prompt tokens
read.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

from judge_server import JudgeServerProcess

REASONING_TOKENS = 60
FAIL_MODELS = ("gpt-4.1-nano",)
# Output tokens/s of OpenAI's small models, as measured in the community.openai.com post above.
MEMBER_DECODE = {"gpt-4.1-nano": 95.9, "gpt-4.1-mini": 61.7, "gpt-4o-mini": 59.0}
_TOKEN = re.compile(r"\s*[A-Za-z0-9_]+|\s*[^\sA-Za-z0-9_]+|\s+")
_REASONING = (
    "The user asked for the weekly report with its date and three bullet points about "
    "revenue costs and hiring and the reply gives each of them in order with the figures "
    "from the quarter so nothing the request named is missing or promised for later and "
    "the tone fits the conversation and the rules about brevity are kept as well so the "
    "reply may be delivered as it is to the user now without any change at all"
)


@dataclass(frozen=True)
class Pace:
    ttft: float
    prefill: float
    decode: float


def reasoning(tokens: int) -> str:
    vocabulary = _REASONING.split()
    words = [vocabulary[i % len(vocabulary)] for i in range(tokens)]
    return " ".join(words) + "."


def answer_text(passed: bool, verdict_first: bool, structured: bool) -> str:
    """The judge's answer in the order and format the request asked for."""
    why = reasoning(REASONING_TOKENS)
    feedback = "" if passed else "Add the report's date in its first line."
    if structured:
        fields = {
            "verdict": "PASS" if passed else "FAIL",
            "awaitingUser": False,
            "category": None if passed else "incomplete",
            "feedback": feedback,
        }
        ordered = {**fields, "reasoning": why} if verdict_first else {"reasoning": why, **fields}
        return json.dumps(ordered)
    line = "PASS" if passed else f"FAIL [incomplete]: {feedback}"
    return f"{line}\n{why}" if verdict_first else f"{why}\n{line}"


def tokens_of(text: str) -> list[str]:
    return _TOKEN.findall(text)


class _Provider:
    def __init__(self, pace: Pace) -> None:
        self.pace = pace
        self.stats = {"requests": 0, "cut": 0, "generated": 0, "prompt_tokens": 0}

    async def client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Headers and each event go out at once (no Nagle delay on loopback).
        writer.transport.get_extra_info("socket").setsockopt(
            socket.IPPROTO_TCP, socket.TCP_NODELAY, 1
        )
        answering = True
        try:
            while answering:
                answering = await self._one(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        method, path, raw = await _request(reader)
        if method == "GET":
            writer.write(_http("200 OK", "application/json", json.dumps(self.stats).encode()))
            return True
        arrived = time.perf_counter()
        body = json.loads(raw)
        self.stats["requests"] += 1
        prompt_tokens = max(1, len(raw) // 4)
        self.stats["prompt_tokens"] += prompt_tokens
        segments = path.strip("/").split("/")
        model = str(body.get("model", "unknown"))
        tokens = tokens_of(self._text(segments[0], raw, body, model))
        decode = self.pace.decode
        if segments[0] == "m":
            decode = MEMBER_DECODE.get(model.split("/")[-1], decode)
        first_at = arrived + self.pace.ttft + prompt_tokens / self.pace.prefill
        anthropic = path.rstrip("/").endswith("/messages")
        usage = (prompt_tokens, len(tokens))
        if body.get("stream") is True:
            return await self._stream(
                reader, writer, tokens, first_at, decode, model, anthropic, usage
            )
        done_at = first_at + (len(tokens) - 1) / decode
        if await _closed_before(reader, done_at):
            self._cut(first_at, decode, len(tokens))
            return False
        self.stats["generated"] += len(tokens)
        text = "".join(tokens)
        payload = _anthropic(model, text, usage) if anthropic else _openai(model, text, usage)
        writer.write(_http("200 OK", "application/json", payload))
        return True

    def _text(self, mode: str, raw: bytes, body: dict[str, Any], model: str) -> str:
        prompt = raw.decode("utf-8", "replace")
        verdict_first = "asks for the verdict first" in prompt
        structured = "response_format" in body or "output_format" in body
        if mode == "pass":
            passed = True
        elif mode == "failfirst":
            passed = "previous_feedback-" in prompt
        elif mode == "m":
            passed = model.split("/")[-1] not in FAIL_MODELS
        else:
            passed = False
        return answer_text(passed, verdict_first, structured)

    def _cut(self, first_at: float, decode: float, total: int) -> None:
        """An answer the client closed: the tokens made by then count as generated."""
        self.stats["cut"] += 1
        made = int((time.perf_counter() - first_at) * decode) + 1
        self.stats["generated"] += max(0, min(total, made))

    async def _stream(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        tokens: list[str],
        first_at: float,
        decode: float,
        model: str,
        anthropic: bool,
        usage: tuple[int, int],
    ) -> bool:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        events = _anthropic_events if anthropic else _openai_events
        opening, pieces, closing = events(model, tokens, usage)
        _chunk(writer, opening)
        for index, piece in enumerate(pieces):
            if await _closed_before(reader, first_at + index / decode):
                self.stats["cut"] += 1
                self.stats["generated"] += index
                return False
            _chunk(writer, piece)
            await writer.drain()
        self.stats["generated"] += len(pieces)
        _chunk(writer, closing)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


async def _request(reader: asyncio.StreamReader) -> tuple[str, str, bytes]:
    """The next request's method, path and body, read line by line."""
    method, path, _ = (await reader.readline()).decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while (line := (await reader.readline()).decode("latin-1").strip()) != "":
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    return method, path, await reader.readexactly(length) if length else b""


async def _closed_before(reader: asyncio.StreamReader, when: float) -> bool:
    """Wait until ``when`` (``time.perf_counter``); True as soon as the client closes instead
    (a client waiting for its answer sends nothing: a read ends only at its close)."""
    left = when - time.perf_counter()
    if left <= 0:
        return False
    try:
        received = await asyncio.wait_for(reader.read(1), left)
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return not received


def _chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    if data:
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")


def _sse(data: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def _openai_chunk(model: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-paced",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _openai_events(
    model: str, tokens: list[str], usage: tuple[int, int]
) -> tuple[bytes, list[bytes], bytes]:
    pieces = [_sse(_openai_chunk(model, {"content": t}, None)) for t in tokens]
    counts = {"prompt_tokens": usage[0], "completion_tokens": usage[1]}
    counts["total_tokens"] = sum(usage)
    closing = (
        _sse(_openai_chunk(model, {}, "stop"))
        + _sse({**_openai_chunk(model, {}, None), "choices": [], "usage": counts})
        + b"data: [DONE]\n\n"
    )
    return b"", pieces, closing


def _anthropic_events(
    model: str, tokens: list[str], usage: tuple[int, int]
) -> tuple[bytes, list[bytes], bytes]:
    message = {
        "id": "msg_paced",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": 1},
    }
    opening = _sse({"type": "message_start", "message": message}, "message_start") + _sse(
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        "content_block_start",
    )
    pieces = [
        _sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}},
            "content_block_delta",
        )
        for t in tokens
    ]
    closing = (
        _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
        + _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": usage[1]},
            },
            "message_delta",
        )
        + _sse({"type": "message_stop"}, "message_stop")
    )
    return opening, pieces, closing


def _openai(model: str, text: str, usage: tuple[int, int]) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-paced",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": sum(usage),
            },
        }
    ).encode()


def _anthropic(model: str, text: str, usage: tuple[int, int]) -> bytes:
    return json.dumps(
        {
            "id": "msg_paced",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
        }
    ).encode()


def _http(status: str, kind: str, payload: bytes) -> bytes:
    head = f"HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {len(payload)}\r\n\r\n"
    return head.encode("latin-1") + payload


class PacedProviderProcess(JudgeServerProcess):
    """The paced provider in a child process (its own interpreter, its own GIL)."""

    def __init__(self, pace: Pace) -> None:
        super().__init__()
        self.pace = pace

    def command(self) -> list[str]:
        pace = self.pace
        return [
            sys.executable, os.path.abspath(__file__), "--ttft", str(pace.ttft),
            "--prefill", str(pace.prefill), "--decode", str(pace.decode),
        ]  # fmt: skip


def pace_arguments(parser: argparse.ArgumentParser) -> None:
    """The pace's command-line options (shared with ``wait.py``)."""
    parser.add_argument("--ttft", type=float, default=0.4, help="seconds to the first token")
    parser.add_argument("--prefill", type=float, default=20_000.0, help="prompt tokens/s")
    parser.add_argument("--decode", type=float, default=60.0, help="output tokens/s")


async def _main(pace: Pace) -> None:
    provider = _Provider(pace)
    server = await asyncio.start_server(provider.client, "127.0.0.1", 0, backlog=1024)
    print("PORT", server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    pace_arguments(parser)
    options = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(Pace(options.ttft, options.prefill, options.decode)))
