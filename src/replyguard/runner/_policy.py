"""The turn's policy, once: what follows a verdict, a check or a retry, as pure functions.

Every way into a verified turn decides with these: ``Verifier.run``, ``run_sync`` and
``Verifier.stream`` (one loop, ``runner/_driver.drive``, over a ``_Run``), the LangChain
middleware, the pydantic-ai output validator, the Agents SDK guardrail, the ``verify`` and
``heartbeat`` commands, ``eval`` and shadow mode. They differ in how they get a reply and
what they can do with a decision (a guardrail cannot retry, a one-shot command has no second
attempt), never in the decision.

- ``verdict_status``: what a verdict means under a mode and the turn's side effects (passed,
  failed open, flagged, or a FAIL that is acted on);
- ``judged_ending``: how a judged attempt ends the turn, or None when a retry follows;
- ``retry_ending``: how a retry's reply ends the turn before it is judged (a broken or a
  repeated reply), or None when it is judged;
- ``stagnant`` / ``repeated``: when another retry will not help;
- ``delivery``: which reply a turn out of attempts, money or time delivers;
- ``exhausted_ending`` / ``raises``: how a turn out of attempts ends, per ``onExhausted`` and
  its last FAIL's category (a reply, the operator's fixed message, or an exception);
- ``spent`` / ``affordable``: the turn's spend and its ceiling;
- ``settled``: the ``Outcome`` of a decided turn: the response (a check's repair), its
  parsed value, the cost and the tokens, summed once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from replyguard._frozen import assembled_from
from replyguard.config._exhausted import exhausted_choice
from replyguard.config._schema import VerifierConfig
from replyguard.runner._side_effects import done
from replyguard.types import (
    Attempt,
    CheckResult,
    Outcome,
    Reason,
    Reply,
    SkipReason,
    Status,
    TokenUsage,
    ToolCallRecord,
    Verdict,
)

BROKEN_RETRY = frozenset(
    {SkipReason.TOOL_CALLS, SkipReason.EMPTY_RESPONSE, SkipReason.ERROR_RESPONSE}
)
"""A retry is asked for a final answer: a tool-call step, an empty reply or an error report in
its place is worse than the reply before it (the previous reply is delivered, failing open)."""


class Ending(NamedTuple):
    """How a turn ends: its status, the reply to deliver, and why (a named tuple: one or two
    are made on every turn)."""

    status: Status
    delivered: Reply
    reason: Reason | None = None
    skip: SkipReason | None = None
    awaiting: bool = False


# -- when a retry will not help -------------------------------------------------------------------


def normal(text: str) -> str:
    """``text`` with runs of whitespace one space, case folded: the same reply, compared."""
    return " ".join(text.split()).casefold()


def repeated(previous: Reply, retry: Reply) -> bool:
    """The retry is the previous reply again (but for case and whitespace)."""
    return normal(previous.text) == normal(retry.text)


def stagnant(previous: Attempt | None, current: Attempt) -> bool:
    """The same category failed again with the same feedback: retrying will not help.

    The judge's FAIL repeated is enough. A deterministic FAIL (a check's, or the injection
    rule's: ``decisive``) may repeat a coarse message ("1 test failed") while the agent's
    replies change and get closer, so it counts only when the reply did not change either
    (the same text once whitespace is normalised).
    """
    if previous is None:
        return False
    before, now = previous.verdict, current.verdict
    if before is None or now is None or before.passed or now.passed:
        return False
    if before.category != now.category or normal(before.feedback or "") != normal(
        now.feedback or ""
    ):
        return False
    return not now.decisive or _spaced(previous.reply.text) == _spaced(current.reply.text)


def _spaced(text: str) -> str:
    return " ".join(text.split())


def feedback_line(verdict: Verdict) -> str:
    """How a FAIL is shown to the judge of a later attempt (its previous feedback)."""
    category = f" [{verdict.category}]" if verdict.category is not None else ""
    return f"FAIL{category}: {verdict.feedback or 'no details'}"


def feedback_so_far(attempts: Sequence[Attempt]) -> tuple[str, ...]:
    """The previous feedback the judge of the next attempt is shown."""
    return tuple(
        feedback_line(a.verdict) for a in attempts if a.verdict is not None and not a.verdict.passed
    )


# -- money --------------------------------------------------------------------------------------


def spent(attempts: Sequence[Attempt]) -> float:
    """What the turn spent under replyguard: every judgement, and the agent's retries (its
    first reply was made before replyguard had a say)."""
    judged = sum(a.verdict.cost_usd for a in attempts if a.verdict is not None)
    return judged + sum(a.reply.meta.cost_usd or 0.0 for a in attempts[1:])


def last_judge_cost(attempts: Sequence[Attempt]) -> float:
    """What the newest judge call cost (a check's verdict calls no judge): the price of the
    next judgement, as ``affordable`` reckons it."""
    for attempt in reversed(attempts):
        verdict = attempt.verdict
        if verdict is not None and verdict.model is not None:
            return verdict.cost_usd
    return 0.0


def affordable(ceiling: float | None, attempts: Sequence[Attempt], next_cost: float) -> bool:
    """Whether one more judgement, at ``next_cost`` (the last judge call's), fits ``ceiling``."""
    return ceiling is None or spent(attempts) + next_cost <= ceiling


# -- decisions ------------------------------------------------------------------------------------


def verdict_status(
    verdict: Verdict, mode: str, *, acted: bool = False, on_side_effects: str = "notice"
) -> tuple[Status | None, Reason | None]:
    """What ``verdict`` means under ``mode``: ``(status, reason)`` when it ends the turn as it
    is (failed open, passed, flagged in shadow mode or after side effects under ``deliver``),
    ``(None, None)`` for a FAIL that is acted on (a retry, a tripwire, exit 1). ``acted``: the
    turn's tool calls already changed the world."""
    if verdict.fail_open_reason is not None:
        return Status.FAILED_OPEN, verdict.fail_open_reason
    if verdict.passed:
        return Status.PASSED, None
    if mode == "shadow":  # judged and logged; the reply goes out unchanged
        return Status.FLAGGED, None
    if acted and on_side_effects == "deliver":
        return Status.FLAGGED, Reason.SIDE_EFFECTS  # no repeats
    return None, None


def delivery(policy: str, attempts: Sequence[Attempt], latest: Reply) -> Reply:
    """What a turn that ran out of attempts, money or time delivers, per ``deliver``: the
    first reply, the newest judged one no check failed (``best``), else ``latest``."""
    if policy == "first" and attempts:
        return attempts[0].reply
    if policy == "best":
        clean = [a for a in attempts if a.verdict and all(r.passed for r in a.checks)]
        if clean:
            return clean[-1].reply
    return latest


def last_fail_category(attempts: Sequence[Attempt]) -> str | None:
    """The category of the newest FAIL among ``attempts`` (None: none, or uncategorised)."""
    for attempt in reversed(attempts):
        verdict = attempt.verdict
        if verdict is not None and not verdict.passed:
            return None if verdict.category is None else str(verdict.category)
    return None


def exhausted_ending(
    config: VerifierConfig, attempts: Sequence[Attempt], latest: Reply, reason: Reason | None
) -> Ending:
    """How a turn out of attempts ends (``reason``: why early, such as ``stagnant``): the reply
    ``deliver`` picks, or, when ``onExhausted`` gives the last FAIL's category a message, that
    message instead (reason ``operator_message``). ``"raise"`` is ``raises``'s, after the
    outcome is settled."""
    choice = exhausted_choice(config.on_exhausted, last_fail_category(attempts))
    if choice not in ("deliver", "raise"):
        return Ending(Status.EXHAUSTED, Reply(text=choice), Reason.OPERATOR_MESSAGE)
    return Ending(Status.EXHAUSTED, delivery(config.deliver, attempts, latest), reason)


def raises(config: VerifierConfig, outcome: Outcome) -> bool:
    """Whether ``outcome`` (settled) is raised as ``VerificationExhausted`` rather than
    delivered: an exhausted turn whose last FAIL's category ``onExhausted`` maps to
    ``"raise"``."""
    if outcome.status != Status.EXHAUSTED:
        return False
    return exhausted_choice(config.on_exhausted, last_fail_category(outcome.attempts)) == "raise"


def judged_ending(
    config: VerifierConfig, attempts: Sequence[Attempt], tool_calls: Sequence[ToolCallRecord]
) -> Ending | None:
    """How the last of ``attempts`` (judged) ends the turn, or None when a retry follows it.

    ``tool_calls``: the turn's tool calls so far, side effects settled. Whether they changed
    the world is asked only under ``onSideEffects: "deliver"`` (the only policy it changes),
    and what another judgement would cost (the last judge call's) only of a FAIL that may be
    retried."""
    attempt = attempts[-1]
    previous = attempts[-2] if len(attempts) > 1 else None
    reply, verdict = attempt.reply, attempt.verdict
    assert verdict is not None  # a recorded attempt is a judged one
    on_side_effects = config.on_side_effects
    acted = on_side_effects == "deliver" and bool(done(tool_calls))
    status, reason = verdict_status(
        verdict, config.mode, acted=acted, on_side_effects=on_side_effects
    )
    if status is not None:
        if reason == Reason.LATENCY_BUDGET:
            reply = delivery(config.deliver, attempts, reply)
        awaiting = status == Status.PASSED and verdict.awaiting_user
        return Ending(status, reply, reason, awaiting=awaiting)
    if stagnant(previous, attempt):
        return exhausted_ending(config, attempts, reply, Reason.STAGNANT)
    if attempt.number >= config.max_attempts:
        return exhausted_ending(config, attempts, reply, None)
    if not affordable(config.max_cost_usd, attempts, last_judge_cost(attempts)):
        return Ending(
            Status.FAILED_OPEN, delivery(config.deliver, attempts, reply), Reason.COST_BUDGET
        )
    return None


def retry_ending(
    config: VerifierConfig,
    attempts: Sequence[Attempt],
    retry: Reply,
    previous: Reply,
    skip: SkipReason | None,
) -> Ending | None:
    """How a retry's reply (``skip``: its pre-check's word) ends the turn before it is
    judged, or None when it is judged: a tool-call step, an empty or an error reply delivers
    the previous reply (failing open), another skipped reply is delivered as it is, and the
    previous reply again stops the turn (stagnant)."""
    if skip in BROKEN_RETRY:
        return Ending(Status.FAILED_OPEN, previous, Reason.AGENT_ERROR)
    if skip is not None:
        return Ending(Status.SKIPPED, retry, skip=skip)
    if repeated(previous, retry):
        return exhausted_ending(config, attempts, retry, Reason.STAGNANT)
    return None


# -- the outcome ----------------------------------------------------------------------------------


def _tokens(usage: Mapping[str, Any] | None, *names: str) -> int:
    """The first of ``names`` that ``usage`` holds as an int (OpenAI's or pydantic-ai's)."""
    if not usage:
        return 0
    for name in names:
        value = usage.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0


def _summed(
    attempts: Sequence[Attempt], delivered: Reply
) -> tuple[tuple[CheckResult, ...], float, float, TokenUsage]:
    """One pass over ``attempts``: the checks of the delivered reply's last attempt, what the
    judge and the agent cost, and the tokens of every attempt, agent and judge, prompt and
    completion. Each value's fields are read from its ``__dict__`` once (a field read through
    pydantic's attribute hook costs a call)."""
    checks: tuple[CheckResult, ...] = ()
    judged = agent = 0.0
    agent_in = agent_out = judge_in = judge_out = 0
    for attempt in attempts:
        fields = attempt.__dict__
        reply = fields["reply"]
        if reply is delivered:
            checks = fields["checks"]
        meta = reply.meta.__dict__
        agent += meta["cost_usd"] or 0.0
        usage = meta["usage"]
        if usage:
            agent_in += _tokens(usage, "prompt_tokens", "input_tokens")
            agent_out += _tokens(usage, "completion_tokens", "output_tokens")
        verdict = fields["verdict"]
        if verdict is not None:
            values = verdict.__dict__
            judged += values["cost_usd"]
            judge_in += values["prompt_tokens"]
            judge_out += values["completion_tokens"]
    counts = {
        "agent_prompt_tokens": agent_in,
        "agent_completion_tokens": agent_out,
        "judge_prompt_tokens": judge_in,
        "judge_completion_tokens": judge_out,
    }
    usage_total = assembled_from(TokenUsage, counts)
    return checks, judged, agent, usage_total


def settled(ending: Ending, attempts: Sequence[Attempt], latency_ms: float) -> Outcome:
    """The ``Outcome`` of a turn ended as ``ending`` after ``attempts``: the delivered reply
    (or the repair a check of its attempt made), the parsed value, cost and tokens summed."""
    delivered = ending.delivered
    checks, judged, agent, usage = _summed(attempts, delivered)
    response: str | None = None  # the first repair of a check, else the reply's text
    parsed: Any = None  # the first value a check parsed
    for result in checks:
        if response is None and result.deliver_text:
            response = result.deliver_text
        if parsed is None:
            parsed = result.value
    fields: dict[str, Any] = {
        "response": delivered.text if response is None else response,
        "parsed": parsed,
        "status": ending.status,
        "reason": ending.reason,
        "attempts": tuple(attempts),
        "skip_reason": ending.skip,
        "awaiting_user": ending.awaiting,
        "cost_usd": judged + agent,
        "judge_cost_usd": judged,
        "usage": usage,
        "latency_ms": float(latency_ms),
    }
    if ending.awaiting and ending.status != Status.PASSED:
        return Outcome(**fields)  # its validator says why it cannot be
    return assembled_from(Outcome, fields)


# -- what a door that drives its own attempts hands the verifier ---------------------------------


@dataclass(frozen=True, slots=True)
class PolicyStep:
    """What a judgement knows of its turn: the earlier replies (their tool calls count), the
    feedback given so far, the attempt's number and the turn's deadline (``time.monotonic``)."""

    earlier: Sequence[Reply] = ()
    feedback: Sequence[str] = ()
    number: int = 1
    deadline: float | None = None


@dataclass(frozen=True, slots=True)
class Assessed:
    """One judgement: the verdict, the check results, the turn's tool ledger (side effects
    settled)."""

    verdict: Verdict
    checks: tuple[CheckResult, ...]
    tool_calls: tuple[ToolCallRecord, ...]
