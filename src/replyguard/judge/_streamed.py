"""The verdict-first answer (``judgeAnswer: "verdict_first"``): streamed, read as it arrives,
and ended as soon as it says PASS.

The judge is asked to put its verdict first (``verdict_first_messages``; with a JSON schema,
``verdict`` leads the object, and its value ``"PASS [awaiting_user]"`` carries the
awaiting-the-user mark: ``_protocol.verdict_format``). Its answer is streamed; each piece is
added to the text read so far, and:

- once that text opens with a PASS (a JSON object whose first key's value is read whole,
  ``{"verdict": "PASS"`` and its closing quote, or a first line that is a PASS verdict line,
  its newline seen), the stream is closed at once: no reasoning is waited for or paid, and the
  answer is that PASS (``early_pass``), its cost that of what was received (the prompt's
  tokens and the text received, counted by litellm off the event loop);
- a FAIL, or an answer that opens otherwise (reasoning first, a quote, a fence, keys in
  another order), is read to its end and parsed whole by ``parse_verdict``, as a
  reasoning-first answer is: its guarantees (quoted verdicts never count, a FAIL stands) hold.
  A text answer whose first line is its verdict line is stored with that line last, so the
  lines after it are read as the reasoning, not as the feedback; a JSON verdict ``"PASS
  [awaiting_user]"`` is stored as ``"PASS"`` with ``"awaitingUser": true`` (``as_read``).

Every fault fails like any failed call (the next model, then fail open): a stream that
ends without its finish (cut mid-way, or closed by the provider), a chunk litellm cannot read
(a garbled stream), the model's share of the deadline (the stream is closed). An answer past
``MAX_ANSWER_BYTES`` is closed there and is unreadable.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from typing import Any

from replyguard.judge._answer_cap import MAX_ANSWER_BYTES
from replyguard.judge._protocol import AWAITING_PASS, JudgeReply
from replyguard.judge._verdict import verdict_line

VERDICT_FIRST_SYSTEM = (
    "\n\nAnswer order for this review (it replaces the order given above): begin your answer "
    "with the verdict, then give your reasoning after it. In text, the first line of your "
    "answer is the verdict line (PASS, PASS [awaiting_user], or FAIL [category]: feedback) "
    "and the reasoning follows on the next lines. In JSON, give the keys in the schema's "
    "order: verdict first."
)
"""Added to the rubric (the system message) when the verdict comes first: the same on every
call, so providers still cache it."""
VERDICT_FIRST_REMINDER = (
    "\nThis review asks for the verdict first: begin with the verdict line, then the reasoning."
)
"""Added after the prompt's closing reminder (the user message)."""

# How far into the answer a leading PASS is looked for (a verdict line or the JSON object's
# first two keys take a few dozen characters).
_EARLY_CHARS = 2_000
_JSON_VERDICT = re.compile(r'\s*\{\s*"verdict"\s*:\s*"([^"\\]*)"', re.IGNORECASE)


def verdict_first_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The prompt's ``[system, user]`` messages asking for the verdict first (new dicts)."""
    out = [dict(message) for message in messages]
    for message, note in zip(out, (VERDICT_FIRST_SYSTEM, VERDICT_FIRST_REMINDER), strict=False):
        if isinstance(message.get("content"), str):
            message["content"] += note
    return out


def early_pass(text: str) -> str | None:
    """The PASS that ``text``, the start of a verdict-first answer, already decides, as a
    complete answer ``parse_verdict`` reads the same way; None while it decides nothing yet,
    or decides anything but a PASS (a FAIL is read to its end)."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        match = _JSON_VERDICT.match(stripped)
        value = match.group(1).strip().upper() if match is not None else None
        if value not in ("PASS", AWAITING_PASS.upper()):
            return None
        return json.dumps({"verdict": "PASS", "awaitingUser": value != "PASS"})
    end = stripped.find("\n")
    if end < 0:
        return None
    line = stripped[:end].strip()
    read = verdict_line(line)
    return line if read is not None and read[0] else None


def as_read(text: str) -> str:
    """A verdict-first answer as ``parse_verdict`` reads it: a text answer whose first line is
    its verdict line, with that line moved to the end (the lines after it are its reasoning);
    a JSON object whose verdict is ``"PASS [awaiting_user]"``, as ``"PASS"`` with
    ``"awaitingUser": true``; any other answer as it is."""
    stripped = text.strip()
    if stripped.startswith("{"):
        return _awaiting_read(stripped) or text
    if "\n" not in stripped:
        return text
    first, rest = stripped.split("\n", 1)
    if verdict_line(first) is None or not rest.strip():
        return text
    return f"{rest.strip()}\n\n{first.strip()}"


def _awaiting_read(text: str) -> str | None:
    """The JSON verdict ``text`` with ``"PASS [awaiting_user]"`` read as a PASS awaiting the
    user; None when it holds no such verdict (or is no JSON object)."""
    try:
        fields = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(fields, dict):
        return None
    verdict = fields.get("verdict")
    if not isinstance(verdict, str) or verdict.strip().upper() != AWAITING_PASS.upper():
        return None
    return json.dumps({**fields, "verdict": "PASS", "awaitingUser": True})


class StreamCut(ConnectionError):
    """The judge's streamed answer ended before its finish."""


