"""One verdict on one reply: the checks, then (per ``judgeAfterChecks``) the judge.

``Assessor`` holds what every turn shares (the checks, the workspace, the events, the
concurrency limiter); a ``Profile`` holds what a run kind may change (its config, judge,
triggers and context limits). Neither raises for the verifier's own trouble: a failed
judgement is a fail-open PASS verdict carrying its ``fail_open_reason``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from replyguard._workspace import Workspace
from replyguard.checks.base import Check
from replyguard.checks.running import checks_verdict, decisive_pass, merged_feedback, run_checks
from replyguard.config._schema import VerifierConfig
from replyguard.context import _tokens as tokens
from replyguard.context._build import build_judge_prompt
from replyguard.context._fitting import view_of
from replyguard.context._injection import injection_feedback, suspected_injection
from replyguard.context._prompt import (
    DEFAULT_RUBRIC,
    ContextLimits,
    JudgePrompt,
    Redact,
    Rubric,
    RulesSource,
)
from replyguard.errors import CircuitOpenError, JudgeConfigError
from replyguard.gate._triggers import TriggerMatcher
from replyguard.judge._base import BaseJudge, as_base_judge
from replyguard.judge._limiter import ConcurrencyLimiter
from replyguard.judge._prices import call_estimate
from replyguard.judge._protocol import Judge, JudgeReply
from replyguard.runner._preload import judging
from replyguard.telemetry._events import Events, describe_error, redact
from replyguard.telemetry._ledger import member_votes
from replyguard.telemetry._tracing import NO_TRACING, Tracing
from replyguard.types import CheckResult, FailCategory, Reason, Reply, Turn, Verdict, replaced

if TYPE_CHECKING:  # loaded when a config asks for a panel or shared state
    from replyguard.judge._panel import Panel
    from replyguard.state import SharedState, Ticket
    from replyguard.state._estimates import CallCost

_INLINE_SCAN_CHARS = 50_000
_JUDGE_TEXTS = ("raw", "feedback", "reasoning", "model", "error")
"""The verdict's fields that hold text from the judge's answer."""


@dataclass(frozen=True)
class Profile:
    """The settings one turn runs under: the verifier's own, or a run kind's."""

    name: str | None
    config: VerifierConfig
    judge: BaseJudge
    triggers: TriggerMatcher
    limits: ContextLimits
    rubric: Rubric = DEFAULT_RUBRIC
    """The judge's system message: the built-in rubric, the operator's criteria, categories."""
    panel: Panel | None = None
    """The judge panel that judges in place of ``judge``, when the config names one."""

    @property
    def judges(self) -> tuple[BaseJudge, ...]:
        """Every judge a judgement may call: the panel's members, or the one judge."""
        if self.panel is None:
            return (self.judge,)
        return tuple(judge for _, judge, _ in self.panel.members)

    @classmethod
    def build(
        cls,
        name: str | None,
        config: VerifierConfig,
        judge: BaseJudge,
        criteria: str = "",
        panel: Panel | None = None,
    ) -> Profile:
        """A profile from a (run kind's) config, the judge it uses, the operator's criteria
        (the rubric file's text) and its judge panel, if any."""
        limits = ContextLimits(
            budget=config.context_token_budget,
            response_cap=config.response_token_cap,
            rules_cap=config.rules_token_cap,
            history_turns=config.history_turns,
        )
        rubric = (
            Rubric(criteria, tuple(config.categories.items()))
            if criteria or config.categories
            else DEFAULT_RUBRIC
        )
        return cls(name, config, judge, TriggerMatcher(config), limits, rubric, panel)


