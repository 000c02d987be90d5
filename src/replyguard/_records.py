"""A turn as JSON (the ``verify`` input) and an eval record (one line of an eval dataset).

Keys are camelCase, like the config; only ``userMessage`` and ``reply`` are required; an
unknown key, a wrong type or a missing key is a ``RecordError`` naming the file, the line (for
datasets) and the key. ``reply`` is a string or ``{"text": ..., "meta": {...}}`` with the
``RunMeta`` fields in camelCase (``stopReason``, ``pendingToolCalls``, ``toolCalls``, ...).
An eval record adds ``label`` (``"PASS"`` or ``"FAIL"``), ``labelCategory`` (only with a FAIL
label), ``judgeOutput`` (a recorded raw judge text, for ``eval --replay``),
``judgeOutputModel`` (the model that wrote it) and ``synthetic`` (the record was written, not
recorded). None of them reaches the judge.

A dataset is read whole before it is refused: every bad line is reported at once (the first
``MAX_REPORTED`` of them, then how many more) in one ``DatasetError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from replyguard.config._checks import FILE_MODEL
from replyguard.config._json_file import keys_at, object_message, unknown_key
from replyguard.errors import ReplyguardError
from replyguard.gate._prechecks import skip_reason
from replyguard.types import FailCategory, Reply, RunMeta, ToolCallRecord, Turn

RECORD_MODEL = ConfigDict(**{**FILE_MODEL, "validate_by_name": False, "defer_build": True})
"""How a record reads: the config file's way, but camelCase keys only (a snake_case key is
an unknown key). Built on first use: ``heartbeat`` and the other commands that read no
record do not wait for it (about 20 ms)."""

Label = Literal["PASS", "FAIL"]


class RecordError(ReplyguardError, ValueError):
    """A turn or eval record is invalid: ``path``, ``line`` (or None) and ``(key, message)``."""

    def __init__(self, path: str, line: int | None, problems: list[tuple[str, str]]) -> None:
        self.path = path
        self.line = line
        self.problems = problems
        where = f"{path}:{line}" if line is not None else path
        shown = "; ".join(f"{key}: {message}" if key else message for key, message in problems)
        super().__init__(f"{where}: invalid record: {shown}")


MAX_REPORTED = 20
"""The most bad lines of a dataset a ``DatasetError`` lists (it counts the rest)."""


class DatasetError(RecordError):
    """Lines of a dataset are invalid: ``errors`` holds one ``RecordError`` per bad line (the
    first ``MAX_REPORTED``), ``total`` how many lines are bad. ``line`` and ``problems`` are
    the first bad line's; with one bad line the message is that line's own."""

    def __init__(self, path: str, errors: list[RecordError], total: int) -> None:
        self.errors = errors
        self.total = total
        super().__init__(path, errors[0].line, errors[0].problems)
        if total > 1:
            shown = "".join(f"\n  {error}" for error in errors)
            more = total - len(errors)
            rest = f"\n  ... and {more} more invalid line{'s' if more != 1 else ''}" if more else ""
            self.args = (f"{path}: {total} invalid records:{shown}{rest}",)


class _ToolCall(ToolCallRecord):
    model_config = RECORD_MODEL


class _Meta(RunMeta):
    model_config = RECORD_MODEL

    streamed_block_keys: Annotated[frozenset[str], Field(strict=False)] = frozenset()
    tool_calls: Annotated[tuple[_ToolCall, ...], Field(strict=False)] = ()


class _Reply(Reply):
    model_config = RECORD_MODEL

    meta: _Meta = Field(default_factory=_Meta)  # not an instance: none is built at import


class TurnRecord(Turn):
    """A turn as JSON, with the reply to judge."""

    model_config = RECORD_MODEL

    reply: _Reply
    """The agent's reply: a string, or ``{"text", "meta"}``."""

    @field_validator("reply", mode="before")
    @classmethod
    def _text_is_a_reply(cls, value: Any) -> Any:
        return {"text": value} if isinstance(value, str) else value

    def turn(self) -> Turn:
        """The turn, as the verifier takes it."""
        return Turn.model_validate(self.model_dump(include=set(Turn.model_fields)))

    def agent_reply(self) -> Reply:
        """The reply, as the verifier takes it."""
        return Reply.model_validate(self.reply.model_dump())


