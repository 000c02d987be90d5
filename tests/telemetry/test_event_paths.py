"""An event recorded straight from ``Events`` is the record structlog's path makes, and its
rendering is the one the single structlog processor made before it was shared."""

from __future__ import annotations

import enum
import json
import logging
import re
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import structlog

from replyguard import Status
from replyguard.telemetry import REDACTED, Events, redact
from replyguard.telemetry._events import _REMEMBERED

KEY = "sk-ant-api03-SECRET-abcdefghijklmnop"
SHAPED = "sk-proj-ABCDEFGHIJKLMNOPQRST"
# Every value the events below hold passes through redaction; TIME_ONES differ by the clock.
TIME_ONES = ("created", "msecs", "relativeCreated")


class Kind(enum.Enum):
    LOUD = "loud"


class Word(str, enum.Enum):  # noqa: UP042 - not a StrEnum: its str() is "Word.PASSED"
    """A str enum whose member equals a ``Status`` member and a plain string."""

    PASSED = "passed"


class Shown:
    def __repr__(self) -> str:
        return "<shown = as it is>"


EVENTS: list[tuple[str, dict[str, Any]]] = [
    ("verdict", {"turn_id": "t-1", "attempt": 1, "passed": True, "category": None,
                 "model": "judge/x", "cost_usd": 0.0, "latency_ms": 0.12, "trimmed": ()}),
    ("passed", {"turn_id": "t-1", "run_kind": None, "status": Status.PASSED, "attempts": 2}),
    ("passed", {"turn_id": "t-2", "status": Word.PASSED, "again": "passed", "kind": Kind.LOUD}),
    ("failed_open", {"error": f"401 invalid x-api-key {KEY} here", "reason": "judge_error"}),
    ("quoted", {"space": "a b", "quote": 'x"y', "equals": "k=v", "empty": "", "slash": "a\\b",
                "newline": "a\nb", "unicode": "caf\u00e9\u00a0x", "tab": "a\tb"}),
    ("shapes", {"note": f"key {SHAPED} leaked", "long": "x " * 300 + SHAPED}),
    ("nested", {"panel": {"judge/a": "PASS", "judge/b": None}, "items": [KEY, 1, ("t", None)],
                "trimmed": ["history"], "empty": [], "odd": Shown(), "big": 10**30}),
    ("types", {"flag": False, "count": 0, "ratio": float("nan"), "inf": -float("inf")}),
    (KEY, {"named": "event named by a key"}),
    (Word.PASSED, {"named": "by a member"}),
]  # fmt: skip


def oracle(
    event: Any, fields: Mapping[str, Any], secrets: tuple[str, ...]
) -> tuple[str, dict[str, Any]]:
    """The structlog processor replyguard had before its rendering was shared, written out."""

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            return redact(value, secrets)
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [scrub(v) for v in value]
        return value

    def shown(value: Any) -> str:
        if isinstance(value, enum.Enum):
            value = value.value
        if isinstance(value, str):
            bare = re.fullmatch(r"[^\s\"'=\\]+", value)
            return value if bare else json.dumps(value, ensure_ascii=False)
        return repr(value)

    name = str(scrub(event))
    kept: dict[str, Any] = {}
    pairs = [name]
    for key, value in fields.items():
        if type(value) in (bool, int, float, type(None)):
            pairs.append(f"{key}={value!r}")
        else:
            value = scrub(value)
            pairs.append(f"{key}={shown(value)}")
        kept[key] = value
    return " ".join(pairs), {"replyguard": {"event": name, **kept}}


