"""Log events: routed to the stdlib logger, silent by default, redacted, content opt-in."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from replyguard import Status, Turn, Verifier
from replyguard.telemetry import REDACTED, Events, describe_error, redact
from replyguard.testing import ScriptedAgent, ScriptedJudge

API_KEY = "sk-ant-api03-SECRET-abcdefghijklmnop"
USER_TEXT = "my account number is 4242-SECRET-USER-TEXT"
REPLY_TEXT = "Done: moved 4242-SECRET-REPLY-TEXT"


def all_log_text(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(f"{r.getMessage()} {getattr(r, 'replyguard', '')}" for r in caplog.records)


def test_host_without_logging_config_sees_nothing_printed() -> None:
    script = textwrap.dedent(
        """
        import asyncio
        from replyguard import Turn, Verifier, VerifierConfig
        from replyguard.testing import ScriptedAgent, ScriptedJudge
        config = VerifierConfig(enabled=True, verify_all=True, agent_model="claude-3-haiku")
        verifier = Verifier(config, judge=ScriptedJudge([RuntimeError("judge down")]))
        outcome = asyncio.run(verifier.run(ScriptedAgent(["Hello"]), Turn(user_message="Hi")))
        assert outcome.status == "failed_open", outcome.status
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_an_event_no_handler_would_receive_leaves_structlog_unloaded() -> None:
    """With only ``NullHandler``s on the way (a host that configured no logging), a warning
    goes nowhere and structlog is not imported for it; a handler added later gets the next."""
    script = textwrap.dedent(
        """
        import logging, sys
        from replyguard.telemetry._events import Events
        events = Events()
        events.warning("judge_failed_open", reason="timeout")
        print("structlog" in sys.modules)
        seen = []
        handler = logging.Handler()
        handler.emit = seen.append
        logging.getLogger().addHandler(handler)
        events.warning("judge_failed_open", reason="timeout")
        print("structlog" in sys.modules, [r.getMessage().split()[0] for r in seen])
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.splitlines() == ["False", "True ['judge_failed_open']"]


async def test_each_decision_is_one_structured_record(
    make_config: Any, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    verifier = Verifier(make_config(), judge=ScriptedJudge(["FAIL [incomplete]: more", "PASS"]))
    await verifier.run(ScriptedAgent(["Done.", "Done!"]), Turn(user_message="Hi", id="t-7"))
    events = [r.replyguard for r in replyguard_logs.records]  # type: ignore[attr-defined]
    events = [e for e in events if e["event"] != "checks"]
    assert [e["event"] for e in events] == ["verdict", "retry", "verdict", "passed"]
    assert {e["turn_id"] for e in events} == {"t-7"}
    first = events[0]
    assert (first["attempt"], first["passed"], first["category"]) == (1, False, "incomplete")
    assert {"model", "prompt_tokens", "completion_tokens", "cost_usd", "latency_ms"} <= set(first)


async def test_skip_and_not_triggered_are_debug_events(
    make_config: Any, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    verifier = Verifier(make_config(), judge=ScriptedJudge([]))
    await verifier.run(ScriptedAgent([""]), Turn(user_message="Hi"))
    await verifier.run(ScriptedAgent(["Paris."]), Turn(user_message="Hi"))
    assert [(r.levelname, r.replyguard["event"]) for r in replyguard_logs.records] == [  # type: ignore[attr-defined]
        ("DEBUG", "skipped"),
        ("DEBUG", "not_triggered"),
    ]


async def test_fail_open_is_a_warning_with_the_error_class(
    make_config: Any, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    verifier = Verifier(make_config(), judge=ScriptedJudge([ConnectionError("refused")]))
    outcome = await verifier.run(ScriptedAgent(["Done."]), Turn(user_message="Hi"))
    assert outcome.status == Status.FAILED_OPEN
    record = replyguard_logs.records[-1]
    assert record.levelname == "WARNING"
    assert record.replyguard["reason"] == "judge_error"  # type: ignore[attr-defined]
    assert record.replyguard["error"] == "ConnectionError: refused"  # type: ignore[attr-defined]


async def test_a_record_reads_event_key_value_with_enums_by_their_value(
    make_config: Any, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    """As the logging page promises: ``status=failed_open``, not an enum's repr; a string is
    quoted only when it has a space, a quote or ``=``."""
    verifier = Verifier(make_config(), judge=ScriptedJudge([ConnectionError("refused")]))
    await verifier.run(ScriptedAgent(["Done."]), Turn(user_message="Hi", id="t-7"))
    message = replyguard_logs.records[-1].getMessage()
    assert message.startswith("failed_open turn_id=t-7 run_kind=None status=failed_open ")
    assert " reason=judge_error " in message
    assert message.endswith(' error="ConnectionError: refused"')
    assert "<" not in message and "'" not in message


def test_a_value_is_shown_bare_quoted_or_as_its_repr() -> None:
    from replyguard.telemetry._events import _shown

    assert [_shown(v) for v in (Status.PASSED, "t-7", "a b", 'x"y', "", 3, 0.5, None, True)] == [
        "passed",
        "t-7",
        '"a b"',
        '"x\\"y"',
        '""',
        "3",
        "0.5",
        "None",
        "True",
    ]


@pytest.mark.parametrize("log_content", [False, True])
async def test_content_is_logged_only_when_asked(
    make_config: Any, replyguard_logs: pytest.LogCaptureFixture, log_content: bool
) -> None:
    verifier = Verifier(
        make_config(logContent=log_content),
        judge=ScriptedJudge(["FAIL [incomplete]: 4242-SECRET-FEEDBACK", "PASS"]),
    )
    await verifier.run(ScriptedAgent([REPLY_TEXT, REPLY_TEXT + "!"]), Turn(user_message=USER_TEXT))
    text = all_log_text(replyguard_logs)
    for secret in ("SECRET-USER-TEXT", "SECRET-REPLY-TEXT", "SECRET-FEEDBACK"):
        assert (secret in text) is log_content


async def test_api_key_echoed_by_an_error_is_redacted_everywhere(
    make_config: Any, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    error = RuntimeError(f"401 invalid x-api-key {API_KEY} for this request")
    verifier = Verifier(make_config(apiKey=API_KEY), judge=ScriptedJudge([error]))
    outcome = await verifier.run(ScriptedAgent(["Done."]), Turn(user_message="Hi"))
    assert outcome.status == Status.FAILED_OPEN
    for place in (all_log_text(replyguard_logs), repr(outcome), outcome.model_dump_json()):
        assert API_KEY not in place
    assert REDACTED in (outcome.attempts[0].verdict.error or "")  # type: ignore[union-attr]


async def test_key_read_from_the_environment_is_redacted(
    make_config: Any, replyguard_logs: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUDGE_KEY", "plainvalue-without-key-shape-123")
    error = RuntimeError("bad key plainvalue-without-key-shape-123")
    verifier = Verifier(make_config(apiKey="env:JUDGE_KEY"), judge=ScriptedJudge([error]))
    outcome = await verifier.run(ScriptedAgent(["Done."]), Turn(user_message="Hi"))
    assert "plainvalue" not in all_log_text(replyguard_logs) + outcome.model_dump_json()


@pytest.mark.parametrize(
    "text",
    [
        "Bearer abcdefghijklmnopqrstuvwxyz",
        "key sk-proj-ABCDEFGHIJKLMNOPQRST",
        "key sk-ant-api03-ABCDEFGHIJKLMNOP",
    ],
)
def test_key_shaped_strings_are_redacted_even_unconfigured(text: str) -> None:
    assert REDACTED in redact(text)
    assert text.split()[-1] not in redact(text)


@pytest.mark.parametrize(
    "shaped",
    [
        "AKIAABCDEFGHIJKLMNOP",
        "ghp_" + "a" * 36,
        "xoxb-1234567890-abcdef",
        'api_key="abcdefghijklmnop1234"',
        "AIza" + "B" * 35,
    ],
)
@pytest.mark.parametrize("padding", [0, 600])
def test_each_key_shape_is_redacted_in_short_and_long_texts(shaped: str, padding: int) -> None:
    """A short text is first searched for every shape's anchor at once, a long one anchor by
    anchor: either way each shape is found."""
    text = "x " * padding + f"the key {shaped} leaked"
    assert shaped not in redact(text) and REDACTED in redact(text)


def test_a_text_without_any_shape_comes_back_as_it_is() -> None:
    for text in ("verdict", "bench/instant", "a skinny key-less note", "x " * 600):
        assert redact(text) is text


async def test_a_record_names_the_replyguard_function_that_emitted_it(
    make_config: Any, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    """Not a frame of structlog's or of the emitter's own: where the decision was made."""
    verifier = Verifier(make_config(), judge=ScriptedJudge(["PASS"]))
    await verifier.run(ScriptedAgent(["Done."]), Turn(user_message="Hi"))
    for record in replyguard_logs.records:
        assert "structlog" not in record.pathname
        assert not record.pathname.endswith("_events.py")
        assert "/replyguard/" in record.pathname.replace("\\", "/")
        assert record.lineno > 0 and record.funcName not in ("", "emit", "info")


def test_error_description_is_one_short_line() -> None:
    described = describe_error(ValueError("line one\nline two " + "x" * 1000))
    assert described.startswith("ValueError: line one line two")
    assert "\n" not in described and len(described) < 400


class RaisingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        raise RuntimeError("the host's filter broke")


class RaisingHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        raise RuntimeError("the host's handler broke")  # no handleError: nothing catches it


@pytest.mark.parametrize("broken", ["filter", "handler"])
async def test_a_hosts_logging_that_raises_loses_events_never_the_turn(
    make_config: Any, broken: str, capsys: pytest.CaptureFixture[str]
) -> None:
    logger = logging.getLogger("replyguard")
    part: Any = RaisingFilter() if broken == "filter" else RaisingHandler()
    add, remove = (
        (logger.addFilter, logger.removeFilter)
        if broken == "filter"
        else (logger.addHandler, logger.removeHandler)
    )
    level = logger.level
    logger.setLevel(logging.DEBUG)
    add(part)
    try:
        verifier = Verifier(make_config(), judge=ScriptedJudge(["FAIL [incomplete]: more", "PASS"]))
        agent = ScriptedAgent(["Done.", "Done, dated."])
        outcome = await verifier.run(agent, Turn(user_message="Hi"))
        verdict = await verifier.verify(Turn(user_message="Hi"), "Done.")
    finally:
        remove(part)
        logger.setLevel(level)
    assert (outcome.status, outcome.response) == (Status.PASSED, "Done, dated.")
    # The script has no third answer: the judge errs, and the fail-open's warning is lost too.
    assert verdict.passed and verdict.fail_open_reason is not None
    said = capsys.readouterr().err.splitlines()
    assert said == [
        "replyguard: the host's logging raised RuntimeError on the 'checks' event; this and "
        "later events it rejects are not logged (not said again)"
    ]


def test_a_hosts_logging_failure_is_not_told_where_stdlib_would_stay_silent(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logging, "raiseExceptions", False)
    logger = logging.getLogger("replyguard")
    part = RaisingFilter()
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addFilter(part)
    try:
        Events().info("passed", turn_id="t-1")
    finally:
        logger.removeFilter(part)
        logger.setLevel(level)
    assert capsys.readouterr().err == ""
