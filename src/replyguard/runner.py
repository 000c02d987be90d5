"""``Verifier``: run an agent turn, judge its reply, retry with feedback, always fail open.

One turn: call the agent; pre-checks may skip the reply; triggers decide whether it is judged;
the judge reads a token-budgeted prompt within ``timeoutSeconds``; on FAIL the agent gets the
feedback (its previous reply as an assistant message, the feedback as a user message, on a copy
of the messages) and tries again, up to ``maxAttempts``. Anything that goes wrong inside
replyguard, or in the agent on a retry, delivers the best reply so far.

A ``Verifier`` holds only configuration and shared, thread-safe helpers; everything about one
turn lives in the locals of ``run``, so one instance serves any number of concurrent turns.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

from replyguard.checks.base import Check, as_check
from replyguard.checks.registry import build_checks
from replyguard.checks.running import checks_verdict, decisive_pass, merged_feedback, run_checks
from replyguard.config import VerifierConfig
from replyguard.context import ContextLimits, RulesSource, build_judge_prompt
from replyguard.errors import CrossFamilyError
from replyguard.families import model_family
from replyguard.feedback import feedback_message
from replyguard.judge import (
    Judge,
    JudgeReply,
    LiteLLMJudge,
    close_litellm_clients,
    import_litellm,
)
from replyguard.prechecks import skip_reason
from replyguard.telemetry import Events, describe_error
from replyguard.triggers import TriggerMatcher
from replyguard.types import (
    Attempt,
    CheckResult,
    Outcome,
    Reason,
    Reply,
    SkipReason,
    Status,
    Turn,
    Verdict,
)
from replyguard.verdict import parse_verdict
from replyguard.workspace import Workspace

Messages = list[dict[str, Any]]
Agent = Callable[[Messages], "Reply | str | Awaitable[Reply | str]"]
T = TypeVar("T")

# A retry is asked for a final answer: a tool-call step, an empty reply or an error report in
# its place is worse than the reply before it.
_BROKEN_RETRY = frozenset(
    {SkipReason.TOOL_CALLS, SkipReason.EMPTY_RESPONSE, SkipReason.ERROR_RESPONSE}
)


def _as_reply(value: Any) -> Reply:
    if isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return Reply(text=value)
    raise TypeError(f"the agent must return a Reply or a str, not {type(value).__name__}")


async def _call_agent(agent: Agent, messages: Messages) -> Reply:
    """Call a sync or async agent; a sync one runs in a worker thread, off the event loop."""
    if inspect.iscoroutinefunction(agent) or inspect.iscoroutinefunction(
        getattr(agent, "__call__", None)  # noqa: B004 - an async __call__ method, not callability
    ):
        result: Any = await agent(messages)  # type: ignore[misc]
    else:
        result = await asyncio.to_thread(agent, messages)
        if inspect.isawaitable(result):
            result = await result
    return _as_reply(result)


async def _shutdown_loop() -> None:
    """Close litellm's clients and cancel what is left on this loop (as ``asyncio.run`` does)."""
    await close_litellm_clients()
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not current]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


def _copy_messages(messages: Messages) -> Messages:
    """A deep copy of JSON-like messages, so an agent's edits never reach the caller."""

    def copy(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: copy(item) for key, item in value.items()}
        if isinstance(value, list):
            return [copy(item) for item in value]
        return value

    return [copy(message) for message in messages]


