"""Reading the config file's JSON, and naming where it is wrong: the verifier object located
(bare, or at ``agents.defaults.verifier``), repeated keys and non-JSON numbers refused with
their key, and each validation error turned into a ``(key path, message)`` pair."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, get_args

from pydantic import ValidationError

from replyguard.config._checks import CheckSpec
from replyguard.errors import ConfigError

NESTED_PATH = ("agents", "defaults", "verifier")


def _locate(document: Any, source: str) -> tuple[Any, str]:
    if not isinstance(document, dict):
        raise ConfigError(source, [("", "the config must be a JSON object")])
    if "agents" not in document:
        return document, ""
    node: Any = document
    for key in NESTED_PATH:
        if not isinstance(node, dict) or key not in node:
            where = ".".join(NESTED_PATH)
            raise ConfigError(source, [(where, "missing (expected the verifier object there)")])
        node = node[key]
    if not isinstance(node, dict):
        raise ConfigError(source, [(".".join(NESTED_PATH), "must be a JSON object")])
    return node, ".".join(NESTED_PATH) + "."


class _NotFinite:
    """Where the file has ``NaN``, ``Infinity`` or a number too large for a float."""

    def __init__(self, text: str) -> None:
        self.text = text


def _json_number(text: str) -> float | _NotFinite:
    value = float(text)
    return value if math.isfinite(value) else _NotFinite(text)


def _parse_json(text: str, source: str) -> tuple[Any, dict[int, str]]:
    """The document in ``text``, and the objects in it that were given a key twice (by ``id``,
    with the first such key): which of the two counts differs between parsers and editors.

    ``NaN`` and numbers too large for a float come back as ``_NotFinite``, for
    ``_non_json_value`` to refuse with the key; nesting too deep to read is refused here."""
    repeated: dict[int, str] = {}  # id of an object -> its first key given twice

    def json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            names = [name for name, _ in pairs]
            repeated[id(obj)] = next(n for i, n in enumerate(names) if n in names[:i])
        return obj

    try:
        document = json.loads(
            text, object_pairs_hook=json_object, parse_float=_json_number, parse_constant=_NotFinite
        )
    except json.JSONDecodeError as exc:
        where = f"at line {exc.lineno} column {exc.colno}"
        raise ConfigError(source, [("", f"not valid JSON: {exc.msg} {where}")]) from None
    except RecursionError:
        raise ConfigError(source, [("", "not valid JSON: nested too deeply to read")]) from None
    return document, repeated


def _non_json_value(document: Any, repeated: dict[int, str]) -> tuple[str, str] | None:
    """``(key, message)`` for the first repeated key or non-finite number in ``document``, in
    file order: JSON allows neither, though Python's parser takes both."""
    stack: list[tuple[str, Any]] = [("", document)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, _NotFinite):
            return path, f"{node.text} is not a finite number"
        if isinstance(node, dict):
            if id(node) in repeated:
                key = f"{path}.{repeated[id(node)]}" if path else repeated[id(node)]
                return key, "given more than once in the same object: keep one"
            children = [(f"{path}.{k}" if path else k, v) for k, v in node.items()]
        elif isinstance(node, list):
            children = [(f"{path}.{i}" if path else str(i), v) for i, v in enumerate(node)]
        else:
            continue
        stack.extend(reversed(children))
    return None


def _check_types() -> frozenset[str]:
    union = get_args(CheckSpec)[0]
    return frozenset(get_args(spec.model_fields["type"].annotation)[0] for spec in get_args(union))


_CHECK_TYPES = _check_types()
# Keys whose type is a union: pydantic reports a value that fits no member once per member,
# under the member's name (``checks.0.command.list[str]``, ``checks.0.command.str``).
_UNION_MEMBERS = {"command": frozenset({"list[str]", "str"})}