def typed(value: Any) -> Any:
    """``value`` with the type of everything in it, so that an enum left as a member and one
    made a plain string (or a tuple and a list) compare different."""
    if isinstance(value, dict):
        return (type(value), [(k, typed(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value), [typed(v) for v in value])
    return (type(value), repr(value))


@pytest.mark.parametrize("secrets", [(), (KEY,)], ids=["no secrets", "a secret"])
def test_each_event_renders_as_the_structlog_processor_rendered_it(
    secrets: tuple[str, ...],
) -> None:
    events = Events(secrets)
    for _ in range(2):  # the second time from what the renderer remembers
        for event, fields in EVENTS:
            got = events._render(event, fields)
            assert typed(got) == typed(oracle(event, fields, secrets)), event
    assert KEY not in repr([events._render(e, f) for e, f in EVENTS])


def test_a_redacted_string_is_not_remembered_and_memory_stays_bounded() -> None:
    events = Events((KEY,))
    events._render("failed_open", {"error": f"bad {KEY}", "short": SHAPED})
    remembered = repr((events._render._plain, events._render._members))
    assert KEY not in remembered and SHAPED not in remembered
    for number in range(3 * _REMEMBERED):
        message, extra = events._render("passed", {"turn_id": f"t-{number}"})
        assert message == f"passed turn_id=t-{number}"
        assert extra == {"replyguard": {"event": "passed", "turn_id": f"t-{number}"}}
    assert len(events._render._plain) <= _REMEMBERED


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    logger = logging.getLogger("replyguard")
    handler = Records()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def fire(record: Any, level: int, event: str, **fields: Any) -> None:
    record(level, event, **fields)  # one line for both paths: the records name it alike


def test_a_record_made_straight_is_the_record_structlog_makes(
    records: list[logging.LogRecord],
) -> None:
    """Every attribute of every record alike (but the clock's), whatever the level, the
    values or the secrets; the direct path is the one taken with no structlog configured."""
    direct, through = Events((KEY,)), Events((KEY,))
    through.__dict__["_direct"] = False  # as with a host's structlog context class
    levels = (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)
    for level in levels:
        for event, fields in EVENTS:
            fire(direct.emit, level, event, **fields)
            fire(through._logger.log, level, event, **fields)
    assert direct._direct is True
    assert len(records) == 2 * len(levels) * len(EVENTS)
    for made, expected in zip(records[::2], records[1::2], strict=True):
        seen = {k: typed(v) for k, v in vars(made).items() if k not in TIME_ONES}
        assert seen == {k: typed(v) for k, v in vars(expected).items() if k not in TIME_ONES}
        assert made.funcName == "fire" and made.pathname == __file__
        assert made.getMessage() == expected.getMessage()
    assert all(KEY not in r.getMessage() and KEY not in repr(r.__dict__) for r in records)


def test_every_entry_point_makes_the_record_structlog_makes(
    records: list[logging.LogRecord],
) -> None:
    """``emit_fields``' mapping, ``emit``'s keywords and the level's own method make the same
    record, naming the line that called them; the mapping given is neither changed nor kept."""
    direct, through = Events((KEY,)), Events((KEY,))
    through.__dict__["_direct"] = False  # as with a host's structlog context class
    calls: list[int] = []
    here = sys._getframe()
    for event, fields in EVENTS:
        given = dict(fields)
        direct.emit_fields(logging.WARNING, event, given)
        calls.append(here.f_lineno - 1)
        direct.emit(logging.WARNING, event, **fields)
        calls.append(here.f_lineno - 1)
        direct.warning(event, **fields)
        calls.append(here.f_lineno - 1)
        through._logger.warning(event, **fields)
        calls.append(here.f_lineno - 1)
        assert typed(given) == typed(fields)
        assert all(r.replyguard is not given for r in records[-4:])  # type: ignore[attr-defined]
    assert [r.lineno for r in records] == calls
    name = test_every_entry_point_makes_the_record_structlog_makes.__name__
    for made in records:
        assert made.funcName == name and made.pathname == __file__
    ignored = {*TIME_ONES, "lineno"}
    for group in range(0, len(records), 4):
        expected = {k: typed(v) for k, v in vars(records[group + 3]).items() if k not in ignored}
        for made in records[group : group + 3]:
            assert {k: typed(v) for k, v in vars(made).items() if k not in ignored} == expected
    assert all(KEY not in r.getMessage() and KEY not in repr(r.__dict__) for r in records)


def test_a_level_structlog_has_no_name_for_is_lost_as_before(
    records: list[logging.LogRecord], capsys: pytest.CaptureFixture[str]
) -> None:
    """A level between the named ones goes through structlog, which rejects it: the event is
    lost, the emitter says so once, the caller never sees it (as before the direct path)."""
    events = Events()
    events.emit(logging.INFO + 5, "odd", note="x")
    events.emit(logging.INFO, "even", note="x")
    assert [r.getMessage() for r in records] == ["even note=x"]
    assert "raised KeyError on the 'odd' event" in capsys.readouterr().err


class RequestContext(dict[str, Any]):
    """A host's structlog context class that adds its request id to every logger's context."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.setdefault("request_id", "r-1")


def test_a_hosts_structlog_context_class_still_adds_its_context(
    records: list[logging.LogRecord],
) -> None:
    """A host that configured structlog's context class before the first event gets its
    context in every event, as before: such events take structlog's own path."""
    structlog.configure(context_class=RequestContext)
    try:
        events = Events((KEY,))
        events.info("passed", turn_id="t-1", status=Status.PASSED)
        events.warning("failed_open", error=f"bad {KEY}")
    finally:
        structlog.reset_defaults()
    assert events._direct is False
    assert [r.getMessage() for r in records] == [
        "passed request_id=r-1 turn_id=t-1 status=passed",
        f'failed_open request_id=r-1 error="bad {REDACTED}"',
    ]
    assert records[0].replyguard == {  # type: ignore[attr-defined]
        "event": "passed", "request_id": "r-1", "turn_id": "t-1", "status": "passed"
    }  # fmt: skip
