"""Judging every record of an eval dataset, live or from recorded judge outputs.

Each record goes the way ``replyguard verify`` goes (pre-checks, checks, judge; no triggers).
Under ``replay`` the judge is a ``ReplayJudge`` answering with the record's ``judgeOutput``
through the ``Judge`` protocol, so parsing, checks and fail-open are the real ones and nothing
leaves the machine. Live, litellm and the tokenizer are loaded first (so a record's latency
measures its judging, not the cold start), then at most ``concurrency`` records are judged at
once. Each record is judged in its run kind's mode.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

from replyguard._records import EvalRecord
from replyguard.config._schema import VerifierConfig
from replyguard.context._prompt import JudgePrompt
from replyguard.evaluation.stats import FAIL, PASS, UNCATEGORISED
from replyguard.judge._protocol import JudgeReply
from replyguard.runner._judgement import Judgement, judge_one
from replyguard.runner._verifier import Verifier
from replyguard.types import Reason

REPLAY_MODEL = "replay"
_RECORDED: ContextVar[str] = ContextVar("replyguard_recorded_judge_output")


class ReplayJudge:
    """A ``Judge`` answering with the recorded output of the record being judged."""

    async def judge(self, prompt: JudgePrompt, *, time_left: float) -> JudgeReply:
        """The recorded text of the current record (set by ``judge_record``)."""
        return JudgeReply(text=_RECORDED.get(), model=REPLAY_MODEL)


@dataclass(frozen=True)
class RecordResult:
    """What was decided about one record."""

    line: int
    record: EvalRecord
    judgement: Judgement

    @property
    def judged(self) -> str:
        """``FAIL`` when the judge (or a check) failed the reply; any other status is a PASS."""
        return FAIL if self.judgement.judged_fail else PASS

    @property
    def judged_category(self) -> str | None:
        """The judged FAIL's category (``uncategorised`` without a known one)."""
        verdict = self.judgement.verdict
        if not self.judgement.judged_fail or verdict is None:
            return None
        return str(verdict.category) if verdict.category is not None else UNCATEGORISED

    @property
    def labelled_category(self) -> str | None:
        """The labelled FAIL's category (``uncategorised`` without one)."""
        if self.record.label != FAIL:
            return None
        category = self.record.label_category
        return str(category) if category is not None else UNCATEGORISED

    @property
    def awaiting_user(self) -> bool:
        """The judge passed the reply as one that rightly waits for the user."""
        return self.judgement.awaiting_user

    @property
    def unreadable(self) -> bool:
        """The judge's text held no verdict (counted as a fail-open PASS)."""
        verdict = self.judgement.verdict
        return verdict is not None and verdict.fail_open_reason == Reason.UNREADABLE_VERDICT


Progress = Callable[[int, int], None]
"""Called with ``(done, total)`` after each record."""


async def judge_records(
    records: Sequence[tuple[int, EvalRecord]],
    config: VerifierConfig,
    *,
    replay: bool,
    concurrency: int,
    progress: Progress,
) -> list[RecordResult]:
    """Judge every record (in dataset order in the result); never raises for the judge (a
    refused judge/agent pairing raises ``CrossFamilyError`` before any record is judged)."""
    # litellm and the tokenizer are loaded only if the judge is called.
    verifier = Verifier(config, judge=ReplayJudge() if replay else None, preload=False)
    gate = asyncio.Semaphore(concurrency)
    done = 0

    async def judge_record(line: int, record: EvalRecord) -> RecordResult:
        nonlocal done
        async with gate:
            _RECORDED.set(record.judge_output or "")
            judgement = await judge_one(verifier, record.turn(), record.agent_reply())
        done += 1
        progress(done, len(records))
        return RecordResult(line, record, judgement)

    try:
        if not replay:  # so a record's latency measures its judging, not the cold start
            with contextlib.suppress(Exception):  # met again by the judgement, which fails open
                await verifier.warmup()
        return list(await asyncio.gather(*(judge_record(n, r) for n, r in records)))
    finally:
        await verifier.aclose()