class EvalRecord(TurnRecord):
    """One line of an eval dataset: a turn, its human label and a recorded judge output."""

    label: Label | None = None
    """The human verdict, when the record is labelled."""
    label_category: FailCategory | str | None = None
    """The category the human gave a FAIL label: a built-in, or one of the config's custom
    ``categories`` (any case; spaces and hyphens read as underscores)."""
    judge_output: str | None = None
    """A recorded raw judge text, parsed instead of calling a model under ``--replay``."""
    judge_output_model: str | None = None
    """The model that wrote ``judgeOutput``, when known (the report names it under replay)."""
    synthetic: bool = False
    """The record was written (by hand or generated), not recorded from a real conversation
    and judge: the report says so, since its figures then measure no model."""

    @field_validator("label_category", mode="before")
    @classmethod
    def _category_name(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        name = "_".join(value.replace("-", " ").replace("_", " ").split()).lower()
        try:
            return FailCategory(name)
        except ValueError:
            pass
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise ValueError("not a category name (a built-in or one of the config's categories)")
        return name

    @model_validator(mode="after")
    def _category_needs_a_fail(self) -> Self:
        if self.label_category is not None and self.label != "FAIL":
            raise ValueError("labelCategory is only given with label FAIL")
        return self


R = TypeVar("R", bound="TurnRecord")


def _problems(exc: ValidationError, kind: type[TurnRecord]) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for error in exc.errors(include_input=False, include_url=False):
        key = ".".join(str(part) for part in error["loc"])
        message = object_message(error, error["msg"].removeprefix("Value error, "))
        if key == "reply" and message == "must be a JSON object":
            message = 'must be a string or a JSON object {"text", "meta"}'
        if error["type"] == "extra_forbidden":
            *path, name = error["loc"]
            message = unknown_key(name, keys_at(kind.model_json_schema(), path))
        elif error["type"] == "missing":
            message = "required key missing"
        problems.append((key, message))
    return problems


def parse_record(kind: type[R], data: Any, *, path: str, line: int | None = None) -> R:
    """Validate a parsed JSON value as ``kind``; raises ``RecordError`` naming each bad key."""
    if not isinstance(data, dict):
        raise RecordError(path, line, [("", "a record must be a JSON object")])
    try:
        return kind.model_validate(data)
    except ValidationError as exc:
        raise RecordError(path, line, _problems(exc, kind)) from None


def read_record(kind: type[R], text: str, *, path: str, line: int | None = None) -> R:
    """Parse one JSON document (a file, or one line of a dataset) as ``kind``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        problem = f"not valid JSON: {exc.msg} at column {exc.colno}"
        if line is None:
            problem = f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        raise RecordError(path, line, [("", problem)]) from None
    except RecursionError:
        raise RecordError(path, line, [("", "not valid JSON: nested too deeply")]) from None
    return parse_record(kind, data, path=path, line=line)


RecordCheck = Callable[["EvalRecord"], list[tuple[str, str]]]
"""More problems of a valid record, as ``(key, message)`` pairs (none: the record is fine)."""


def read_dataset(
    path: str | Path, *, replay: bool = False, check: RecordCheck | None = None
) -> list[tuple[int, EvalRecord]]:
    """Every record of the JSONL dataset file at ``path``, as ``parse_dataset`` reads them.

    An unreadable file is a ``RecordError`` without a line.
    """
    name = str(path)
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise RecordError(name, None, [("", "file not found")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(name, None, [("", f"cannot read: {type(exc).__name__}")]) from None
    return parse_dataset(text, name=name, replay=replay, check=check)


def parse_dataset(
    text: str, *, name: str, replay: bool = False, check: RecordCheck | None = None
) -> list[tuple[int, EvalRecord]]:
    """Every record of a JSONL dataset with its line number; blank lines are ignored.

    Lines end at a line feed only (a carriage return before it is dropped): U+2028, U+2029,
    U+0085 and other line breaks may stand raw inside a JSON string. With ``replay`` every
    record must carry ``judgeOutput``, but for those the pre-checks skip (they are never
    judged). ``check`` finds more problems in each valid record. Every bad line is reported
    at once in a ``DatasetError``; a dataset without records is a ``RecordError``.
    """
    records: list[tuple[int, EvalRecord]] = []
    errors: list[RecordError] = []
    bad = 0
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.removesuffix("\r")
        if not line.strip():
            continue
        try:
            record = read_record(EvalRecord, line, path=name, line=number)
        except RecordError as exc:
            problems = exc.problems
        else:
            problems = check(record) if check is not None else []
            if replay and record.judge_output is None and skip_reason(record.agent_reply()) is None:
                problems = [*problems, ("judgeOutput", "required under --replay")]
            if not problems:
                records.append((number, record))
                continue
        bad += 1
        if len(errors) < MAX_REPORTED:
            errors.append(RecordError(name, number, problems))
    if errors:
        raise DatasetError(name, errors, bad)
    if not records:
        raise RecordError(name, None, [("", "the dataset holds no records")])
    return records
