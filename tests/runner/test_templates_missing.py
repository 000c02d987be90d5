"""A broken install (the package without its prompt templates) fails every judged turn open,
and says so plainly: its events name the places looked in, not only
``FileNotFoundError``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from support.scripts import script_json

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "replyguard"

SCRIPT = """
import asyncio, json, logging, sys
from replyguard import Turn, Verifier, VerifierConfig
from replyguard.testing import ScriptedJudge, capture_events

async def main():
    config = VerifierConfig(enabled=True, verify_all=True, agent_model="openai/gpt-4o")
    verifier = Verifier(config, judge=ScriptedJudge(["PASS"]))
    with capture_events() as events:
        outcome = await verifier.run(lambda messages: "Done: the report is ready.", Turn(
            user_message="Write the report."))
    await verifier.aclose()
    failed = [e for e in events if e.get("event") == "judge_prompt_failed"]
    opened = [e for e in events if e.get("event") == "failed_open"]
    print(json.dumps({"status": str(outcome.status), "response": outcome.response,
                      "events": failed, "opened": opened}, default=str))

asyncio.run(main())
"""


def test_a_package_without_its_templates_fails_open_naming_where_it_looked(
    tmp_path: Path,
) -> None:
    copy = tmp_path / "site" / "replyguard"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert not (copy / "prompts").exists() and not (tmp_path / "prompts").exists()
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    found = script_json(SCRIPT, env=env, cwd=tmp_path)
    assert found["status"].endswith("failed_open")
    assert found["response"] == "Done: the report is ready."
    [event] = found["events"]
    assert event["error_class"] == "TemplatesNotFound"
    assert str(copy / "prompts") in event["note"]
    assert "reinstall replyguard" in event["note"]
    [opened] = found["opened"]
    assert "templates were not found" in opened["error"]
