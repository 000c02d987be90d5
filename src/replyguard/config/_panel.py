"""The ``panel`` config section: several judge models asked at once, one decision.

``{"models": [...], "rule": "any_fail" | "majority", "minAnswers": 1}``; a member is a model
name, or ``{"model": ..., "fallbackModels": [...]}`` to give it fallbacks of its own.
``replyguard.judge._panel`` takes the decision from their verdicts.
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import BaseModel, Field, field_validator, model_validator

from replyguard.config._checks import FILE_MODEL

PanelRule = Literal["any_fail", "majority"]


class PanelMember(BaseModel):
    """One member of a panel: a judge model, and the fallbacks it alone tries."""

    model_config = FILE_MODEL

    model: str
    """The member's judge model, in litellm naming (or a ``router`` group)."""
    fallback_models: Annotated[tuple[str, ...], Field(strict=False)] = ()
    """Tried in order when this member's model errors (never another member's)."""

    @field_validator("model")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name a model")
        return value.strip()

    @field_validator("fallback_models")
    @classmethod
    def _fallbacks_named(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not m.strip() for m in value):
            raise ValueError("model names must not be empty")
        return tuple(m.strip() for m in value)


class PanelConfig(BaseModel):
    """Two or more judge models asked concurrently, within the same deadline, on every judged
    attempt; their verdicts decide together."""

    model_config = FILE_MODEL

    models: Annotated[tuple[str | PanelMember, ...], Field(strict=False)]
    """The members: at least two, preferably of different families from the agent's and each
    other's; each a model name or ``{"model", "fallbackModels"}``."""
    rule: PanelRule = "any_fail"
    """``"any_fail"``: one FAIL fails the reply; ``"majority"``: more FAILs than PASSes fail it
    (a tie fails)."""
    min_answers: int = Field(default=1, ge=1)
    """Members that must answer (errors, timeouts and unreadable answers are left out) for the
    panel to decide; fewer: fail open."""

    @field_validator("models")
    @classmethod
    def _members(cls, value: tuple[str | PanelMember, ...]) -> tuple[str | PanelMember, ...]:
        if len(value) < 2:
            raise ValueError("a panel needs at least two models")
        for entry in value:
            if isinstance(entry, str) and not entry.strip():
                raise ValueError("model names must not be empty")
        names = [m.strip() if isinstance(m, str) else m.model for m in value]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"each member once: {', '.join(repeated)} is listed twice")
        return value

    @model_validator(mode="after")
    def _enough_members(self) -> Self:
        if self.min_answers > len(self.models):
            raise ValueError(
                f"minAnswers ({self.min_answers}) is more than the panel's {len(self.models)} "
                "members"
            )
        return self

    @property
    def members(self) -> tuple[PanelMember, ...]:
        """Every member as a ``PanelMember``, in the order given."""
        return tuple(
            PanelMember.model_construct(model=m.strip(), fallback_models=())
            if isinstance(m, str)
            else m
            for m in self.models
        )