def keys_at(schema: Mapping[str, Any], path: Iterable[str | int]) -> frozenset[str]:
    """The keys an object at ``path`` may hold, by the JSON Schema: for "did you mean", so a
    hint never names a key of another object. A union gives all its members' keys, or those of
    the member whose ``type`` the path names (``checks.0.rules``)."""
    definitions = schema.get("$defs", {})

    def members(node: Any) -> list[Any]:
        """``node`` with references followed and unions spread."""
        if not isinstance(node, dict):
            return []
        if "$ref" in node:
            return members(definitions.get(node["$ref"].rsplit("/", 1)[-1]))
        spread = [m for key in ("anyOf", "oneOf", "allOf") for m in node.get(key, ())]
        return [n for m in spread for n in members(m)] if spread else [node]

    def tags(node: Any) -> set[Any]:
        """The values a union member's ``type`` key is fixed to (a check's type)."""
        tag = node.get("properties", {}).get("type", {})
        return {tag.get("const"), *tag.get("enum", ())} if isinstance(tag, dict) else set()

    nodes = members(schema)
    for part in path:
        tagged = [node for node in nodes if part in tags(node)]
        if tagged:  # a check's type, named in the error's path though not in the file
            nodes = tagged
            continue
        step: list[Any] = []
        for node in nodes:
            properties = node.get("properties", {})
            if isinstance(part, str) and part in properties:
                step += members(properties[part])
            elif isinstance(part, int) and "items" in node:
                step += members(node["items"])
            elif isinstance(node.get("additionalProperties"), dict):
                step += members(node["additionalProperties"])
        nodes = step
    return frozenset(key for node in nodes for key in node.get("properties", {}))


def unknown_key(key: object, known: Iterable[str]) -> str:
    """``unknown key``, with ``(did you mean `maxAttempts`?)`` when a known key is close."""
    import difflib  # only for a misspelt key's suggestion

    close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.75)
    return f"unknown key (did you mean `{close[0]}`?)" if close else "unknown key"


def object_message(error: Mapping[str, Any], message: str) -> str:
    """``message``, unless it names an internal class ("instance of _Reply"): then plain."""
    if error["type"] in ("model_type", "model_attributes_type", "dict_type"):
        return "must be a JSON object"
    return message


def _problems(
    exc: ValidationError, prefix: str = "", schema: Mapping[str, Any] | None = None
) -> list[tuple[str, str]]:
    """One ``(key, message)`` per bad key, the key as the file spells it (camelCase, dotted);
    an unknown key gets the closest key of its object in ``schema`` as a hint.

    A check entry's errors carry its ``type`` after the index (``checks.0.rules.maxLength``);
    that tag is not in the file and is dropped. The per-member errors of a union key become one
    problem.
    """
    problems: dict[str, list[str]] = {}
    for error in exc.errors(include_input=False, include_url=False):
        loc: list[str | int] = list(error["loc"])
        message = object_message(error, error["msg"].removeprefix("Value error, "))
        if error["type"] == "extra_forbidden":
            message = unknown_key(loc[-1], keys_at(schema, loc[:-1]) if schema else ())
        if len(loc) >= 3 and loc[0] == "checks" and isinstance(loc[1], int):
            if loc[2] in _CHECK_TYPES:
                del loc[2]
            if len(loc) >= 4 and loc[3] in _UNION_MEMBERS.get(str(loc[2]), ()):
                rest = ".".join(str(part) for part in loc[4:])
                message = f"as {loc[3]}{' at ' + rest if rest else ''}: {message}"
                loc = loc[:3]
        if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
            loc.append("type")
            known = ", ".join(sorted(_CHECK_TYPES))
            given = "unknown" if error["type"] == "union_tag_invalid" else "missing"
            message = f"{given} check type (one of: {known})"
        key = prefix + ".".join(str(part) for part in loc) if loc else prefix.rstrip(".")
        problems.setdefault(key, []).append(message)
    return [(key, "; or ".join(messages)) for key, messages in problems.items()]
