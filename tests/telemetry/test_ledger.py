"""The JSONL ledger: one whole line per verified turn, from many tasks and processes."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.metadata
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from replyguard import Status, Turn, Verifier
from replyguard.testing import ScriptedAgent, ScriptedJudge

FIELDS = {
    "ts",
    "turnId",
    "agentId",
    "runKind",
    "status",
    "reason",
    "attempts",
    "costUsd",
    "judgeCostUsd",
    "usage",
    "latencyMs",
    "rubric",
    "judgeModels",
    "checks",
    "failedChecks",
    "categories",
    "awaitingUser",
    "sideEffects",
    "litellm",
    "judged",
}


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def test_two_hundred_concurrent_turns_write_two_hundred_whole_lines(
    make_config: Any, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    script = ["FAIL [incomplete]: more", "PASS"] * 200
    rules = [{"type": "rules", "maxLength": 50}]
    config = make_config(verifyAll=True, ledgerPath=str(ledger), checks=rules)
    v = Verifier(config, judge=ScriptedJudge(script, cost_usd=0.001, model="judge-m"))

    async def turn(i: int) -> Any:
        agent = ScriptedAgent([f"reply {i}", f"reply {i}, better"])
        return await v.run(agent, Turn(user_message=f"q{i}", id=f"t{i}", agent_id="bot-7"))

    outcomes = await asyncio.gather(*(turn(i) for i in range(200)))
    records = lines(ledger)
    assert len(records) == 200
    assert {r["turnId"] for r in records} == {f"t{i}" for i in range(200)}
    assert all(set(r) == FIELDS for r in records)
    one = records[0]
    assert (one["agentId"], one["checks"], one["judgeModels"]) == ("bot-7", ["rules"], ["judge-m"])
    assert sum(r["status"] == "passed" for r in records) == sum(
        o.status == Status.PASSED for o in outcomes
    )


async def test_turns_that_were_not_verified_are_not_written(
    make_config: Any, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    v = Verifier(make_config(ledgerPath=str(ledger)), judge=ScriptedJudge([]))
    await v.run(ScriptedAgent(["Paris."]), Turn(user_message="q"))
    await v.run(ScriptedAgent([""]), Turn(user_message="q"))
    assert not ledger.exists()


@pytest.mark.parametrize("log_content", [False, True])
async def test_feedback_is_recorded_only_with_content_logging(
    make_config: Any, tmp_path: Path, log_content: bool
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    config = make_config(verifyAll=True, ledgerPath=str(ledger), logContent=log_content)
    v = Verifier(config, judge=ScriptedJudge(["FAIL [refusal]: Do it, do not decline.", "PASS"]))
    await v.run(ScriptedAgent(["No.", "Here it is."]), Turn(user_message="q", run_kind=None))
    (record,) = lines(ledger)
    assert record["categories"] == ["refusal"]
    assert ("feedback" in record) is log_content
    assert ("content" in record) is log_content
    assert "No." not in json.dumps({k: v for k, v in record.items() if k != "content"})
    if log_content:
        assert record["feedback"] == ["Do it, do not decline."]
        assert record["content"]["userMessage"] == "q"
        first, second = record["content"]["attempts"]
        assert (first["reply"], first["judgeOutput"]) == (
            "No.",
            "FAIL [refusal]: Do it, do not decline.",
        )
        assert first["feedback"] == "Do it, do not decline."
        assert (second["attempt"], second["reply"]) == (2, "Here it is.")


async def test_every_judged_reply_is_recorded_by_its_hash_and_vote(
    make_config: Any, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    config = make_config(verifyAll=True, ledgerPath=str(ledger))
    v = Verifier(config, judge=ScriptedJudge(["FAIL [refusal]: Do it.", ""]))
    await v.run(ScriptedAgent(["No.", "Here it is."]), Turn(user_message="q"))
    (record,) = lines(ledger)
    assert record["judged"] == [
        {
            "attempt": 1,
            "replySha256": hashlib.sha256(b"No.").hexdigest(),
            "vote": "FAIL",
            "category": "refusal",
        },
        # an empty judge answer is unreadable: a fail-open PASS, which is no vote
        {
            "attempt": 2,
            "replySha256": hashlib.sha256(b"Here it is.").hexdigest(),
            "vote": None,
            "category": None,
        },
    ]
    assert record["litellm"] == importlib.metadata.version("litellm")


async def test_a_ledger_that_cannot_be_written_never_touches_the_turn(
    make_config: Any, tmp_path: Path, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    config = make_config(verifyAll=True, ledgerPath=str(tmp_path / "missing" / "ledger.jsonl"))
    outcome = await Verifier(config, judge=ScriptedJudge(["PASS"])).run(
        ScriptedAgent(["Hi"]), Turn(user_message="q")
    )
    assert outcome.status == Status.PASSED
    assert any("ledger_write_failed" in r.getMessage() for r in replyguard_logs.records)


def test_processes_appending_at_once_never_tear_a_line(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        from replyguard.telemetry._ledger import Ledger
        from replyguard.telemetry import Events
        async def main(tag):
            ledger = Ledger({str(ledger)!r}, Events())
            pad = "x" * 5000  # longer than a pipe buffer: a torn write would show
            records = [{{"tag": tag, "i": i, "pad": pad}} for i in range(150)]
            await asyncio.gather(*(ledger.append(record) for record in records))
        asyncio.run(main(sys.argv[1]))
        """
    )
    workers = [subprocess.Popen([sys.executable, "-c", script, tag]) for tag in ("a", "b", "c")]
    assert [w.wait(timeout=120) for w in workers] == [0, 0, 0]
    records = lines(ledger)
    assert len(records) == 450
    assert {(r["tag"], r["i"]) for r in records} == {(t, i) for t in "abc" for i in range(150)}
