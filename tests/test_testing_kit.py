"""``replyguard.testing.capture_events``: the library's events as dicts, whatever the level."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest

from conftest import API_KEY
from replyguard import Turn, Verifier, VerifierConfig
from replyguard.testing import ScriptedAgent, ScriptedJudge, capture_events


@pytest.fixture
def quiet_logger() -> Iterator[logging.Logger]:
    """The ``replyguard`` logger set to ERROR, as a host might leave it."""
    logger = logging.getLogger("replyguard")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield logger
    logger.setLevel(level)


async def test_events_below_the_loggers_level_are_captured_with_their_fields(
    make_config: Callable[..., VerifierConfig], quiet_logger: logging.Logger
) -> None:
    judge = ScriptedJudge(["FAIL [incomplete]: add the date", "PASS"])
    verifier = Verifier(make_config(verifyAll=True), judge=judge)
    with capture_events() as events:
        await verifier.run(ScriptedAgent(["r1", "r2"]), Turn(user_message="Plan it.", id="t-1"))
    names = [e["event"] for e in events]
    assert names[-1] == "passed" and names.count("verdict") == 2
    assert {"debug", "info"} <= {e["log_level"] for e in events}  # the logger is at ERROR
    retry = next(e for e in events if e["event"] == "retry")
    assert retry == {
        "event": "retry",
        "turn_id": "t-1",
        "attempt": 2,
        "category": "incomplete",
        "log_level": "info",
    }


async def test_the_loggers_level_and_handlers_are_restored_after_the_block(
    make_config: Callable[..., VerifierConfig], quiet_logger: logging.Logger
) -> None:
    handlers = list(quiet_logger.handlers)
    verifier = Verifier(make_config(verifyAll=True), judge=ScriptedJudge(["PASS", "PASS"]))
    with capture_events() as events:
        await verifier.run(ScriptedAgent(["r1"]), Turn(user_message="Plan it."))
    await verifier.run(ScriptedAgent(["r2"]), Turn(user_message="Plan it again."))
    assert [e["event"] for e in events].count("passed") == 1
    assert quiet_logger.level == logging.ERROR
    assert quiet_logger.handlers == handlers


async def test_captured_events_are_redacted_as_logged(
    make_config: Callable[..., VerifierConfig],
) -> None:
    config = make_config(verifyAll=True, apiKey=API_KEY, logContent=True)
    verifier = Verifier(config, judge=ScriptedJudge(["PASS"]))
    with capture_events() as events:
        await verifier.run(ScriptedAgent([f"the key is {API_KEY}"]), Turn(user_message="Key?"))
    assert events and API_KEY not in repr(events)
    assert "[REDACTED]" in events[-1]["response"]
