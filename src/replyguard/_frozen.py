"""The base of replyguard's frozen values: a pydantic model that is frozen, forbids extra
fields and is built on first use (``defer_build``), with a typed signature for ``help()`` and
editors before it is built; ``replaced``, the cheap ``model_copy(update=...)`` of the
verified turn's hot path, and ``assembled``, its cheap constructor of values made of parts
already valid.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict
from pydantic.fields import FieldInfo


class _Factory:
    """The default of a field whose default is made per instance (a fresh list, dict ...)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


class _FieldSignature:
    """``inspect.signature`` of a model class before pydantic builds it (``defer_build``): the
    typed keyword parameters pydantic gives a built model, instead of ``(**data: Any)``.

    ``help()``, IPython, Jupyter and editors that run code read it; static checkers (mypy,
    pyright) read the fields through pydantic's ``dataclass_transform`` anyway. Once pydantic
    builds the model it sets its own ``__signature__`` on the class, which takes over. An
    instance has no signature of its own (``inspect`` then reads ``__call__``).
    """

    def __get__(self, instance: object, owner: type[BaseModel]) -> inspect.Signature:
        if instance is not None:
            raise AttributeError("__signature__")
        parameters = []
        for name, info in owner.model_fields.items():
            if info.is_required():
                default: Any = inspect.Parameter.empty
            else:
                default = _FACTORY if info.default_factory is not None else info.default
            parameters.append(
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=default,
                    annotation=info.annotation,
                )
            )
        return inspect.Signature(parameters, return_annotation=None)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    # A descriptor in place of pydantic's ClassVar[Signature]: it reads the same from the class.
    __signature__ = _FieldSignature()


_new = object.__new__  # a model's own: pydantic defines none (read here, past its metaclass)
# The four slots every pydantic model has, each set through its own descriptor, bound once:
# a third of what ``object.__setattr__`` costs a call, on the turn's every model made here.
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_M = TypeVar("_M", bound=BaseModel)  # replyguard's own models (``JudgeReply`` too)


def replaced(model: _M, update: dict[str, Any]) -> _M:
    """``model.model_copy(update=update)`` without pydantic's general copy when the model has
    no extra fields and no private attributes (this module's own never do; a host's subclass
    might): a few microseconds less on every verified turn. Like ``model_copy``, the new
    values are not validated."""
    if model.__pydantic_extra__ is not None or model.__pydantic_private__ is not None:
        return model.model_copy(update=update)
    fresh = _new(type(model))
    _set_dict(fresh, {**model.__dict__, **update})
    _set_extra(fresh, None)
    _set_fields_set(fresh, model.__pydantic_fields_set__.union(update))
    _set_private(fresh, None)
    return fresh


@functools.cache
def _layout(cls: type[_Frozen]) -> tuple[dict[str, Any], frozenset[str], dict[str, FieldInfo]]:
    """``cls``'s fields in order with their defaults (None for a required one or one with a
    factory), its required fields, and its fields' default factories."""
    defaults: dict[str, Any] = {}
    required: list[str] = []
    factories: dict[str, FieldInfo] = {}
    for name, info in cls.model_fields.items():
        defaults[name] = None if info.is_required() else info.get_default()
        if info.is_required():
            required.append(name)
        elif info.default_factory is not None:
            factories[name] = info
    return defaults, frozenset(required), factories


def assembled(cls: type[_M], **given: Any) -> _M:
    """``cls(**given)`` for values replyguard made itself from parts already valid, each of
    its field's exact type (an enum member, a float, a tuple of models): the instance
    validation would make (the defaults of the fields not given, ``model_fields_set`` the
    fields given), without validating them again. Only for replyguard's own models, none of
    which has a validator that changes a value; one that checks values is the caller's to
    keep (``_policy.settled``)."""
    return assembled_from(cls, given)


def assembled_from(cls: type[_M], given: dict[str, Any]) -> _M:
    """``assembled(cls, **given)`` for a caller that holds its fields in a dict already
    (``given`` is read, never kept or changed): the same instance, without packing the
    fields into keyword arguments again."""
    defaults, required, factories = _layout(cls)
    values = {**defaults, **given}
    if len(values) != len(defaults) or not given.keys() >= required:
        return cls(**given)  # a field unknown or missing: validation says which
    for name, info in factories.items():
        if name not in given:
            values[name] = info.get_default(call_default_factory=True, validated_data=values)
    fresh = _new(cls)
    _set_dict(fresh, values)
    _set_extra(fresh, None)
    _set_fields_set(fresh, set(given))
    _set_private(fresh, None)
    return fresh