class _LoopThread:
    """One event loop in a daemon thread, shared by every ``run_sync`` call of a Verifier.

    litellm caches its HTTP clients per event loop; a fresh loop per call would strand them.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> T:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="replyguard-sync", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            loop = self._loop
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coroutine, loop)
        return future.result()

    def close(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(_shutdown_loop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()


class Verifier:
    """Verifies agent replies with a judge model. Immutable; share it freely."""

    __slots__ = (
        "_checks",
        "_config",
        "_events",
        "_judge",
        "_limits",
        "_loop_thread",
        "_triggers",
        "_warned",
        "_warned_lock",
        "_workspace",
    )
    _checks: tuple[Check, ...]
    _config: VerifierConfig
    _events: Events
    _judge: Judge
    _limits: ContextLimits
    _loop_thread: _LoopThread
    _triggers: TriggerMatcher
    _warned: set[tuple[Any, ...]]
    _warned_lock: threading.Lock
    _workspace: Workspace

    def __init__(
        self,
        config: VerifierConfig,
        *,
        judge: Judge | None = None,
        checks: Sequence[Check | Callable[[Turn, Reply], Any]] = (),
    ) -> None:
        events = Events(config.secrets())
        all_checks = (*build_checks(config, events), *(as_check(c) for c in checks))
        names = [c.name for c in all_checks]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"check names must be unique; repeated: {', '.join(duplicates)}")
        object.__setattr__(self, "_checks", all_checks)
        object.__setattr__(self, "_config", config)
        object.__setattr__(self, "_events", events)
        object.__setattr__(self, "_judge", judge or LiteLLMJudge(config, events))
        object.__setattr__(self, "_triggers", TriggerMatcher(config))
        object.__setattr__(self, "_workspace", Workspace(config.workspace_dir, events))
        object.__setattr__(
            self,
            "_limits",
            ContextLimits(
                budget=config.context_token_budget,
                response_cap=config.response_token_cap,
                rules_cap=config.rules_token_cap,
                history_turns=config.history_turns,
            ),
        )
        object.__setattr__(self, "_loop_thread", _LoopThread())
        object.__setattr__(self, "_warned", set())
        object.__setattr__(self, "_warned_lock", threading.Lock())
        if config.agent_model is not None:
            self._family_conflict(config.agent_model, raise_error=config.require_cross_family)
        for model in config.judge_models:
            if model_family(model) is None:
                self._warn_once("judge_family_unknown", model=model)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a Verifier is immutable; build a new one from a new config")

    def __repr__(self) -> str:
        return f"Verifier(model={self._config.model!r}, enabled={self._config.enabled})"

    @property
    def config(self) -> VerifierConfig:
        """The configuration this verifier was built with."""
        return self._config

    # -- lifecycle -------------------------------------------------------------------------

    async def warmup(self) -> None:
        """Import litellm and load the tokenizer off the event loop, before the first turn."""
        from replyguard import tokens

        await import_litellm()
        await asyncio.to_thread(tokens.encoding)

    async def aclose(self) -> None:
        """Close litellm's HTTP clients of the running loop and the ``run_sync`` loop."""
        await close_litellm_clients()
        await asyncio.to_thread(self._loop_thread.close)

    def close(self) -> None:
        """Close the ``run_sync`` loop and its litellm clients (for code without a loop)."""
        self._loop_thread.close()

    # -- family checks ---------------------------------------------------------------------

    def _warn_once(self, event: str, **fields: Any) -> None:
        key = (event, *sorted(fields.items()))
        with self._warned_lock:
            if key in self._warned:
                return
            self._warned.add(key)
        self._events.warning(event, **fields)

    def _family_conflict(self, agent_model: str, *, raise_error: bool) -> bool:
        """True when a judge model (primary or fallback) shares the agent's family."""
        agent_family = model_family(agent_model)
        if agent_family is None:
            self._warn_once("agent_family_unknown", model=agent_model)
            return False
        same = [m for m in self._config.judge_models if model_family(m) == agent_family]
        if not same:
            return False
        if raise_error:
            raise CrossFamilyError(same[0], agent_model, agent_family)
        self._warn_once("judge_same_family", judge=same[0], agent=agent_model, family=agent_family)
        return True

    def _turn_same_family(self, turn: Turn) -> bool:
        if turn.agent_model is None:
            return False
        same = self._family_conflict(turn.agent_model, raise_error=False)
        return same and self._config.require_cross_family

    # -- one judgement -----------------------------------------------------------------------

    def _rules(self, turn: Turn) -> list[RulesSource]:
        sources = [
            RulesSource(name, text)
            for name in self._config.rules_files
            if (text := self._workspace.read(name))
        ]
        if turn.rules:
            sources.append(
                RulesSource("rules for this turn", "\n".join(f"- {r}" for r in turn.rules))
            )
        return sources

    async def _judgement(
        self, turn: Turn, reply: Reply, previous_feedback: Sequence[str], attempt: int
    ) -> Verdict:
        """Judge one reply; never raises (but for cancellation): trouble is a fail-open PASS."""
        config, events = self._config, self._events
        started = time.perf_counter()

        def failed(reason: Reason, error: str) -> Verdict:
            latency = (time.perf_counter() - started) * 1000
            return Verdict(
                passed=True,
                readable=False,
                fail_open_reason=reason,
                error=error,
                latency_ms=latency,
            )

        if config.max_cost_usd == 0:
            return failed(Reason.COST_BUDGET, "maxCostUsd is 0: no judge spend is allowed")
        try:
            heartbeat = self._workspace.read(config.heartbeat_file) if turn.heartbeat else None
            prompt = build_judge_prompt(
                turn,
                reply.text,
                limits=self._limits,
                rules=self._rules(turn),
                heartbeat_tasks=heartbeat,
                previous_feedback=previous_feedback,
                meta=reply.meta,
            )
        except Exception as exc:
            events.error("judge_prompt_failed", error=describe_error(exc, events.secrets))
            return failed(Reason.INTERNAL_ERROR, describe_error(exc, events.secrets))
        try:
            warmup = getattr(self._judge, "warmup", None)
            if warmup is not None:  # one-time setup (litellm's import) is not judgement time
                await warmup()
            async with asyncio.timeout(config.timeout_seconds):
                answer = await self._judge.judge(prompt, time_left=config.timeout_seconds)
            if not isinstance(answer, JudgeReply):
                raise TypeError(f"the judge returned {type(answer).__name__}, not a JudgeReply")
        except TimeoutError:
            return failed(Reason.JUDGE_TIMEOUT, f"no verdict within {config.timeout_seconds:g} s")
        except Exception as exc:
            # litellm's own Timeout (its per-call timeout is the same deadline) is a timeout too.
            kind = getattr(exc, "last_error_class", None) or type(exc).__name__
            reason = Reason.JUDGE_TIMEOUT if "timeout" in kind.lower() else Reason.JUDGE_ERROR
            return failed(reason, describe_error(exc, events.secrets))
        verdict = parse_verdict(answer.text)
        update: dict[str, Any] = {
            "model": answer.model,
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
            "cost_usd": answer.cost_usd,
            "latency_ms": (time.perf_counter() - started) * 1000,
        }
        if not verdict.readable:
            update["fail_open_reason"] = Reason.UNREADABLE_VERDICT
            update["error"] = answer.note or verdict.error
        verdict = verdict.model_copy(update=update)
        fields: dict[str, Any] = {
            "turn_id": turn.id,
            "attempt": attempt,
            "passed": verdict.passed,
            "category": verdict.category,
            "readable": verdict.readable,
            "model": verdict.model,
            "prompt_tokens": verdict.prompt_tokens,
            "completion_tokens": verdict.completion_tokens,
            "cost_usd": verdict.cost_usd,
            "latency_ms": round(verdict.latency_ms, 2),
            "trimmed": prompt.trimmed,
            "prompt_tokens_counted": prompt.tokens,
        }
        if config.log_content:
            fields["feedback"] = verdict.feedback
        events.info("verdict", **fields)
        return verdict

    async def _assess(
        self, turn: Turn, reply: Reply, previous_feedback: Sequence[str], attempt: int
    ) -> tuple[Verdict, tuple[CheckResult, ...]]:
        """Checks, then (per ``judgeAfterChecks``) the judge: one verdict on one reply."""
        config = self._config
        results = await run_checks(
            self._checks, turn, reply, time_limit=config.timeout_seconds, events=self._events
        )
        if results:
            clean = all(r.passed and not r.error for r in results)
            self._events.emit(
                logging.DEBUG if clean else logging.INFO,
                "checks",
                turn_id=turn.id,
                attempt=attempt,
                passed=[r.name for r in results if r.passed and not r.error],
                failed=[r.name for r in results if not r.passed],
                crashed=[r.name for r in results if r.error],
            )
        failure = checks_verdict(results)
        mode = config.judge_after_checks
        if failure is not None and mode != "always":
            return failure, results
        if failure is None and (mode == "never" or decisive_pass(results)):
            return Verdict(passed=True, decisive=True, reasoning="deterministic checks"), results
        verdict = await self._judgement(turn, reply, previous_feedback, attempt)
        if failure is None:
            return verdict, results
        if verdict.passed:  # the judge passed (or failed open): the checks' failure stands
            return failure.model_copy(update=_spend(verdict)), results
        judged = f"[judge] {verdict.feedback}" if verdict.feedback else "[judge] failed"
        merged = f"{merged_feedback(results)}\n{judged}"
        return verdict.model_copy(
            update={"feedback": merged, "category": failure.category or verdict.category}
        ), results

    async def verify(self, turn: Turn, reply: Reply | str) -> Verdict:
        """One judgement of ``reply``, no retry; judges even when ``enabled`` is false.

        Never raises for the verifier's own trouble: a fail-open verdict (``passed=True``,
        ``fail_open_reason`` set) says what went wrong.
        """
        checked = _as_reply(reply)
        if self._turn_same_family(turn):
            return Verdict(
                passed=True,
                readable=False,
                fail_open_reason=Reason.SAME_FAMILY,
                error=f"judge and agent model {turn.agent_model!r} are of the same family",
            )
        verdict, _ = await self._assess(turn, checked, (), 1)
        return verdict

    # -- one turn ----------------------------------------------------------------------------

    def run_sync(self, agent: Agent, turn: Turn) -> Outcome:
        """``run`` for code without an event loop (safe from many threads at once)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._loop_thread.submit(self.run(agent, turn))
        raise RuntimeError("run_sync() was called inside a running event loop; await run()")

    async def run(self, agent: Agent, turn: Turn) -> Outcome:
        """Run ``agent`` for ``turn``, verify its reply, retry with feedback, deliver.

        ``agent`` receives OpenAI-style messages (a fresh deep copy on every call) and returns a
        ``Reply`` or a ``str``, sync or async. Its exception on the first attempt propagates;
        on a retry it fails open with the best reply so far.
        """
        started = time.perf_counter()
        config, events = self._config, self._events
        messages: Messages = [*turn.history, {"role": "user", "content": turn.user_message}]
        reply = await _call_agent(agent, _copy_messages(messages))
        attempts: list[Attempt] = []

        def finish(
            status: Status,
            delivered: Reply,
            reason: Reason | None = None,
            skip: SkipReason | None = None,
        ) -> Outcome:
            judge_cost = sum(a.verdict.cost_usd for a in attempts if a.verdict is not None)
            agent_cost = sum(a.reply.meta.cost_usd or 0.0 for a in attempts)
            checks = next((a.checks for a in attempts if a.reply is delivered), ())
            outcome = Outcome(
                response=next((r.deliver_text for r in checks if r.deliver_text), delivered.text),
                parsed=next((r.value for r in checks if r.value is not None), None),
                status=status,
                reason=reason,
                attempts=tuple(attempts),
                skip_reason=skip,
                cost_usd=judge_cost + agent_cost,
                judge_cost_usd=judge_cost,
                latency_ms=(time.perf_counter() - started) * 1000,
            )
            self._report(turn, outcome)
            return outcome

        if not config.enabled:
            attempts.append(Attempt(number=1, reply=reply))
            return finish(Status.DISABLED, reply)
        skip = skip_reason(reply)
        if skip is not None:
            attempts.append(Attempt(number=1, reply=reply, skip_reason=skip))
            return finish(Status.SKIPPED, reply, skip=skip)
        if self._triggers.decide(turn, reply.text) is None:
            attempts.append(Attempt(number=1, reply=reply))
            return finish(Status.NOT_TRIGGERED, reply)
        if self._turn_same_family(turn):
            attempts.append(Attempt(number=1, reply=reply))
            return finish(Status.FAILED_OPEN, reply, Reason.SAME_FAMILY)

        feedback_so_far: list[str] = []
        for number in range(1, config.max_attempts + 1):
            verdict, results = await self._assess(
                turn, _with_turn_ledger(reply, attempts), feedback_so_far, number
            )
            attempts.append(Attempt(number=number, reply=reply, verdict=verdict, checks=results))
            if verdict.fail_open_reason is not None:
                return finish(Status.FAILED_OPEN, reply, verdict.fail_open_reason)
            if verdict.passed:
                return finish(Status.PASSED, reply)
            if number == config.max_attempts:
                return finish(Status.EXHAUSTED, reply)
            if not self._can_afford_another(attempts, verdict):
                return finish(Status.FAILED_OPEN, reply, Reason.COST_BUDGET)
            feedback = feedback_message(verdict)
            feedback_so_far.append(_feedback_line(verdict))
            events.info(
                "retry",
                turn_id=turn.id,
                attempt=number + 1,
                category=verdict.category,
                **({"feedback": feedback} if config.log_content else {}),
            )
            messages = [
                *messages,
                {"role": "assistant", "content": reply.text},
                {"role": "user", "content": feedback},
            ]
            try:
                retry = await _call_agent(agent, _copy_messages(messages))
            except Exception as exc:
                events.warning(
                    "agent_retry_failed",
                    turn_id=turn.id,
                    attempt=number + 1,
                    error=describe_error(exc, events.secrets),
                )
                return finish(Status.FAILED_OPEN, reply, Reason.AGENT_ERROR)
            skip = skip_reason(retry)
            if skip in _BROKEN_RETRY:
                attempts.append(Attempt(number=number + 1, reply=retry, skip_reason=skip))
                return finish(Status.FAILED_OPEN, reply, Reason.AGENT_ERROR)
            if skip is not None:
                attempts.append(Attempt(number=number + 1, reply=retry, skip_reason=skip))
                return finish(Status.SKIPPED, retry, skip=skip)
            reply = retry
        raise AssertionError("unreachable: the loop returns on its last attempt")

    def _can_afford_another(self, attempts: Sequence[Attempt], last: Verdict) -> bool:
        ceiling = self._config.max_cost_usd
        if ceiling is None:
            return True
        spent = sum(a.verdict.cost_usd for a in attempts if a.verdict is not None)
        return spent + last.cost_usd <= ceiling

    def _report(self, turn: Turn, outcome: Outcome) -> None:
        events = self._events
        level_event = {
            Status.FAILED_OPEN: (events.warning, "failed_open"),
            Status.EXHAUSTED: (events.warning, "exhausted"),
            Status.PASSED: (events.info, "passed"),
            Status.SKIPPED: (events.debug, "skipped"),
            Status.NOT_TRIGGERED: (events.debug, "not_triggered"),
            Status.DISABLED: (events.debug, "disabled"),
        }
        emit, event = level_event[outcome.status]
        fields: dict[str, Any] = {
            "turn_id": turn.id,
            "status": outcome.status,
            "reason": outcome.reason,
            "skip_reason": outcome.skip_reason,
            "attempts": len(outcome.attempts),
            "cost_usd": outcome.cost_usd,
            "latency_ms": round(outcome.latency_ms, 2),
        }
        last = outcome.attempts[-1].verdict if outcome.attempts else None
        if last is not None and last.error:
            fields["error"] = last.error
        if self._config.log_content:
            fields["user_message"] = turn.user_message
            fields["response"] = outcome.response
        emit(event, **fields)


def _with_turn_ledger(reply: Reply, earlier: Sequence[Attempt]) -> Reply:
    """``reply`` as checks and judge should see it: with the tool calls of the whole turn.

    A retry's own ledger holds only its own calls; "I sent it" may rest on a call an earlier
    attempt made.
    """
    if not earlier:
        return reply
    calls = tuple(c for a in earlier for c in a.reply.meta.tool_calls) + reply.meta.tool_calls
    if calls == reply.meta.tool_calls:
        return reply
    return reply.model_copy(update={"meta": reply.meta.model_copy(update={"tool_calls": calls})})


def _spend(verdict: Verdict) -> dict[str, Any]:
    """The judge-call fields of ``verdict``, to carry over onto another verdict."""
    return {
        "model": verdict.model,
        "prompt_tokens": verdict.prompt_tokens,
        "completion_tokens": verdict.completion_tokens,
        "cost_usd": verdict.cost_usd,
        "latency_ms": verdict.latency_ms,
    }


def _feedback_line(verdict: Verdict) -> str:
    category = f" [{verdict.category.value}]" if verdict.category is not None else ""
    return f"FAIL{category}: {verdict.feedback or 'no details'}"