def build_profiles(
    config: VerifierConfig,
    judge: BaseJudge,
    sibling: Callable[[VerifierConfig], BaseJudge] | None = None,
) -> dict[str | None, Profile]:
    """The verifier's profile (``None``) and each run kind's, judged by ``judge``.

    ``sibling``: the judge of a run kind's or a panel member's config (the litellm judge's
    own, sharing its clients); without it, ``judge`` judges every run kind, and each panel
    member gets the judge ``judge.member(model)`` gives.
    """
    criteria = config.operator_rubric()  # read once: the rubric stays the same every call

    def member_judge(member_config: VerifierConfig) -> BaseJudge:
        if sibling is not None:
            return sibling(member_config)
        return as_base_judge(judge.member(member_config.model))

    def profile_for(name: str | None, profile_config: VerifierConfig) -> Profile:
        own = sibling(profile_config) if sibling is not None else judge
        spec = profile_config.panel
        if spec is None:
            return Profile.build(name, profile_config, own, criteria)
        from replyguard.judge._panel import Panel

        configs = [profile_config.member_config(m) for m in spec.members]
        members = tuple((c.model, member_judge(c), c) for c in configs)
        panel = Panel(members, spec.rule, spec.min_answers)
        return Profile.build(name, profile_config, members[0][1], criteria, panel)

    profiles: dict[str | None, Profile] = {None: profile_for(None, config)}
    for name in config.run_kinds:
        profiles[name] = profile_for(name, config.for_run_kind(name))
    return profiles


@dataclass(frozen=True)
class Budget:
    """How long one step may take, and what to call it when that runs out."""

    seconds: float
    reason: Reason

    @classmethod
    def at(cls, own: float, deadline: float | None) -> Budget:
        """The step's own limit, or what is left of the turn when that is less."""
        if deadline is not None:
            left = deadline - time.monotonic()
            if left < own:
                return cls(max(left, 0.0), Reason.LATENCY_BUDGET)
        return cls(own, Reason.JUDGE_TIMEOUT)


Reading = asyncio.Future[tuple[str | None, ...]]
"""The workspace files' texts being read, in the order asked for (``read_workspace``)."""


@dataclass(frozen=True)
class Step:
    """One reply to assess, with what the assessment needs to know about its turn."""

    profile: Profile
    turn: Turn
    reply: Reply
    previous_feedback: Sequence[str]
    attempt: int
    deadline: float | None
    """The turn's deadline (``time.monotonic``), or None when it has none."""
    reading: Reading | None = None
    """The workspace files' read the turn started (``Assessor.read_workspace``), or None:
    the assessment then starts its own."""

    def left(self) -> float | None:
        """Seconds left of the turn (never negative), or None without a deadline."""
        return None if self.deadline is None else max(self.deadline - time.monotonic(), 0.0)


_NOTHING = contextlib.nullcontext()


def _retrieved(reading: Reading) -> None:
    """Takes the outcome of a reading nobody awaited, so none is logged as never retrieved."""
    if not reading.cancelled():
        reading.exception()


def _until(seconds: float | None) -> contextlib.AbstractAsyncContextManager[Any]:
    """``asyncio.timeout(seconds)``, or nothing to enter when there is no deadline."""
    return asyncio.timeout(seconds) if seconds is not None else _NOTHING


def _fail_open(reason: Reason, error: str, started: float, ticket: Ticket | None = None) -> Verdict:
    latency = (time.perf_counter() - started) * 1000
    return Verdict(
        passed=True,
        readable=False,
        fail_open_reason=reason,
        error=error,
        latency_ms=latency,
        shared_state=_shared_state(ticket),
    )


def _shared_state(ticket: Ticket | None) -> Literal["degraded"] | None:
    """``"degraded"`` when the judgement was decided on this instance's own state."""
    return "degraded" if ticket is not None and ticket.degraded else None


def _estimate(config: VerifierConfig, prompt: JudgePrompt) -> CallCost | None:
    """What is known of the cost of one judge call of this prompt (for spend limits)."""
    if not config.spend_limits:
        return None
    from replyguard.state._estimates import CallCost  # loaded with the shared state

    tokens_in = prompt.counted_tokens
    if tokens_in is None:  # bounded by the budget and by its UTF-8 size, never counted here
        size = tokens.size_bound(prompt.system) + tokens.size_bound(prompt.user)
        tokens_in = min(config.context_token_budget, size)
    models = [
        (model, 0) for name in config.judge_models for model in config.underlying_models(name)
    ]
    return CallCost(tuple(config.judge_models), tokens_in, call_estimate(models, tokens_in))


