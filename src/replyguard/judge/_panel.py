"""A judge panel's decision: several members' verdicts on one reply make one verdict.

Pure. A member that errored, timed out or answered unreadably (a fail-open verdict), or that
was not waited for, is left out; the decision is taken on those that answered, if at least
``min_answers`` did, else the panel fails open. ``"any_fail"``: one FAIL fails; ``"majority"``:
more FAILs than PASSes fail, a tie fails. A FAIL carries the failing members' feedback, each
under its member's name, and the category most of them named (the first member's on a tie).
Tokens and cost add up over every member, the left-out ones included; ``members`` keeps each
member's own verdict, and ``model`` names the members that decided (every member when none
did).

The panel decides early (``decided``): as soon as the members still to answer cannot change
the outcome (PASS, FAIL or fail open) however they answer, or fail to: with ``"any_fail"`` the
first FAIL (once ``min_answers`` have answered), with ``"majority"`` a side the others can no
longer outnumber. The caller then cancels the other members' calls (``not_waited_for`` stands
in for their verdicts).

Published work found a panel of smaller judges from different families matching or beating a
single large judge at a fraction of its cost: Verga et al., 2024, "Replacing Judges with
Juries: Evaluating LLM Generations with a Panel of Diverse Models", arXiv:2404.18796.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from replyguard.config._panel import PanelRule
from replyguard.config._schema import VerifierConfig
from replyguard.judge._base import BaseJudge
from replyguard.types import FailCategory, Reason, Verdict


@dataclass(frozen=True)
class Panel:
    """A profile's judge panel: each member's name, judge and config (its model and fallbacks),
    and how they decide."""

    members: tuple[tuple[str, BaseJudge, VerifierConfig], ...]
    rule: PanelRule
    min_answers: int


def answered(verdict: Verdict) -> bool:
    """Whether a member's verdict counts: it gave a readable PASS or FAIL."""
    return verdict.readable and verdict.fail_open_reason is None


NOT_WAITED_FOR = "not waited for: the panel had decided without this member"
"""The ``error`` of a member whose call was cancelled once the panel had decided."""


def not_waited_for(latency_ms: float) -> Verdict:
    """The stand-in verdict of a member whose call was cancelled once the panel decided: it
    did not answer (it is left out); the runner adds what its cut request is charged
    (``judge._unanswered``)."""
    return Verdict(passed=True, readable=False, error=NOT_WAITED_FOR, latency_ms=latency_ms)


def decided(members: Sequence[Verdict], pending: int, *, rule: PanelRule, min_answers: int) -> bool:
    """Whether the panel's outcome (PASS, FAIL, or fail open) is the same however the
    ``pending`` members still to answer do (PASS, FAIL, or not at all), given ``members``'
    verdicts so far."""
    counted = [v for v in members if answered(v)]
    fails = sum(not v.passed for v in counted)
    passes = len(counted) - fails
    outcomes = {
        _outcome(fails + more_fails, passes + more_passes, rule, min_answers)
        for more_fails in range(pending + 1)
        for more_passes in range(pending + 1 - more_fails)
    }
    return len(outcomes) == 1


def _outcome(fails: int, passes: int, rule: PanelRule, min_answers: int) -> bool | None:
    """The decision of ``fails`` FAILs and ``passes`` PASSes: failed (True), passed (False),
    or fail open (None: fewer than ``min_answers`` answered)."""
    if fails + passes < min_answers:
        return None
    return fails > 0 if rule == "any_fail" else fails >= passes


def panel_verdict(
    members: Sequence[Verdict], *, rule: PanelRule, min_answers: int, latency_ms: float
) -> Verdict:
    """The panel's verdict from its members' (each ``model`` naming its member). Its own
    ``model`` names the members whose verdict counted, or every member when none did."""
    counted = [v for v in members if answered(v)]
    names = ", ".join(v.model or "?" for v in counted or members)

    def made(**fields: Any) -> Verdict:
        return Verdict(
            model=names,
            prompt_tokens=sum(v.prompt_tokens for v in members),
            completion_tokens=sum(v.completion_tokens for v in members),
            cost_usd=sum(v.cost_usd for v in members),
            latency_ms=latency_ms,
            members=tuple(members),
            shared_state="degraded" if any(v.shared_state for v in members) else None,
            **fields,
        )

    if len(counted) < min_answers:
        left_out = [v for v in members if not answered(v)]
        reasons = {v.fail_open_reason for v in left_out if v.fail_open_reason is not None}
        reason = next(iter(reasons)) if len(reasons) == 1 else None
        detail = "; ".join(f"{v.model}: {v.error or v.fail_open_reason}" for v in left_out)
        return made(
            passed=True,
            readable=False,
            fail_open_reason=reason or Reason.JUDGE_ERROR,
            error=f"{len(counted)} of {len(members)} panel members answered, fewer than "
            f"minAnswers {min_answers}: {detail}",
        )
    fails = [v for v in counted if not v.passed]
    if not _outcome(len(fails), len(counted) - len(fails), rule, min_answers):
        awaiting = [v.awaiting_user for v in counted if v.passed]
        return made(
            passed=True,
            awaiting_user=sum(awaiting) * 2 > len(awaiting),
            reasoning=_merged(counted, "reasoning"),
        )
    return made(
        passed=False,
        category=_category(fails),
        feedback=_merged(fails, "feedback", blank="failed the reply, without details"),
        reasoning=_merged(counted, "reasoning"),
    )


def _category(fails: Sequence[Verdict]) -> FailCategory | str | None:
    named = [v.category for v in fails if v.category is not None]
    if not named:
        return None
    counts = Counter(named)
    most = max(counts.values())
    return next(c for c in named if counts[c] == most)


def _merged(
    verdicts: Sequence[Verdict], field: Literal["feedback", "reasoning"], blank: str = ""
) -> str | None:
    """Each verdict's text under its member's name, one member after another (``blank`` in
    place of an empty one; none without it)."""
    parts = [
        f"[{v.model}] {text}"
        for v in verdicts
        if (text := (getattr(v, field) or "").strip() or blank)
    ]
    return "\n".join(parts) or None
