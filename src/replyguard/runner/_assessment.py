"""One verdict on one reply: the checks and the injection screen, then (per
``judgeAfterChecks``) the judgement (``replyguard.runner._judging``), merged.

``Assessor`` holds what every turn shares (the checks, the workspace, the events); the turn's
``Step`` and ``Profile`` (``replyguard.runner._request``) say what this reply is judged
under. It never raises for the verifier's own trouble: a failed step is a fail-open PASS
verdict carrying its ``fail_open_reason``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from replyguard._workspace import Workspace
from replyguard.checks.base import Check
from replyguard.checks.running import checks_verdict, decisive_pass, merged_feedback, run_checks
from replyguard.context import _tokens as tokens
from replyguard.context._fitting import view_of
from replyguard.context._injection import injection_feedback, suspected_injection
from replyguard.context._prompt import ContextLimits, Redact
from replyguard.judge._limiter import ConcurrencyLimiter
from replyguard.runner._request import (
    INLINE_CHARS,
    Budget,
    Profile,
    Reading,
    Step,
    bounded,
    build_profiles,
)
from replyguard.telemetry._events import Events
from replyguard.telemetry._tracing import NO_TRACING, Tracing
from replyguard.types import CheckResult, FailCategory, Reason, Turn, Verdict, replaced

if TYPE_CHECKING:
    from replyguard.runner._judging import Judgements  # loaded on the first judgement
    from replyguard.state import SharedState  # loaded when a config asks for shared state

__all__ = ["Assessor", "Profile", "Reading", "Step", "build_profiles"]


def _retrieved(reading: Reading) -> None:
    """Takes the outcome of a reading nobody awaited, so none is logged as never retrieved."""
    if not reading.cancelled():
        reading.exception()


class Assessor:
    """Checks, the screen and the judgement of one reply; shared by every turn of a verifier."""

    def __init__(
        self,
        checks: Sequence[Check],
        workspace: Workspace,
        events: Events,
        limiter: ConcurrencyLimiter | None,
        redact: Redact | None = None,
        tracing: Tracing = NO_TRACING,
        state: SharedState | None = None,
    ) -> None:
        """``state``: the spend limits and shared breaker (None: neither is configured)."""
        self.checks = tuple(checks)
        self._tracing = tracing
        self._workspace = workspace
        self._events = events
        self._judge_side = (events, limiter, redact, state)
        self._judgements: Judgements | None = None

    def _judging(self) -> Judgements:
        """The judge side of an assessment (``runner._judging``: the prompt build, the judge
        call, their report), loaded by the first reply that the checks do not decide: a
        turn they decide (a command's one judgement) never imports it."""
        if self._judgements is None:
            from replyguard.runner._judging import Judgements

            self._judgements = Judgements(*self._judge_side)
        return self._judgements

    def read_workspace(self, profile: Profile, turn: Turn) -> Reading | None:
        """The workspace files the judge prompt may show (the rules files, and a heartbeat
        turn's task file), read on the workspace's own threads from now on; None when there
        is nothing to read. Started as early as the turn knows it will be judged (before the
        agent's call when that does not depend on the reply), the read overlaps the agent and
        the checks; a reading nobody waits for ends on its own."""
        names = profile.rules_files
        if names is None:
            return None
        if turn.heartbeat:
            names = (*names, profile.config.heartbeat_file)
        elif not names:
            return None  # nothing to read
        reading = self._workspace.read_later(names)
        if reading is not None:
            reading.add_done_callback(_retrieved)
        return reading

    async def assess(self, step: Step) -> tuple[Verdict, tuple[CheckResult, ...]]:
        """Checks, then (per ``judgeAfterChecks``) the judge: one verdict on one reply.

        Every step is bounded by the turn's deadline too.
        """
        turn, reply, config = step.turn, step.reply, step.profile.config
        # Nothing made for the checks or the screen stays alive through the judge's wait.
        started = time.perf_counter()
        time_limit = Budget.at(config.timeout_seconds, step.deadline).seconds
        reading = step.reading
        if reading is None and not step.read:
            reading = self.read_workspace(step.profile, turn)
        try:
            results = await bounded(
                run_checks(
                    self.checks,
                    turn,
                    reply,
                    time_limit=time_limit,
                    events=self._events,
                    tracing=self._tracing,
                ),
                step.left(),
            )
        except TimeoutError:
            error = "the turn's deadline passed during the checks"
            return _late(error, started), ()
        self._report_checks(turn, step.attempt, results)
        try:
            suspicion, scans = await bounded(
                _suspicion(reply.text, step.profile.limits), step.left()
            )
        except TimeoutError:
            error = "the turn's deadline passed during the injection scan"
            return _late(error, started), results
        if suspicion:
            self._events.warning(
                "suspected_injection", turn_id=turn.id, attempt=step.attempt, reasons=suspicion
            )
            if config.on_suspected_injection == "fail":
                failure = Verdict(
                    passed=False,
                    category=FailCategory.RULE_VIOLATION,
                    feedback=injection_feedback(suspicion),
                    reasoning="the reply addresses the reviewer",
                    decisive=True,
                    suspected_injection=suspicion,
                )
                return failure, results
        failing = checks_verdict(results)
        verdict = _by_checks(step, failing, results)
        if verdict is None:  # the judge is asked (awaited here: no coroutine between)
            verdict = await self._judging().judgement(step, scans, reading)
            if failing is not None:
                verdict = _merged(failing, verdict, results)
        if suspicion:
            verdict = replaced(verdict, {"suspected_injection": suspicion})
        if verdict.awaiting_user and (suspicion or _holds_mark(reply.text)):
            # The mark counts only when the reply could not have planted it for the judge.
            verdict = verdict.model_copy(update={"awaiting_user": False})
        return verdict, results

    def _report_checks(self, turn: Turn, attempt: int, results: Sequence[CheckResult]) -> None:
        if not results or not self._events.enabled(logging.INFO):  # nothing to build
            return  # (DEBUG is off too when INFO is)
        clean = all(r.passed and not r.error for r in results)
        level = logging.DEBUG if clean else logging.INFO
        if not self._events.enabled(level):
            return
        self._events.emit(
            level,
            "checks",
            turn_id=turn.id,
            attempt=attempt,
            passed=[r.name for r in results if r.passed and not r.error],
            failed=[r.name for r in results if not r.passed],
            crashed=[r.name for r in results if r.error],
        )


async def _suspicion(text: str, limits: ContextLimits) -> tuple[tuple[str, ...], tokens.Cutter]:
    """The injection detector's reasons, on what of the reply the judge prompt can show (its
    cap's head and tail, and the lines the cut splits: ``view_of``), never on what any cut
    drops: the work scales with the cap, not with the reply. A view still long (sparse text
    keeps many characters a token) is screened off the event loop (the caller bounds the wait
    by the turn's deadline). Also the cutter that tokenized the reply's ends, for the prompt."""
    cap = min(limits.response_cap, limits.budget)
    scans = tokens.Cutter(text)
    if not tokens.loaded() and not tokens.surely_within(text, cap):  # its first load blocks
        view = await asyncio.to_thread(view_of, scans, cap)
    else:
        view = view_of(scans, cap)
    if len(view) > INLINE_CHARS:
        return tuple(await asyncio.to_thread(suspected_injection, view)), scans
    return tuple(suspected_injection(view)), scans


def _by_checks(
    step: Step, failure: Verdict | None, results: tuple[CheckResult, ...]
) -> Verdict | None:
    """The verdict when the checks decide alone, per ``judgeAfterChecks`` (``failure``: their
    failing verdict, if any), or None when the judge is asked (see ``_merged``)."""
    mode = step.profile.config.judge_after_checks
    if failure is not None and mode != "always":
        return failure
    if failure is None and (mode == "never" or decisive_pass(results)):
        return Verdict(passed=True, decisive=True, reasoning="deterministic checks")
    return None


def _merged(failure: Verdict, verdict: Verdict, results: tuple[CheckResult, ...]) -> Verdict:
    """The checks' ``failure`` and the judge's ``verdict`` on the same reply, merged."""
    if verdict.passed:  # the judge passed (or failed open): the checks' failure stands
        return failure.model_copy(update=_spend(verdict))
    judged = f"[judge] {verdict.feedback}" if verdict.feedback else "[judge] failed"
    merged = {
        "feedback": f"{merged_feedback(results)}\n{judged}",
        "category": failure.category or verdict.category,
    }
    return verdict.model_copy(update=merged)


def _late(error: str, started: float) -> Verdict:
    """The fail-open verdict of a step that the turn's deadline cut short."""
    from replyguard.runner._judging import fail_open  # the one fail-open verdict's home

    return fail_open(Reason.LATENCY_BUDGET, error, started)


def _holds_mark(text: str) -> bool:
    """Whether ``text`` spells the awaiting-the-user mark (``awaiting_user``, ``awaitingUser``,
    ``awaiting-user``, ``awaiting user``, in any case, any whitespace between the words, as
    the verdict parser reads the mark)."""
    squeezed = "".join(text.casefold().replace("_", " ").replace("-", " ").split())
    return "awaitinguser" in squeezed


def _spend(verdict: Verdict) -> dict[str, Any]:
    """The judge-call fields of ``verdict``, to carry over onto another verdict."""
    return {
        "model": verdict.model,
        "prompt_tokens": verdict.prompt_tokens,
        "completion_tokens": verdict.completion_tokens,
        "cost_usd": verdict.cost_usd,
        "latency_ms": verdict.latency_ms,
    }