class Assessor:
    """Checks and judge for one reply; shared by every turn of a verifier."""

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
        self._state = state
        self._tracing = tracing
        self._workspace = workspace
        self._events = events
        self._limiter = limiter
        self._redact = redact

    def read_workspace(self, profile: Profile, turn: Turn) -> Reading | None:
        """The workspace files the judge prompt may show (the rules files, and a heartbeat
        turn's task file), read on the workspace's own threads from now on; None when there
        is nothing to read. Started as early as the turn knows it will be judged (before the
        agent's call when that does not depend on the reply), the read overlaps the agent and
        the checks; a reading nobody waits for ends on its own."""
        config = profile.config
        if config.judge_after_checks == "never":
            return None
        names = config.rules_files
        if turn.heartbeat:
            names = (*names, config.heartbeat_file)
        reading = self._workspace.read_later(names)
        if reading is not None:
            reading.add_done_callback(_retrieved)
        return reading

    async def _workspace_texts(
        self, step: Step, reading: Reading | None
    ) -> tuple[list[RulesSource], str | None]:
        """The rules sources and the heartbeat tasks, once ``reading`` is done; the wait is
        bounded by the turn's deadline and ``timeoutSeconds`` (``TimeoutError``)."""
        config, turn = step.profile.config, step.turn
        if reading is None and not turn.rules:
            return [], None
        texts: tuple[str | None, ...] = ()
        if reading is not None:
            if not reading.done():  # waited for without cancelling: a retry may wait again
                budget = Budget.at(config.timeout_seconds, step.deadline).seconds
                await asyncio.wait((reading,), timeout=budget)
                if not reading.done():
                    raise TimeoutError
            texts = reading.result()
        named = dict(zip(config.rules_files, texts, strict=False))
        sources = [RulesSource(name, text) for name, text in named.items() if text]
        heartbeat = texts[-1] if turn.heartbeat and texts else None
        if turn.rules:
            rules = "\n".join(f"- {rule}" for rule in turn.rules)
            sources.append(RulesSource("rules for this turn", rules))
        return sources, heartbeat

    def _slot(self) -> contextlib.AbstractAsyncContextManager[Any]:
        return self._limiter.slot() if self._limiter is not None else _NOTHING

    async def judgement(
        self, step: Step, reply_scans: tokens.Cutter | None, reading: Reading | None
    ) -> Verdict:
        """Judge one reply by the turn's deadline (and ``timeoutSeconds``); never raises.

        Cancellation of the caller is the one exception that propagates. ``reply_scans``: the
        injection screen's cutter of the reply, whose tokenized ends the prompt reuses;
        ``reading``: the workspace files' read (``read_workspace``).
        """
        with judging():  # the tokenizer's background load waits for it
            return await self._judgement(step, reply_scans, reading)

    async def _judgement(
        self, step: Step, reply_scans: tokens.Cutter | None, reading: Reading | None
    ) -> Verdict:
        profile, turn, reply = step.profile, step.turn, step.reply
        config, events = profile.config, self._events
        started = time.perf_counter()
        ticket: Ticket | None = None

        def failed(reason: Reason, error: str) -> Verdict:
            return _fail_open(reason, error, started, ticket)

        if config.max_cost_usd == 0:
            return failed(Reason.COST_BUDGET, "maxCostUsd is 0: no judge spend is allowed")
        for judge in profile.judges:
            setup_failed = await self._setup(judge, step)
            if setup_failed is not None:
                return failed(*setup_failed)
        started = time.perf_counter()  # the judgement's latency starts after the setup
        try:
            rules, heartbeat = await self._workspace_texts(step, reading)
        except TimeoutError:
            files = [*config.rules_files, *([config.heartbeat_file] if turn.heartbeat else [])]
            events.warning("workspace_read_late", turn_id=turn.id, files=files)
            late = Budget.at(config.timeout_seconds, step.deadline).reason
            reason = late if late is Reason.LATENCY_BUDGET else Reason.INTERNAL_ERROR
            return failed(reason, "the workspace files were not read in time")
        except Exception as exc:  # a fault of the reader itself, never the files' (logged there)
            events.error("workspace_read_failed", error_class=type(exc).__name__)
            said = describe_error(exc, events.secrets)
            return failed(Reason.INTERNAL_ERROR, f"reading the workspace failed: {said}")
        try:
            build = functools.partial(
                build_judge_prompt,
                turn,
                reply.text,
                limits=profile.limits,
                rules=rules,
                heartbeat_tasks=heartbeat,
                previous_feedback=step.previous_feedback,
                meta=reply.meta,
                redact=self._redact,
                rubric=profile.rubric,
                reply_scans=reply_scans,
            )
            if len(reply.text) > _INLINE_SCAN_CHARS:  # off the loop, by the turn's deadline
                async with _until(step.left()):
                    prompt = await asyncio.to_thread(build)
            else:
                prompt = await _build_inline(build, self._redact, step)
        except TimeoutError:
            error = "the turn's deadline passed while the judge prompt was built"
            return failed(Reason.LATENCY_BUDGET, error)
        except Exception as exc:
            # Only the class: a redactor's own error text may hold the very data it guards.
            events.error("judge_prompt_failed", error_class=type(exc).__name__)
            return failed(Reason.INTERNAL_ERROR, f"the judge prompt failed: {type(exc).__name__}")
        budget = Budget.at(config.timeout_seconds, step.deadline)
        deadline = time.monotonic() + budget.seconds  # every panel member's too
        if profile.panel is None:
            verdict = await self._ask(
                profile.judge, config, prompt, step, budget, deadline, started
            )
        else:
            verdict = await self._ask_panel(profile.panel, prompt, step, budget, deadline)
        if events.enabled(logging.INFO):
            self._report_verdict(step, verdict, prompt)
        return verdict

    async def _ask_panel(
        self, panel: Panel, prompt: JudgePrompt, step: Step, budget: Budget, deadline: float
    ) -> Verdict:
        """Every member asked at once, by the same deadline; the panel's decision."""
        from replyguard.judge._panel import panel_verdict  # only a panel's verifier loads it

        started = time.perf_counter()
        asks = [
            self._ask(judge, config, prompt, step, budget, deadline, started)
            for _, judge, config in panel.members
        ]
        verdicts = await asyncio.gather(*asks)
        members = [
            v.model_copy(update={"model": name})
            for (name, _, _), v in zip(panel.members, verdicts, strict=True)
        ]
        latency = (time.perf_counter() - started) * 1000
        return panel_verdict(
            members, rule=panel.rule, min_answers=panel.min_answers, latency_ms=latency
        )

    async def _ask(
        self,
        judge: Judge,
        config: VerifierConfig,
        prompt: JudgePrompt,
        step: Step,
        budget: Budget,
        deadline: float,
        started: float,
    ) -> Verdict:
        """One judge's verdict on ``prompt`` by ``deadline`` (``time.monotonic``), in a slot
        of the concurrency limit and admitted by the shared state (``config``: the judge's
        own, a panel member's for a member, so breakers and spend stay per member); a
        fail-open verdict for any fault. Never raises but for the caller's cancellation. Its
        latency runs from ``started`` (``time.perf_counter``)."""
        events = self._events
        ticket: Ticket | None = None

        def failed(reason: Reason, error: str) -> Verdict:
            return _fail_open(reason, error, started, ticket)

        gate = self._state
        answer: JudgeReply | None = None
        try:
            async with asyncio.timeout(max(deadline - time.monotonic(), 0.0)), self._slot():
                time_left = max(deadline - time.monotonic(), 0.001)
                if gate is None:
                    answer = await judge.judge(prompt, time_left=time_left)
                else:
                    ticket = await gate.admit(
                        config.judge_models,
                        agent_id=step.turn.agent_id,
                        run_kind=step.profile.name,
                        call=_estimate(config, prompt),
                        timeout_seconds=config.timeout_seconds,
                        time_left=time_left,
                    )
                    if ticket.refused is not None:
                        limit = ticket.refused
                        error = f"the {limit.scope} spend limit of ${limit.usd:g} per "
                        return failed(Reason.SPEND_LIMIT, f"{error}{limit.window} is reached")
                    if ticket.blocked:
                        error = "every judge model's circuit is open (fleet-wide)"
                        return failed(Reason.CIRCUIT_OPEN, error)
                    with ticket.active():
                        time_left = max(deadline - time.monotonic(), 0.001)
                        answer = await judge.judge(prompt, time_left=time_left)
            if not isinstance(answer, JudgeReply):
                raise TypeError(f"the judge returned {type(answer).__name__}, not a JudgeReply")
        except TimeoutError as exc:
            # A provider's own timeout (408, 504) says more than our deadline would.
            said = describe_error(exc, events.secrets) if str(exc) else ""
            return failed(budget.reason, said or f"no verdict within {budget.seconds:g} s")
        except CircuitOpenError as exc:
            return failed(Reason.CIRCUIT_OPEN, describe_error(exc, events.secrets))
        except JudgeConfigError as exc:
            return failed(Reason.JUDGE_ERROR, describe_error(exc, events.secrets))
        except Exception as exc:
            # litellm's own Timeout (its per-call timeout is the same deadline) is a timeout too.
            kind = getattr(exc, "last_error_class", None) or type(exc).__name__
            reason = budget.reason if "timeout" in kind.lower() else Reason.JUDGE_ERROR
            return failed(reason, describe_error(exc, events.secrets))
        finally:
            if gate is not None and ticket is not None:
                await _settled(gate, ticket, answer)
        try:
            async with _until(step.left()):
                verdict = await answer.parsed(config.categories)  # a long one off the loop
        except TimeoutError:
            return failed(Reason.LATENCY_BUDGET, "the turn's deadline passed reading the verdict")
        update: dict[str, Any] = {
            "model": answer.model,
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
            "cost_usd": answer.cost_usd,
            "latency_ms": (time.perf_counter() - started) * 1000,
            "shared_state": _shared_state(ticket),
        }
        if not verdict.readable:
            update["fail_open_reason"] = Reason.UNREADABLE_VERDICT
            update["error"] = answer.note or verdict.error
        verdict = replaced(verdict, update)
        # The one place a judge's answer becomes a verdict: from here on its words are stored,
        # sent to the agent, printed and logged, so every key is taken out of them now.
        secrets = (*events.secrets, *config.secrets())
        if len(answer.text) > _INLINE_SCAN_CHARS:
            return await asyncio.to_thread(redacted_verdict, verdict, secrets)
        return redacted_verdict(verdict, secrets)

    async def _setup(self, judge: BaseJudge, step: Step) -> tuple[Reason, str] | None:
        """One-time setup, off the event loop: the judge's ``warmup`` (litellm's import)
        unless it says it is ``ready``. Not judgement time, but it counts against the turn's
        own deadline; once done it costs nothing (no await, no timeout). Returns why it
        failed, if it did. The tokenizer is not waited for here: only a prompt that needs
        tokens loads it (``_build_inline``)."""
        if judge.ready:
            return None
        try:
            async with _until(step.left()):
                await judge.warmup()
        except TimeoutError:
            return Reason.LATENCY_BUDGET, "the turn's deadline passed during warm-up"
        except Exception as exc:
            return Reason.JUDGE_ERROR, describe_error(exc, self._events.secrets)
        return None

    def _report_verdict(self, step: Step, verdict: Verdict, prompt: JudgePrompt) -> None:
        """The ``verdict`` event. Its tokens are the judge's usage; the prompt's own count is
        added only when the build already made it (counting a prompt takes milliseconds)."""
        fields: dict[str, Any] = {
            "turn_id": step.turn.id,
            "attempt": step.attempt,
            "passed": verdict.passed,
            "category": verdict.category,
            "readable": verdict.readable,
            "model": verdict.model,
            "prompt_tokens": verdict.prompt_tokens,
            "completion_tokens": verdict.completion_tokens,
            "cost_usd": verdict.cost_usd,
            "latency_ms": round(verdict.latency_ms, 2),
            "trimmed": prompt.trimmed,
        }
        counted = prompt.counted_tokens
        if counted is not None:
            fields["prompt_tokens_counted"] = counted
        if verdict.members:
            fields["panel"] = member_votes(verdict)
        if step.profile.config.log_content:
            fields["feedback"] = verdict.feedback
        self._events.info("verdict", **fields)

    async def assess(self, step: Step) -> tuple[Verdict, tuple[CheckResult, ...]]:
        """Checks, then (per ``judgeAfterChecks``) the judge: one verdict on one reply.

        Every step is bounded by the turn's deadline too.
        """
        turn, reply, config = step.turn, step.reply, step.profile.config
        started = time.perf_counter()
        budget = Budget.at(config.timeout_seconds, step.deadline)
        reading = step.reading or self.read_workspace(step.profile, turn)
        try:
            async with _until(step.left()):
                results = await run_checks(
                    self.checks,
                    turn,
                    reply,
                    time_limit=budget.seconds,
                    events=self._events,
                    tracing=self._tracing,
                )
        except TimeoutError:
            error = "the turn's deadline passed during the checks"
            return _fail_open(Reason.LATENCY_BUDGET, error, started), ()
        self._report_checks(turn, step.attempt, results)
        try:
            async with _until(step.left()):
                suspicion, scans = await _suspicion(reply.text, step.profile.limits)
        except TimeoutError:
            error = "the turn's deadline passed during the injection scan"
            return _fail_open(Reason.LATENCY_BUDGET, error, started), results
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
        verdict = await self._verdict(step, results, scans, reading)
        if suspicion:
            verdict = replaced(verdict, {"suspected_injection": suspicion})
        if verdict.awaiting_user and (suspicion or _holds_mark(reply.text)):
            # The mark counts only when the reply could not have planted it for the judge.
            verdict = verdict.model_copy(update={"awaiting_user": False})
        return verdict, results

    async def _verdict(
        self,
        step: Step,
        results: tuple[CheckResult, ...],
        scans: tokens.Cutter | None,
        reading: Reading | None,
    ) -> Verdict:
        """The checks' verdict, the judge's, or both merged, per ``judgeAfterChecks``."""
        failure = checks_verdict(results)
        mode = step.profile.config.judge_after_checks
        if failure is not None and mode != "always":
            return failure
        if failure is None and (mode == "never" or decisive_pass(results)):
            return Verdict(passed=True, decisive=True, reasoning="deterministic checks")
        verdict = await self.judgement(step, scans, reading)
        if failure is None:
            return verdict
        if verdict.passed:  # the judge passed (or failed open): the checks' failure stands
            return failure.model_copy(update=_spend(verdict))
        judged = f"[judge] {verdict.feedback}" if verdict.feedback else "[judge] failed"
        merged = {
            "feedback": f"{merged_feedback(results)}\n{judged}",
            "category": failure.category or verdict.category,
        }
        return verdict.model_copy(update=merged)

    def _report_checks(self, turn: Turn, attempt: int, results: Sequence[CheckResult]) -> None:
        if not results:
            return
        clean = all(r.passed and not r.error for r in results)
        level = logging.DEBUG if clean else logging.INFO
        if not self._events.enabled(level):  # nothing to build
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
    async with _until(step.left()):
        await asyncio.to_thread(tokens.encoding)
    return build(redact=replaying) if redact is not None else build()


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
    if len(view) > _INLINE_SCAN_CHARS:
        return tuple(await asyncio.to_thread(suspected_injection, view)), scans
    return tuple(suspected_injection(view)), scans


