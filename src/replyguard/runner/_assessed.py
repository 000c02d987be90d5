"""One verdict on one reply outside ``run``'s loop (``assessed``).

``Verifier.verify`` asks for one; so does a door that drives its own attempts (the LangChain
middleware, the pydantic-ai and Agents SDK adapters, through ``adapters/_shared.DrivenTurn``)
and a one-shot door (``runner/_judgement.py``), with what it knows of the turn
(``PolicyStep``). The reply is judged as ``run`` judges an attempt: its tool ledger settled
over the earlier replies, a judge of the agent's own family refused, the same checks and
judge.
"""

from __future__ import annotations

from replyguard.runner._policy import Assessed, PolicyStep
from replyguard.runner._request import Profile, Step
from replyguard.runner._run import TurnParts
from replyguard.telemetry._tracing import turn_attributes, verdict_attributes
from replyguard.types import Reason, Reply, Turn, Verdict


async def assessed(
    parts: TurnParts, profile: Profile, turn: Turn, reply: Reply, step: PolicyStep
) -> Assessed:
    """The verdict on ``reply``, the check results and the turn's tool ledger, side effects
    settled, as ``run`` has them."""
    judged = parts.side_effects.with_turn_ledger(reply, step.earlier)
    if parts.families.refused(profile, turn):
        refused = Verdict(
            passed=True,
            readable=False,
            fail_open_reason=Reason.SAME_FAMILY,
            error=f"judge and agent model {turn.agent_model!r} are of the same family",
        )
        return Assessed(refused, (), judged.meta.tool_calls)
    with parts.tracing.span("replyguard.verify") as span:
        span.record(turn_attributes, turn, profile.name, profile.config.mode)
        verdict, results = await parts.assessor.assess(
            Step(profile, turn, judged, step.feedback, step.number, step.deadline)
        )
        span.record(verdict_attributes, verdict, parts.tracing.log_content)
    return Assessed(verdict, results, judged.meta.tool_calls)
