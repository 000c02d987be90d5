"""``onExhausted``: what a turn that ran out of attempts does, in general or per FAIL category.

Two forms:

- ``"deliver"`` (the default) or ``"raise"``: as before, for every category;
- an object ``{category: choice}``, where a choice is ``"deliver"``, ``"raise"``, or any other
  text: the operator's fixed message, delivered instead of every attempt (status ``exhausted``,
  reason ``operator_message``). The key ``"*"`` sets the choice of every category not listed
  (a FAIL without a category included); without it, they deliver (``deliver`` picks which
  reply). A key is a built-in category or one of the config's ``categories``.

The category that decides is the last FAIL's (the verdict that exhausted the turn). Only a
turn that really exhausted its attempts is concerned: a verifier fault, a cost or latency
budget, a skipped retry still fail open with the reply, whatever this key says.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator

from replyguard.context._prompt import BUILT_IN_CATEGORIES

EVERY_OTHER = "*"
"""The key of the choice for every category the object does not list."""
CHOICES = ("deliver", "raise")
"""The words that are a choice, not a message."""
MESSAGE_CHARS = 4000
"""The longest operator message."""


def _checked(value: Any) -> Any:
    """``value`` with each choice stripped; ``ValueError`` naming the first bad entry (before
    the type's own validation, so a mistake gets one message, not one per form)."""
    if isinstance(value, str):
        if value not in CHOICES:
            raise ValueError('must be "deliver", "raise", or an object {category: choice}')
        return value
    if not isinstance(value, dict):
        raise ValueError('must be "deliver", "raise", or an object {category: choice}')
    if not value:
        raise ValueError('an object needs at least one category (or "*")')
    checked: dict[str, str] = {}
    for key, choice in value.items():
        if not isinstance(choice, str) or not choice.strip():
            raise ValueError(f"the choice for {key!r} must be a message, deliver or raise")
        if len(choice.strip()) > MESSAGE_CHARS:
            raise ValueError(f"the message for {key!r} is over {MESSAGE_CHARS} characters")
        checked[key] = choice.strip()
    return checked


OnExhausted = Annotated[Literal["deliver", "raise"] | dict[str, str], BeforeValidator(_checked)]
"""The type of the ``onExhausted`` key (the verifier's and a run kind's)."""


def unknown_categories(value: OnExhausted, custom: dict[str, str]) -> list[str]:
    """The keys of a per-category ``onExhausted`` that name no category."""
    if isinstance(value, str):
        return []
    known = {*BUILT_IN_CATEGORIES, *custom, EVERY_OTHER}
    return [key for key in value if key not in known]


def exhausted_choice(value: OnExhausted, category: str | None) -> str:
    """What a turn whose last FAIL had ``category`` does when it is out of attempts:
    ``"deliver"``, ``"raise"``, or the operator's message."""
    if isinstance(value, str):
        return value
    if category is not None and category in value:
        return value[category]
    return value.get(EVERY_OTHER, "deliver")
