"""The one place that turns a FAIL verdict into the message the agent sees on retry (its
text is ``prompts/feedback.j2``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from replyguard._templates import render
from replyguard.runner._side_effects import describe_call
from replyguard.types import FailCategory, ToolCallRecord, Verdict

GUIDANCE: dict[FailCategory | None, str] = {
    FailCategory.GOAL_MISSED: (
        "Re-read the user's request and answer what was actually asked, not a nearby question."
    ),
    FailCategory.INCOMPLETE: (
        "Finish every part of the request; do not promise work, leave placeholders, or claim "
        "something was done unless it was."
    ),
    FailCategory.RULE_VIOLATION: "Follow the user's rules exactly; they take priority.",
    FailCategory.TONE_MISMATCH: "Match the tone the rules and the conversation call for.",
    FailCategory.REFUSAL: (
        "Carry out the request instead of refusing or deflecting, unless it is truly unsafe; "
        "then say precisely what you can do."
    ),
    FailCategory.GROUNDING: (
        "Say only what the tool results, the retrieved context, the user's message or the "
        "conversation support: correct or remove every figure, name or claim of an action "
        "they do not contain, and say plainly what did not happen."
    ),
    None: "Check the reply against the request and the rules, and fix what the reviewer named.",
}

HEARTBEAT_GUIDANCE = (
    "Work through every open task in the heartbeat task list; answer HEARTBEAT_OK only when "
    "nothing there needs attention."
)
"""A heartbeat run answers a task list, not a user: its guidance says so, whatever the
category."""

NO_DETAILS = "(the reviewer gave no details)"
LISTED_DONE = 20
"""At most this many actions already done are listed in a retry message; a line counts the
rest."""


def guidance_for(
    category: FailCategory | str | None,
    *,
    heartbeat: bool = False,
    categories: Mapping[str, str] | None = None,
) -> str:
    """What a retry message asks the agent to do about a FAIL in ``category``: a heartbeat
    run's task list, a custom category's guidance (or the operator's own for a later
    built-in, such as grounding), else the built-in category's."""
    own = (categories or {}).get(category) if category is not None else None
    if heartbeat:
        return HEARTBEAT_GUIDANCE
    if own:
        return own
    return GUIDANCE[category if isinstance(category, FailCategory) else None]


def feedback_message(
    verdict: Verdict,
    *,
    heartbeat: bool = False,
    done: Sequence[ToolCallRecord] = (),
    categories: Mapping[str, str] | None = None,
) -> str:
    """The exact user message the agent receives after ``verdict`` failed its reply
    (``heartbeat``: the reply was a heartbeat run's; ``done``: the side-effecting tool calls
    this turn already made, which the retry must not repeat; ``categories``: the config's
    custom categories, whose guidance a FAIL in one of them gets, as does a FAIL in a later
    built-in the config gives guidance of its own)."""
    category = verdict.category
    return render(
        "feedback.j2",
        category=str(category) if category is not None else None,
        feedback=(verdict.feedback or "").strip() or NO_DETAILS,
        guidance=guidance_for(category, heartbeat=heartbeat, categories=categories),
        heartbeat=heartbeat,
        done=[describe_call(call) for call in done[:LISTED_DONE]],
        more_done=max(len(done) - LISTED_DONE, 0),
    )
