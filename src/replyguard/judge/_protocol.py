"""What the runner needs of a judge: the ``Judge`` protocol and ``JudgeReply``, what one
judgement returned (its verdict parsed once, off the event loop when long), and
``VERDICT_FORMAT``, the JSON schema asked of a model that supports one."""

from __future__ import annotations

import asyncio
import copy
import functools
from collections.abc import Collection
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from replyguard._frozen import assembled_from
from replyguard.context._prompt import JudgePrompt
from replyguard.judge._answer_cap import MAX_ANSWER_BYTES
from replyguard.judge._verdict import parse_verdict, plain_pass_fields
from replyguard.types import FailCategory, Reason, Verdict

# A judge text longer than this is parsed off the event loop (a verdict is a few hundred).
_INLINE_PARSE_CHARS = 20_000
VERDICT_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "verdict",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {  # reasoning first: the model reasons before it decides
                "reasoning": {
                    "type": "string",
                    "description": "At most a few sentences of reasoning.",
                },
                "verdict": {"type": "string", "enum": ["PASS", "FAIL"]},
                "category": {
                    "anyOf": [
                        {"type": "string", "enum": [category.value for category in FailCategory]},
                        {"type": "null"},
                    ],
                    "description": "The failure's category; null for PASS.",
                },
                "feedback": {
                    "type": "string",
                    "description": "What the assistant must fix, in one or two sentences; "
                    "empty for PASS.",
                },
                "awaitingUser": {
                    "type": "boolean",
                    "description": "true only on a PASS whose reply rightly waits for the "
                    "user (one necessary clarifying question, or a justified refusal that "
                    "says why); false otherwise.",
                },
            },
            "required": ["reasoning", "verdict", "category", "feedback", "awaitingUser"],
            "additionalProperties": False,
        },
    },
}
"""The ``response_format`` sent to a judge model that supports JSON schemas."""


# The verdict-first order of the schema's keys (``judgeAnswer: "verdict_first"``): the verdict
# first, the reasoning last. Its verdict carries the awaiting-the-user mark itself (one value
# decides a PASS, a few tokens in); ``judge/_streamed`` reads it back as ``awaitingUser``.
_VERDICT_FIRST = ("verdict", "category", "feedback", "reasoning")
AWAITING_PASS = "PASS [awaiting_user]"
"""The verdict-first schema's verdict of a PASS that rightly waits for the user."""


@functools.cache
def verdict_format(categories: tuple[str, ...] = (), verdict_first: bool = False) -> dict[str, Any]:
    """``VERDICT_FORMAT`` whose ``category`` also accepts the custom ``categories``, its keys
    in the verdict-first order when asked (shared: never mutate it)."""
    if not categories and not verdict_first:
        return VERDICT_FORMAT
    extended = copy.deepcopy(VERDICT_FORMAT)
    schema = extended["json_schema"]["schema"]
    enum = schema["properties"]["category"]["anyOf"][0]["enum"]
    enum.extend(name for name in categories if name not in enum)
    if verdict_first:
        properties = schema["properties"]
        properties["verdict"] = {"type": "string", "enum": ["PASS", AWAITING_PASS, "FAIL"]}
        schema["properties"] = {key: properties[key] for key in _VERDICT_FIRST}
        schema["required"] = list(_VERDICT_FIRST)
    return extended