async def read_stream(
    stream: Any,
    model: str,
    messages: list[dict[str, Any]],
    unpriced: set[str],
    received: list[str] | None = None,
) -> JudgeReply:
    """The answer of a verdict-first ``stream`` (litellm's stream of chunks), closed at a
    leading PASS, else read to its end (see the module doc). Closes the stream whatever
    happens; raises ``StreamCut`` when it ended before its finish. ``received``: where the
    text pieces are gathered as they arrive (what a cut stream is charged for)."""
    parts: list[str] = received if received is not None else []
    size, finished, usage, served, extra = 0, False, None, model, ""
    try:
        async for chunk in stream:
            served = getattr(chunk, "model", None) or served
            usage = getattr(chunk, "usage", None) or usage
            choices = getattr(chunk, "choices", None) or ()
            if not choices:
                continue
            delta = getattr(choices[0], "delta", None)
            piece = getattr(delta, "content", None)
            if getattr(delta, "tool_calls", None) and not extra:
                extra = "the judge answered with tool calls only"
            finished = finished or bool(getattr(choices[0], "finish_reason", None))
            if not isinstance(piece, str) or not piece:
                continue
            parts.append(piece)
            size += len(piece)
            if size > MAX_ANSWER_BYTES:
                await stream.aclose()
                return await _reply("".join(parts), served, messages, None, unpriced)
            if size <= _EARLY_CHARS and (decided := early_pass("".join(parts))) is not None:
                said = "".join(parts)
                await stream.aclose()  # before the cost is counted: nothing more is read
                return await _reply(decided, served, messages, None, unpriced, received=said)
    finally:
        await stream.aclose()
    if not finished:
        raise StreamCut("the judge's streamed answer ended before its finish")
    text = "".join(parts)
    note = None if text.strip() else extra or "the judge's message had no content"
    return await _reply(as_read(text), served, messages, usage, unpriced, note=note)


async def _reply(
    text: str,
    model: str,
    messages: list[dict[str, Any]],
    usage: Any,
    unpriced: set[str],
    *,
    received: str | None = None,
    note: str | None = None,
) -> JudgeReply:
    """The answer with its tokens (the provider's usage, else counted by litellm in a worker
    thread, where a first use may load a tokenizer: the prompt, and the text ``received``) and
    cost (litellm's price map; 0 for a model it cannot price)."""
    prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    litellm = sys.modules.get("litellm")
    if usage is None and litellm is not None:
        said = text if received is None else received
        prompt_tokens, completion_tokens = await asyncio.to_thread(
            _counted, litellm, model, messages, said
        )
    cost = 0.0
    if litellm is not None and model not in unpriced:
        try:
            paid = litellm.cost_per_token(
                model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
            )
            cost = float(sum(paid))
        except Exception:  # not in the price map: unknown, not an error
            unpriced.add(model)
    return JudgeReply(
        text=text,
        model=model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost_usd=cost,
        note=note,
    )


def _counted(
    litellm: Any, model: str, messages: list[dict[str, Any]], said: str
) -> tuple[int, int]:
    """The prompt's tokens and those of ``said``, as litellm counts them for ``model`` (0 and 0
    when it cannot)."""
    try:
        prompt = litellm.token_counter(model=model, messages=messages)
        answer = litellm.token_counter(model=model, text=said, count_response_tokens=True)
        return int(prompt), int(answer)
    except Exception:  # a tokenizer litellm cannot load: the tokens stay unknown
        return 0, 0
