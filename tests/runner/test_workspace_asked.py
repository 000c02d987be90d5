"""How often a turn asks for its workspace files: once a turn, whatever its attempts, and
never again on an attempt when the read ahead found nothing to read (``Step.read``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replyguard import Turn, Verifier
from replyguard.config import VerifierConfig
from replyguard.runner._assessment import Assessor
from replyguard.testing import ScriptedAgent, ScriptedJudge

FAIL = '{"verdict": "FAIL", "category": "other", "feedback": "Say it in English."}'


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What each ``read_workspace`` call gave, in order."""
    given: list[Any] = []
    original = Assessor.read_workspace

    def counting(self: Assessor, profile: Any, turn: Turn) -> Any:
        reading = original(self, profile, turn)
        given.append(reading)
        return reading

    monkeypatch.setattr(Assessor, "read_workspace", counting)
    return given


async def test_a_turn_with_rules_files_reads_them_once_for_every_attempt(
    make_config: Callable[..., VerifierConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "AGENTS.md").write_text("Answer in English.\n", encoding="utf-8")
    given = _counted(monkeypatch)
    judge = ScriptedJudge([FAIL, "PASS"])
    verifier = Verifier(make_config(verifyAll=True, workspaceDir=str(tmp_path)), judge=judge)
    outcome = await verifier.run(ScriptedAgent(["Hola", "Hello"]), Turn(user_message="hi"))
    assert outcome.status == "passed"
    assert len(given) == 1 and given[0] is not None
    assert len(judge.calls) == 2
    assert all("Answer in English." in prompt.user for prompt in judge.calls)


async def test_nothing_to_read_is_not_asked_again_on_each_attempt(
    make_config: Callable[..., VerifierConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = _counted(monkeypatch)
    judge = ScriptedJudge([FAIL, "PASS"])
    config = make_config(verifyAll=True, workspaceDir=str(tmp_path), rulesFiles=[])
    verifier = Verifier(config, judge=judge)
    outcome = await verifier.run(ScriptedAgent(["Hola", "Hello"]), Turn(user_message="hi"))
    assert outcome.status == "passed"
    assert given == [None]  # asked before the agent's call, found nothing, not asked again
    assert len(judge.calls) == 2


async def test_a_turn_its_reply_decides_to_judge_reads_its_files_at_the_gate(
    make_config: Callable[..., VerifierConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn judged only for what its reply says is not read ahead: the gate reads it,
    once, and each attempt's prompt shows the files."""
    (tmp_path / "AGENTS.md").write_text("Answer in English.\n", encoding="utf-8")
    given = _counted(monkeypatch)
    judge = ScriptedJudge([FAIL, "PASS"])
    verifier = Verifier(make_config(workspaceDir=str(tmp_path)), judge=judge)
    agent = ScriptedAgent(["It is done: I sent the email.", "Done: I sent the email."])
    outcome = await verifier.run(agent, Turn(user_message="send it"))
    assert outcome.status == "passed"
    assert len(judge.calls) == 2  # judged for its claim of an action
    assert len(given) == 1 and given[0] is not None
    assert all("Answer in English." in prompt.user for prompt in judge.calls)
