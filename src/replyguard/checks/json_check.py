"""The JSON check: the value's shape, a pydantic model and/or a JSON Schema, and field
rules; it tells the agent every problem it found (up to ten), quoting little of the reply.

It reads the reply with ``replyguard.checks.json_repair`` first.

Operator patterns (a field rule's ``pattern``; a JSON Schema's ``pattern``,
``patternProperties`` and the ``additionalProperties`` that depends on them) run with the time
limit of ``replyguard.checks.patterns``, in a worker thread; one that runs out of time is not
applied, and when nothing else is wrong the check passes with an ``error`` naming it (it fails
open). Not covered: ``unevaluatedProperties`` next to ``patternProperties`` (jsonschema's own
``re`` search).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from typing import Any, Literal

import pydantic

from replyguard.checks import patterns
from replyguard.checks.base import CheckResult, failed, passed
from replyguard.checks.json_repair import (
    JSON_TYPES,
    MAX_PROBLEMS,
    clip,
    json_type,
    problems_feedback,
    read_json,
)
from replyguard.config._checks import FieldRule
from replyguard.types import FailCategory, Reply, Turn

FieldCheck = Callable[[Any], tuple[bool, str]]
"""A field rule in code: takes the field's value, returns ``(ok, what to fix)``."""

_MISSING: Any = object()
_A = {kind: f"an {kind}" if kind[0] in "aeiou" else f"a {kind}" for kind in JSON_TYPES.values()}
_A["null"] = "null"
_EXPECTED = {"object": "a JSON object", "array": "a JSON array", "any": "valid JSON"}
_SHAPES: dict[str, type] = {"object": dict, "array": list, "any": object}


class JsonCheck:
    """The reply must be JSON of the expected shape that passes a model, schema and rules.

    The model's instance (or the parsed value) becomes the result's ``value``; with
    ``deliver_repaired`` the repaired text is delivered instead of the reply's own.
    """

    def __init__(
        self,
        *,
        model: type[pydantic.BaseModel] | None = None,
        schema: Mapping[str, Any] | None = None,
        expect: Literal["object", "array", "any"] = "any",
        fields: Mapping[str, FieldRule | FieldCheck] | None = None,
        deliver_repaired: bool = False,
        name: str = "json",
        required: bool = False,
        category: FailCategory = FailCategory.RULE_VIOLATION,
    ) -> None:
        self.name = name
        self.required = required
        self.category = category
        self.model = model
        self.expect = expect
        self.fields = dict(fields or {})
        self.deliver_repaired = deliver_repaired
        self._validator = _schema_validator(schema) if schema is not None else None
        self._has_patterns = _uses_patterns(schema) or any(
            isinstance(rule, FieldRule) and rule.pattern is not None
            for rule in self.fields.values()
        )

    async def check(self, turn: Turn, reply: Reply) -> CheckResult:
        expected, shape = _EXPECTED[self.expect], _SHAPES[self.expect]
        try:
            text, value = read_json(reply.text, shape)
        except ValueError as exc:
            return failed(self.name, self.category, f"The reply must be {expected}. {exc}")
        if not isinstance(value, shape):
            kind = _A[json_type(value)]
            return failed(self.name, self.category, f"The reply must be {expected}, not {kind}.")
        result: Any = value
        problems: list[str] = []
        if self.model is not None:
            try:
                result = self.model.model_validate(value)
            except pydantic.ValidationError as exc:
                problems = [_model_problem(error) for error in exc.errors(include_url=False)]
        timed_out: dict[str, Any] = {}
        if self._has_patterns:  # off the loop, by the patterns' time limit
            try:
                problems.extend(await asyncio.to_thread(self._bounded_problems, value))
            except patterns.PatternTimeout as exc:
                timed_out = {"error": str(exc)}
        else:
            problems.extend(islice(self._problems(value), MAX_PROBLEMS + 1))
        if problems:
            return failed(self.name, self.category, problems_feedback("Fix the JSON:", problems))
        deliver = text if self.deliver_repaired and text != reply.text else None
        return passed(self.name, value=result, deliver_text=deliver, **timed_out)

    def _bounded_problems(self, value: Any) -> list[str]:
        """The problems of ``value``, its patterns searched by their time limit, counted from
        here (in the worker thread: a wait for a free one is not taken from it)."""
        token = patterns.within(patterns.deadline())
        try:
            return list(islice(self._problems(value), MAX_PROBLEMS + 1))
        finally:
            patterns.reset(token)

    def _problems(self, value: Any) -> Iterator[str]:
        if self._validator is not None:
            yield from map(_schema_problem, self._validator.iter_errors(value))
        for path, rule in self.fields.items():
            yield from _field_problems(path, rule, _lookup(value, path))