def _holds_mark(text: str) -> bool:
    """Whether ``text`` spells the awaiting-the-user mark (``awaiting_user``, ``awaitingUser``,
    ``awaiting-user``, ``awaiting user``, in any case, any whitespace between the words, as
    the verdict parser reads the mark)."""
    squeezed = "".join(text.casefold().replace("_", " ").replace("-", " ").split())
    return "awaitinguser" in squeezed


async def _settled(gate: SharedState, ticket: Ticket, answer: JudgeReply | None) -> None:
    """Hand the ticket back with what the judgement cost; a cancelled turn does not wait
    for Redis (its reservation there expires by itself)."""
    cost = answer.cost_usd if isinstance(answer, JudgeReply) else None
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        gate.abandon(ticket, cost)
    else:
        await gate.settle(ticket, cost)


def redacted_verdict(verdict: Verdict, secrets: Sequence[str]) -> Verdict:
    """``verdict`` with every text that came from the judge's answer (its raw text, feedback,
    reasoning, model name, and the note on an empty answer) redacted: ``secrets`` (the
    configured and ``env:`` keys, the router's keys) and anything shaped like a key."""
    texts = {
        name: redact(value, secrets)
        for name in _JUDGE_TEXTS
        if isinstance(value := getattr(verdict, name), str)
    }
    changed = {name: text for name, text in texts.items() if text != getattr(verdict, name)}
    return replaced(verdict, changed) if changed else verdict


def _spend(verdict: Verdict) -> dict[str, Any]:
    """The judge-call fields of ``verdict``, to carry over onto another verdict."""
    return {
        "model": verdict.model,
        "prompt_tokens": verdict.prompt_tokens,
        "completion_tokens": verdict.completion_tokens,
        "cost_usd": verdict.cost_usd,
        "latency_ms": verdict.latency_ms,
    }
