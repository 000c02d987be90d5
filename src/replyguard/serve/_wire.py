"""The OpenAI chat-completions wire and a verified turn: a request as a ``Turn`` and the
client's parameters, an upstream answer as a ``Reply``, and the answer the client gets (a
``chat.completion``, its ``chat.completion.chunk`` events, or an OpenAI-shaped error).

The turn's user message is the last ``user`` message, the messages before and after it its
history (an agent loop's trailing tool calls and results included), and ``system`` (and
``developer``) messages its rules. The agent call itself receives the client's messages whole.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from replyguard.types import Outcome, Reply, RunMeta, ToolCallRecord, Turn, Verdict

__all__ = [
    "ChatRequest",
    "Recorded",
    "WireError",
    "answer_chunks",
    "completion_answer",
    "error_body",
    "parse_chat",
    "replyguard_object",
    "turn_of",
]

_RULE_ROLES = frozenset({"system", "developer"})
_OWN_PARAMS = frozenset({"model", "messages", "stream", "stream_options"})
_FORBIDDEN_PARAMS = frozenset({"api_key", "api_base", "base_url", "extra_headers", "headers"})
"""Parameters a client may not set: the upstream endpoint and key are the operator's."""


class WireError(Exception):
    """A request that cannot be served: the HTTP ``status``, a message and the field."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param


def error_body(
    message: str,
    kind: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    """An OpenAI-shaped error body."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def parse_json_object(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object; ``WireError`` (400) otherwise."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise WireError(400, "the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise WireError(400, "the request body must be a JSON object")
    return data


@dataclass(frozen=True)
class ChatRequest:
    """One ``POST /v1/chat/completions``: the model, the messages, the rest passed on."""

    model: str
    messages: list[dict[str, Any]]
    params: dict[str, Any]
    """Every other parameter (``temperature``, ``max_tokens``, ``tools``, ...), as sent."""
    stream: bool = False
    include_usage: bool = False
    """A streamed answer ends with a usage chunk (``stream_options.include_usage``)."""


def parse_chat(body: bytes) -> ChatRequest:
    """The request, checked; ``WireError`` (400) naming the field that is wrong."""
    data = parse_json_object(body)
    model = data.get("model")
    if not isinstance(model, str) or not model.strip():
        raise WireError(400, "'model' is required: the agent's model name", "model")
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise WireError(400, "'messages' is required: a non-empty list of messages", "messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise WireError(
                400, f"messages[{index}] must be an object with a 'role'", f"messages[{index}]"
            )
    if not any(m["role"] == "user" for m in messages):
        raise WireError(400, "'messages' must hold a user message", "messages")
    forbidden = sorted(_FORBIDDEN_PARAMS & data.keys())
    if forbidden:
        raise WireError(400, f"'{forbidden[0]}' is set by the server, not the client", forbidden[0])
    if data.get("n") not in (None, 1):
        raise WireError(400, "'n' must be 1: one reply is verified per request", "n")
    stream = data.get("stream", False)
    if not isinstance(stream, bool):
        raise WireError(400, "'stream' must be true or false", "stream")
    options = data.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    params = {k: v for k, v in data.items() if k not in _OWN_PARAMS}
    return ChatRequest(model, messages, params, stream, include_usage)


def content_text(content: Any) -> str:
    """A message's content as text (text parts joined; other parts left out)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def tool_ledger(messages: list[dict[str, Any]]) -> tuple[ToolCallRecord, ...]:
    """The tool calls made since the last user message (an agent loop's trailing
    ``assistant`` tool calls and their ``tool`` results), each once, as ``RunMeta`` takes them."""
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    results = {
        m.get("tool_call_id"): content_text(m.get("content"))
        for m in messages[last_user + 1 :]
        if m["role"] == "tool"
    }
    records: list[ToolCallRecord] = []
    for message in messages[last_user + 1 :]:
        for call in message.get("tool_calls") or () if message["role"] == "assistant" else ():
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                continue
            arguments = function.get("arguments")
            with contextlib.suppress(ValueError):
                arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
            answered = call.get("id") in results
            records.append(
                ToolCallRecord(name=function["name"], arguments=arguments, succeeded=answered)
            )
    return tuple(records)


def turn_of(request: ChatRequest) -> Turn:
    """The verified turn of a request (the judge's view of it)."""
    messages = request.messages
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    rules = [content_text(m.get("content")) for m in messages if m["role"] in _RULE_ROLES]
    history = [m for i, m in enumerate(messages) if i != last_user and m["role"] not in _RULE_ROLES]
    return Turn(
        user_message=content_text(messages[last_user].get("content")),
        history=history,
        rules=[rule for rule in rules if rule.strip()],
        agent_model=request.model,
    )


@dataclass
class Recorded:
    """One upstream answer of a turn: its message, finish reason, usage and identity."""

    message: dict[str, Any]
    finish_reason: str | None
    usage: dict[str, Any] | None
    head: dict[str, Any] = field(default_factory=dict)
    """The answer's ``id``, ``created``, ``model``, ``system_fingerprint``."""
    cost_usd: float | None = None

    @property
    def text(self) -> str:
        return content_text(self.message.get("content"))

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        calls = self.message.get("tool_calls")
        return list(calls) if isinstance(calls, list) else []

    def reply(self, ledger: tuple[ToolCallRecord, ...]) -> Reply:
        """The ``Reply`` the verifier judges (tool calls pending: the pre-check skips it)."""
        meta = RunMeta(
            stop_reason=self.finish_reason,
            pending_tool_calls=len(self.tool_calls),
            tool_calls=ledger,
            usage=self.usage,
            cost_usd=self.cost_usd,
        )
        return Reply(text=self.text, meta=meta)


_HEAD_KEYS = ("id", "created", "model", "system_fingerprint")
_MESSAGE_KEYS = ("role", "content", "tool_calls", "refusal", "function_call", "annotations")


def record_completion(response: Mapping[str, Any], cost: float | None) -> Recorded:
    """An upstream ``chat.completion`` as a ``Recorded`` (no choice: an empty message)."""
    choices = response.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    found = choice.get("message")
    raw: dict[str, Any] = found if isinstance(found, dict) else {}
    message = {k: raw[k] for k in _MESSAGE_KEYS if raw.get(k) not in (None, [])}
    message.setdefault("role", "assistant")
    message.setdefault("content", None)
    usage = response.get("usage") if isinstance(response.get("usage"), dict) else None
    head = {k: response[k] for k in _HEAD_KEYS if response.get(k) is not None}
    return Recorded(message, choice.get("finish_reason"), usage, head, cost)


def summed_usage(records: list[Recorded]) -> dict[str, int] | None:
    """Token usage over every upstream attempt (None when none reported any)."""
    usages = [r.usage for r in records if r.usage]
    if not usages:
        return None
    names = ("prompt_tokens", "completion_tokens", "total_tokens")
    return {name: sum(int(u.get(name) or 0) for u in usages) for name in names}


def _verdict(verdict: Verdict | None) -> dict[str, Any] | None:
    if verdict is None:
        return None
    category = str(verdict.category) if verdict.category is not None else None
    return {"passed": verdict.passed, "category": category, "feedback": verdict.feedback}


def replyguard_object(outcome: Outcome) -> dict[str, Any]:
    """The answer's ``replyguard`` object: what was decided about the turn."""
    verdicts = outcome.verdicts
    return {
        "status": outcome.status.value,
        "reason": outcome.reason.value if outcome.reason is not None else None,
        "attempts": len(outcome.attempts),
        "verdict": _verdict(verdicts[-1] if verdicts else None),
    }


def _delivered_message(delivered: Recorded, response: str) -> dict[str, Any]:
    message = dict(delivered.message)
    if delivered.tool_calls:  # returned as it is, unjudged
        return message
    message["content"] = response
    return message


def completion_answer(
    delivered: Recorded, records: list[Recorded], outcome: Outcome, guard: dict[str, Any]
) -> dict[str, Any]:
    """The client's ``chat.completion``: the delivered text, usage over every attempt."""
    head = {"id": "chatcmpl-replyguard", "created": int(time.time()), **delivered.head}
    return {
        **head,
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": _delivered_message(delivered, outcome.response),
                "finish_reason": delivered.finish_reason or "stop",
                "logprobs": None,
            }
        ],
        "usage": summed_usage(records),
        "replyguard": guard,
    }


def answer_chunks(
    answer: dict[str, Any], pieces: list[str], *, include_usage: bool
) -> Iterator[dict[str, Any]]:
    """A ``chat.completion`` as the ``chat.completion.chunk`` objects of a stream: the role,
    the text in ``pieces`` (as the agent wrote it), tool calls, the finish reason, and a last
    chunk without choices carrying the ``replyguard`` object (and ``usage`` when asked)."""
    head: dict[str, Any] = {k: answer[k] for k in ("id", "created", "model") if k in answer}
    head["object"] = "chat.completion.chunk"
    choice = answer["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    for piece in pieces:
        if piece:
            yield chunk({"content": piece})
    calls = message.get("tool_calls") or []
    if calls:
        yield chunk({"tool_calls": [{"index": i, **call} for i, call in enumerate(calls)]})
    yield chunk({}, choice["finish_reason"])
    last: dict[str, Any] = {**head, "choices": [], "replyguard": answer["replyguard"]}
    if include_usage:
        last["usage"] = answer["usage"]
    yield last