class JudgeReply(BaseModel):
    """What one judgement returned (validated: a custom judge cannot smuggle in bad types)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    text: str
    """The judge's raw text ("" when the answer carried none)."""
    model: str
    """The model that answered."""
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    cost_usd: float = Field(default=0.0, ge=0)
    note: str | None = None
    """Why the text is empty, when the provider said (a refusal, tool calls only)."""

    @property
    def verdict(self) -> Verdict:
        """The verdict the text reads as, parsed once however often it is asked for (kept in
        the instance's ``__dict__``, as ``functools.cached_property`` keeps it, without its
        lock: two threads asking at once parse the same text alike).

        A text longer than any answer the byte cap lets through (``MAX_ANSWER_BYTES``) is
        unreadable unparsed, whatever judge returned it.

        Kept with the text it was read from: a copy of the answer with its text changed
        (``model_copy(update={"text": ...})`` copies the ``__dict__``) reads its own text.
        """
        known = _kept_verdict(self)
        if known is None:
            known = self._verdict()
            self.__dict__["verdict_of"] = self.text
            self.__dict__["verdict"] = known
        return known

    def _verdict(self) -> Verdict:
        if len(self.text) > MAX_ANSWER_BYTES:
            return Verdict(
                passed=True,
                readable=False,
                error=f"the judge's answer is {len(self.text)} characters, over the "
                f"{MAX_ANSWER_BYTES} a verdict may take",
                fail_open_reason=Reason.UNREADABLE_VERDICT,
            )
        kept = _kept_plain_pass(self)
        if kept is not None:  # a plain PASS (``readable``)
            return assembled_from(Verdict, kept[1])
        return parse_verdict(self.text)

    async def parsed(self, categories: Collection[str] = ()) -> Verdict:
        """``verdict``, parsed in a worker thread when the text is long, so the event loop
        never waits on it (the caller's deadline bounds the wait).

        ``categories``: custom FAIL categories to accept (a FAIL without a built-in category
        is read again with them: they change its category, never its readability).
        """
        if _kept_verdict(self) is None and len(self.text) > _INLINE_PARSE_CHARS:
            verdict = await asyncio.to_thread(lambda: self.verdict)
        else:
            verdict = self.verdict
        if not categories or verdict.passed or verdict.category is not None:
            return verdict
        if len(self.text) > _INLINE_PARSE_CHARS:
            return await asyncio.to_thread(parse_verdict, self.text, categories)
        return parse_verdict(self.text, categories)


def plain_pass(answer: JudgeReply) -> dict[str, Any] | None:
    """The fields of the verdict ``answer.parsed()`` gives (``Verdict(**fields)``), when that
    is a plain PASS (``parse_verdict``'s common answer) read on the event loop and not read
    yet: a caller adding fields of its own makes the one verdict of them all. None for any
    other answer, one read already (then ``parsed`` gives what was read), or a host's
    subclass of ``JudgeReply`` (its own ``parsed`` or ``verdict`` is asked).

    Fields ``readable`` kept on the answer are not read again: the caller gets a copy."""
    if type(answer) is not JudgeReply or _kept_verdict(answer) is not None:
        return None
    if len(answer.text) > _INLINE_PARSE_CHARS:
        return None
    kept = _kept_plain_pass(answer)
    if kept is None:
        return plain_pass_fields(answer.text)
    return dict(kept[1])


def _kept_verdict(answer: JudgeReply) -> Verdict | None:
    """The verdict kept on ``answer`` (``verdict``), when it was read from its text; None when
    none was (nor for a copy of the answer with its text changed)."""
    known: Verdict | None = answer.__dict__.get("verdict")
    return known if known is not None and answer.__dict__.get("verdict_of") is answer.text else None


def _kept_plain_pass(answer: JudgeReply) -> tuple[str, dict[str, Any]] | None:
    """What ``readable`` kept of ``answer``'s text (the text, and its plain PASS's fields);
    None when it kept nothing (nor for a copy of the answer with its text changed)."""
    kept: tuple[str, dict[str, Any]] | None = answer.__dict__.get("plain_pass")
    return kept if kept is not None and kept[0] is answer.text else None


async def readable(answer: JudgeReply) -> bool:
    """Whether ``answer`` reads as a verdict (``answer.parsed().readable``). A plain PASS
    (``plain_pass``) is told so without making its verdict, nor keeping one on the answer:
    the runner then makes the turn's verdict once, of the parse's fields and its own
    (``_judging._read``). Any other answer is parsed, and its verdict kept, as ``parsed``
    does. A plain PASS's fields are kept on the answer (as its verdict is, in its
    ``__dict__``), so that the runner's ``plain_pass`` does not read them again, and its
    ``verdict``, if asked for, is made of them."""
    fields = plain_pass(answer)
    if fields is not None:
        answer.__dict__["plain_pass"] = (answer.text, fields)
        return True
    return (await answer.parsed()).readable


class Judge(Protocol):
    """Anything that can judge a prompt within ``time_left`` seconds."""

    async def judge(self, prompt: JudgePrompt, *, time_left: float) -> JudgeReply:
        """Return the judge's answer, or raise; the runner fails open on any exception."""
        ...
