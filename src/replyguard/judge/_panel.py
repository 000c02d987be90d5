"""A judge panel's decision: several members' verdicts on one reply make one verdict.

Pure. A member that errored, timed out or answered unreadably (a fail-open verdict) is left
out; the decision is taken on those that answered, if at least ``min_answers`` did, else the
panel fails open. ``"any_fail"``: one FAIL fails; ``"majority"``: more FAILs than PASSes fail,
a tie fails. A FAIL carries the failing members' feedback, each under its member's name, and
the category most of them named (the first member's on a tie). Tokens and cost add up over
every member, the left-out ones included; ``members`` keeps each member's own verdict, and
``model`` names the members that decided (every member when none did).

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
        reasons = {v.fail_open_reason for v in left_out}
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
    passes = len(counted) - len(fails)
    failed = bool(fails) if rule == "any_fail" else len(fails) >= passes
    if not failed:
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