def _schema_validator(schema: Mapping[str, Any]) -> Any:
    """A validator for ``schema``; ValueError names what is wrong with the schema."""
    # jsonschema ships no type information; it is imported only when a schema is used.
    from jsonschema import exceptions, validators  # type: ignore[import-untyped]

    validator_class = validators.validator_for(schema)
    try:
        validator_class.check_schema(schema)
    except exceptions.SchemaError as exc:
        raise ValueError(f"invalid JSON Schema at {exc.json_path}: {exc.message}") from None
    additional = validator_class.VALIDATORS.get("additionalProperties")

    def pattern(validator: Any, source: str, instance: Any, schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "string") and not patterns.search_source(source, instance):
            yield exceptions.ValidationError(f"{instance!r} does not match {source!r}")

    def pattern_properties(validator: Any, by_pattern: Any, instance: Any, schema: Any) -> Any:
        if not validator.is_type(instance, "object"):
            return
        for source, subschema in by_pattern.items():
            for key, item in instance.items():
                if patterns.search_source(source, key):
                    yield from validator.descend(item, subschema, path=key, schema_path=source)

    def additional_properties(validator: Any, allowed: Any, instance: Any, schema: Any) -> Any:
        by_pattern = schema.get("patternProperties")
        if not by_pattern or not validator.is_type(instance, "object"):
            if additional is not None:
                yield from additional(validator, allowed, instance, schema)
            return
        properties = schema.get("properties", {})
        extras = [
            key
            for key in instance
            if key not in properties
            and not any(patterns.search_source(source, key) for source in by_pattern)
        ]
        if validator.is_type(allowed, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], allowed, path=extra)
        elif allowed is False and extras:
            listed = ", ".join(repr(key) for key in sorted(extras))
            sources = ", ".join(repr(source) for source in sorted(by_pattern))
            yield exceptions.ValidationError(
                f"{listed} {'does' if len(extras) == 1 else 'do'} not match any of the "
                f"regexes: {sources}"
            )

    bounded = validators.extend(
        validator_class,
        {
            "pattern": pattern,
            "patternProperties": pattern_properties,
            "additionalProperties": additional_properties,
        },
    )
    return bounded(schema)


def _uses_patterns(schema: Any) -> bool:
    """Whether a JSON Schema holds a ``pattern`` or ``patternProperties`` keyword anywhere."""
    if isinstance(schema, Mapping):
        return any(
            (key == "pattern" and isinstance(item, str))
            or key == "patternProperties"
            or _uses_patterns(item)
            for key, item in schema.items()
        )
    if isinstance(schema, list):
        return any(_uses_patterns(item) for item in schema)
    return False


def _where(path: Iterable[str | int]) -> str:
    dotted = ".".join(map(str, path))
    return f"Field {dotted}" if dotted else "The JSON value"


def _model_problem(error: Mapping[str, Any]) -> str:
    return f"{_where(error['loc'])}: {clip(error['msg'], 200)}."


def _schema_problem(error: Any) -> str:
    message: str = error.message
    if len(message) > 100:  # jsonschema quotes the offending value: shorten it
        shown = repr(error.instance)
        message = message.replace(shown, clip(shown))
    return f"{_where(error.absolute_path)}: {clip(message, 200)}."


def _lookup(value: Any, path: str) -> Any:
    """The value at a dotted path (``items.0.name``), or ``_MISSING``."""
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isascii() and part.isdigit():
            if int(part) >= len(value):
                return _MISSING
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _field_problems(path: str, rule: FieldRule | FieldCheck, value: Any) -> Iterator[str]:
    field = f"Field {path}"
    if value is _MISSING:
        if not isinstance(rule, FieldRule) or rule.required:
            yield f"{field} is missing."
    elif isinstance(rule, FieldRule):
        yield from _rule_problems(field, rule, value)
    else:
        try:
            ok, message = rule(value)
        except Exception as exc:  # a bad value must fail the reply, not pass it by crashing
            yield f"{field} could not be checked ({type(exc).__name__})."
            return
        if not ok:
            yield f"{field}: {clip(message, 200)}"


def _rule_problems(field: str, rule: FieldRule, value: Any) -> Iterator[str]:
    kind = json_type(value)
    if rule.type not in (None, kind) and (rule.type, kind) != ("number", "integer"):
        yield f"{field} must be {_A[rule.type]}, got {kind}."
        return
    if rule.enum is not None and not any(_same(value, option) for option in rule.enum):
        yield f"{field} must be one of {clip(json.dumps(rule.enum, default=str), 100)}."
    if rule.pattern is not None:
        if kind != "string":
            yield f"{field} must be a string, got {kind}."
        elif not patterns.search_source(rule.pattern, value):
            yield f"{field} must match the pattern {clip(rule.pattern, 100)!r}."
    if rule.minimum is not None or rule.maximum is not None:
        if kind in ("integer", "number"):
            yield from _bounds(f"{field} must be", value, rule.minimum, rule.maximum, "")
        else:
            yield f"{field} must be a number, got {kind}."
    if rule.min_length is not None or rule.max_length is not None:
        if kind in ("string", "array"):
            unit = " characters" if kind == "string" else " items"
            low, high = rule.min_length, rule.max_length
            yield from _bounds(f"{field} must have", len(value), low, high, unit)
        else:
            yield f"{field} must be a string or an array, got {kind}."


def _same(value: Any, option: Any) -> bool:
    """JSON equality: ``1 == 1.0`` but ``true != 1``."""
    return isinstance(value, bool) == isinstance(option, bool) and bool(value == option)


def _bounds(
    subject: str, amount: float, low: float | None, high: float | None, unit: str
) -> Iterator[str]:
    # ``not >=`` rather than ``<`` so that NaN is out of every range.
    if low is not None and not amount >= low:
        yield f"{subject} at least {low:g}{unit}, got {clip(str(amount))}."
    if high is not None and not amount <= high:
        yield f"{subject} at most {high:g}{unit}, got {clip(str(amount))}."
