"""The retry message is built in plain Python (a command that fails a reply prints it without
importing jinja2), byte for byte what the jinja template it replaced rendered: the template
is kept here, rendered as ``replyguard._templates`` rendered it, and compared on arbitrary
verdicts, categories, guidance and lists of actions already done."""

from __future__ import annotations

from typing import Any

import jinja2
from hypothesis import given, settings
from hypothesis import strategies as st

from replyguard import FailCategory, ToolCallRecord, Verdict
from replyguard.runner._feedback import (
    GUIDANCE,
    LISTED_DONE,
    NO_DETAILS,
    feedback_message,
    guidance_for,
)
from replyguard.runner._side_effects import describe_call

FORMER_TEMPLATE = """\
A reviewer checked your previous reply and it was not accepted\
{% if category %} ({{ category }}){% endif %}.

Reviewer's feedback: {{ feedback }}
{%- if done %}

Already done in this turn (these actions happened; do not repeat them, and report them as done):
{%- for call in done %}
- {{ call }}
{%- endfor %}
{%- if more_done %}
- … and {{ more_done }} more
{%- endif %}
{%- endif %}

{{ guidance }}
{% if heartbeat %}Fix what was flagged. Reply with a complete report of what you did, \
not a note about the fix.{% else %}Fix what was flagged and change nothing else. Reply with \
the complete corrected answer for the user, not a note about the fix.{% endif %}
"""
"""``prompts/feedback.j2`` as it was (its two long lines joined by the backslashes)."""

_TEMPLATE = jinja2.Environment(
    undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False
).from_string(FORMER_TEMPLATE)


def former(
    verdict: Verdict,
    *,
    heartbeat: bool = False,
    done: tuple[ToolCallRecord, ...] = (),
    categories: dict[str, str] | None = None,
) -> str:
    """What the template rendered, with the values ``feedback_message`` gave it."""
    category = verdict.category
    guidance = guidance_for(category, heartbeat=heartbeat, categories=categories)
    return _TEMPLATE.render(
        category=str(category) if category is not None else None,
        feedback=(verdict.feedback or "").strip() or NO_DETAILS,
        guidance=guidance,
        heartbeat=heartbeat,
        done=[describe_call(call) for call in done[:LISTED_DONE]],
        more_done=max(len(done) - LISTED_DONE, 0),
    ).strip()


TEXT = st.text(st.characters(codec="utf-8"), max_size=60) | st.sampled_from(
    ["", "  ", "\n", " padded \n", "{{ x }}", "{% if %}", "line one\nline two", "…"]
)
ARGUMENTS: st.SearchStrategy[Any] = st.none() | TEXT | st.dictionaries(TEXT, TEXT, max_size=3)
CALLS = st.builds(ToolCallRecord, name=TEXT, arguments=ARGUMENTS)
CATEGORIES = st.none() | st.sampled_from([*FailCategory, "tone_of_brand", "legal"])


@settings(max_examples=300, deadline=None)
@given(
    category=CATEGORIES,
    feedback=st.none() | TEXT,
    heartbeat=st.booleans(),
    done=st.lists(CALLS, max_size=LISTED_DONE + 4).map(tuple),
    guidance=st.dictionaries(st.sampled_from(["tone_of_brand", "legal", "grounding"]), TEXT),
)
def test_the_retry_message_is_what_the_template_rendered(
    category: FailCategory | str | None,
    feedback: str | None,
    heartbeat: bool,
    done: tuple[ToolCallRecord, ...],
    guidance: dict[str, str],
) -> None:
    verdict = Verdict(passed=False, category=category, feedback=feedback)
    ours = feedback_message(verdict, heartbeat=heartbeat, done=done, categories=guidance)
    assert ours == former(verdict, heartbeat=heartbeat, done=done, categories=guidance)


def test_a_long_list_of_actions_is_cut_with_a_count_of_the_rest() -> None:
    done = tuple(ToolCallRecord(name=f"send_{n}", arguments={"n": n}) for n in range(23))
    verdict = Verdict(passed=False, category=FailCategory.INCOMPLETE, feedback=" Finish it. ")
    message = feedback_message(verdict, done=done)
    assert message == former(verdict, done=done)
    assert message.startswith(
        "A reviewer checked your previous reply and it was not accepted (incomplete).\n\n"
        "Reviewer's feedback: Finish it.\n\nAlready done in this turn"
    )
    assert '\n- send_19({"n":19})\n- … and 3 more\n\n' in message
    assert "send_20" not in message


def test_a_failure_without_category_or_feedback_still_reads_whole() -> None:
    verdict = Verdict(passed=False, feedback="   ")
    assert feedback_message(verdict) == (
        "A reviewer checked your previous reply and it was not accepted.\n\n"
        f"Reviewer's feedback: {NO_DETAILS}\n\n{GUIDANCE[None]}\n"
        "Fix what was flagged and change nothing else. Reply with the complete corrected "
        "answer for the user, not a note about the fix."
    )
