"""The judge prompt of one judgement: the workspace files it shows (read by the turn's
deadline), then the prompt itself, built on the event loop when that is quick (the tokenizer
loaded off the loop only when the prompt needs it), off it for a long reply."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from replyguard._templates import TemplatesNotFound
from replyguard.context import _tokens as tokens
from replyguard.context._build import build_judge_prompt
from replyguard.context._prompt import JudgePrompt, Redact, RulesSource
from replyguard.runner._request import INLINE_CHARS as INLINE_CHARS  # its home before
from replyguard.runner._request import Budget, Reading, Step, until
from replyguard.telemetry._events import Events, describe_error
from replyguard.types import Reason


async def prompt_of(
    step: Step,
    reply_scans: tokens.Cutter | None,
    reading: Reading | None,
    redact: Redact | None,
    events: Events,
) -> JudgePrompt | tuple[Reason, str]:
    """The judge prompt of ``step`` (the workspace files read first), or why it failed.

    ``reply_scans``: the injection screen's cutter of the reply, whose tokenized ends the
    prompt reuses; ``reading``: the workspace files' read; ``redact``: the host's hook."""
    config, turn, reply = step.profile.config, step.turn, step.reply
    try:
        if reading is not None and not reading.done():
            await _read_by_deadline(step, reading)
        rules, heartbeat = _workspace_texts(step, reading)
    except TimeoutError:
        files = [*config.rules_files, *([config.heartbeat_file] if turn.heartbeat else [])]
        events.warning("workspace_read_late", turn_id=turn.id, files=files)
        late = Budget.at(config.timeout_seconds, step.deadline).reason
        reason = late if late is Reason.LATENCY_BUDGET else Reason.INTERNAL_ERROR
        return reason, "the workspace files were not read in time"
    except Exception as exc:  # a fault of the reader itself, never the files' (logged there)
        events.error("workspace_read_failed", error_class=type(exc).__name__)
        said = describe_error(exc, events.secrets)
        return Reason.INTERNAL_ERROR, f"reading the workspace failed: {said}"
    try:
        text, profile = reply.text, step.profile

        def build(redact: Redact | None = redact) -> JudgePrompt:
            return build_judge_prompt(
                turn,
                text,
                limits=profile.limits,
                rules=rules,
                heartbeat_tasks=heartbeat,
                previous_feedback=step.previous_feedback,
                meta=reply.meta,
                redact=redact,
                rubric=profile.rubric,
                reply_scans=reply_scans,
            )

        if len(text) > INLINE_CHARS:  # off the loop, by the turn's deadline
            async with until(step.left()):
                return await asyncio.to_thread(build)
        if tokens.loaded():  # the usual turn: built at once
            return build()
        return await _build_inline(build, redact, step)
    except TimeoutError:
        return (
            Reason.LATENCY_BUDGET,
            "the turn's deadline passed while the judge prompt was built",
        )
    except TemplatesNotFound as exc:  # a broken install: its message names paths only
        events.error("judge_prompt_failed", error_class=type(exc).__name__, note=str(exc))
        return Reason.INTERNAL_ERROR, f"the judge prompt failed: {exc}"
    except Exception as exc:
        # Only the class: a redactor's own error text may hold the very data it guards.
        events.error("judge_prompt_failed", error_class=type(exc).__name__)
        return Reason.INTERNAL_ERROR, f"the judge prompt failed: {type(exc).__name__}"


async def _read_by_deadline(step: Step, reading: Reading) -> None:
    """Wait for ``reading`` (without cancelling it: a retry may wait again), by the turn's
    deadline and ``timeoutSeconds`` (``TimeoutError``)."""
    budget = Budget.at(step.profile.config.timeout_seconds, step.deadline).seconds
    await asyncio.wait((reading,), timeout=budget)
    if not reading.done():
        raise TimeoutError


def _workspace_texts(step: Step, reading: Reading | None) -> tuple[list[RulesSource], str | None]:
    """The rules sources and the heartbeat tasks, from ``reading`` (done)."""
    turn = step.turn
    rules = turn.rules
    sources: list[RulesSource] = []
    heartbeat = None
    if reading is not None:
        texts = reading.result()
        named = dict(zip(step.profile.config.rules_files, texts, strict=False))
        sources = [RulesSource(name, text) for name, text in named.items() if text]
        heartbeat = texts[-1] if turn.heartbeat and texts else None
    if rules:
        listed = "\n".join([f"- {rule}" for rule in rules])
        sources.append(RulesSource("rules for this turn", listed))
    return sources, heartbeat


async def _build_inline(
    build: Callable[..., JudgePrompt], redact: Redact | None, step: Step
) -> JudgePrompt:
    """``build()`` on the event loop; when it needs the tokenizer before it is loaded, the
    tokenizer is loaded off the loop (by the turn's deadline) and the prompt built again, the
    host's ``redact`` hook not asked twice about one text. A prompt whose size fits the
    budget needs no tokens, so a first turn does not wait for the tokenizer."""
    if tokens.loaded():
        return build()
    seen: dict[str, str] = {}

    def recording(text: str) -> str:
        assert redact is not None
        seen[text] = redacted = redact(text)
        return redacted

    def replaying(text: str) -> str:
        assert redact is not None
        return seen[text] if text in seen else redact(text)

    try:
        with tokens.without_loading():
            return build(redact=recording) if redact is not None else build()
    except tokens.NotLoaded:
        pass
    async with until(step.left()):
        await asyncio.to_thread(tokens.encoding)
    return build(redact=replaying) if redact is not None else build()
