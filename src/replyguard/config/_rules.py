"""What ``VerifierConfig`` checks beyond each field's type: the validators, in a base class.

``ConfigRules`` holds them so that ``config/_schema.py`` keeps the field declarations alone;
``VerifierConfig`` inherits them (the field validators name fields the subclass declares,
hence ``check_fields=False``). ``RunKindsInvalid`` carries a run kind's problems with their
keys out of pydantic to the loader (``config/_loading.py``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Self

from pydantic import BaseModel, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from replyguard.config._checks import FILE_MODEL, relative_inside
from replyguard.config._exhausted import OnExhausted, unknown_categories
from replyguard.config._rubric import checked_categories
from replyguard.errors import ReplyguardError

if TYPE_CHECKING:  # declared by VerifierConfig
    from replyguard.config._router import RouterConfig


class RunKindsInvalid(ReplyguardError):
    """A run kind does not validate merged over its config (not a ValueError, so pydantic lets
    it through with its keys; ``load``/``from_dict`` turn it into a ``ConfigError``)."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{key}: {message}" for key, message in problems))


def _stripped(value: tuple[str, ...], what: str) -> tuple[str, ...]:
    """Each of ``value`` without surrounding blanks; none may be blank (``what`` names them)."""
    if any(not item.strip() for item in value):
        raise ValueError(f"{what} must not be empty")
    return tuple(item.strip() for item in value)


class ConfigRules(BaseModel):
    """The validators of ``VerifierConfig``'s fields, and of the config as a whole."""

    model_config = FILE_MODEL  # as every model of the file: built on first use, not at import

    if TYPE_CHECKING:  # the fields the whole-config rules read (declared by VerifierConfig)
        model: str
        router: RouterConfig | None
        on_exhausted: OnExhausted
        categories: dict[str, str]

    @model_validator(mode="before")
    @classmethod
    def _drop_schema_key(cls, data: Any) -> Any:
        if isinstance(data, dict) and "$schema" in data:
            data = {k: v for k, v in data.items() if k != "$schema"}
        return data

    @field_validator("workspace_dir", mode="before", check_fields=False)
    @classmethod
    def _path_to_text(cls, value: Any) -> Any:
        return os.fspath(value) if isinstance(value, os.PathLike) else value

    @field_validator("model", check_fields=False)
    @classmethod
    def _model_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name a model")
        return value.strip()

    @model_validator(mode="after")
    def _model_is_a_router_group(self) -> Self:
        # After the fields, so that a default ``model`` (never field-validated) is checked too.
        if self.router is not None and self.model not in self.router.groups:
            groups = ", ".join(sorted(self.router.groups))
            problem = f"{self.model!r} is not a router group (one of: {groups})"
            error = PydanticCustomError("value_error", "{problem}", {"problem": problem})
            raise ValidationError.from_exception_data(
                type(self).__name__, [{"type": error, "loc": ("model",), "input": self.model}]
            )
        return self

    @field_validator("fallback_models", check_fields=False)
    @classmethod
    def _fallbacks_not_empty(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _stripped(value, "model names")

    @field_validator("trigger_keywords", check_fields=False)
    @classmethod
    def _keywords_not_empty(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _stripped(value, "keywords")

    @field_validator("side_effect_tools", check_fields=False)
    @classmethod
    def _patterns_not_empty(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        _stripped(value, "tool-name patterns")
        return value  # a pattern is matched as written

    @field_validator("rules_files", check_fields=False)
    @classmethod
    def _rules_files_relative(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(relative_inside(v, "rulesFiles entry") for v in value)

    @field_validator("heartbeat_file", check_fields=False)
    @classmethod
    def _heartbeat_file_relative(cls, value: str) -> str:
        return relative_inside(value, "heartbeatFile")

    @field_validator("rubric_file", check_fields=False)
    @classmethod
    def _rubric_file_relative(cls, value: str | None) -> str | None:
        return None if value is None else relative_inside(value, "rubricFile")

    @field_validator("categories", check_fields=False)
    @classmethod
    def _categories_named(cls, value: dict[str, str]) -> dict[str, str]:
        return checked_categories(value)

    @model_validator(mode="after")
    def _on_exhausted_categories(self) -> Self:
        unknown = unknown_categories(self.on_exhausted, self.categories)
        if unknown:
            problem = f"{unknown[0]!r} is not a category (built in, in categories, or '*')"
            error = PydanticCustomError("value_error", "{problem}", {"problem": problem})
            raise ValidationError.from_exception_data(
                type(self).__name__,
                [{"type": error, "loc": ("onExhausted", unknown[0]), "input": None}],
            )
        return self
