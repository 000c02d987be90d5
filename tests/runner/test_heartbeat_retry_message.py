"""A heartbeat run answers a task list, not a user: its retry message says so."""

from __future__ import annotations

from pathlib import Path

from replyguard import Turn, Verifier, VerifierConfig
from replyguard.testing import ScriptedAgent, ScriptedJudge


async def test_a_heartbeat_retry_asks_for_the_tasks_not_the_users_request(tmp_path: Path) -> None:
    (tmp_path / "HEARTBEAT.md").write_text("- [ ] Rotate the logs\n", encoding="utf-8")
    config = VerifierConfig(enabled=True, verify_heartbeat=True, workspace_dir=str(tmp_path))
    agent = ScriptedAgent(["HEARTBEAT_OK", "Rotated the logs (3 archived)."])
    verifier = Verifier(config, judge=ScriptedJudge(["PASS"]))
    await verifier.run(agent, Turn(user_message="Heartbeat.", heartbeat=True))
    await verifier.aclose()
    retry = agent.calls[1][-1]["content"]
    assert "user" not in retry.lower()
    assert "heartbeat task list" in retry and "report of what you did" in retry


async def test_an_ordinary_retry_still_speaks_of_the_users_request() -> None:
    config = VerifierConfig(enabled=True, verify_all=True)
    agent = ScriptedAgent(["Done: Paris.", "Done: the capital of Spain is Madrid."])
    judge = ScriptedJudge(["FAIL [goal_missed]: The question was about Spain.", "PASS"])
    verifier = Verifier(config, judge=judge)
    await verifier.run(agent, Turn(user_message="Capital of Spain?"))
    await verifier.aclose()
    assert "Re-read the user's request" in agent.calls[1][-1]["content"]
