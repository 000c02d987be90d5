"""A judge model without a key: the ``Verifier`` says so when built (a WARNING naming the model
and the variable, never a value), and a turn that would call it fails open at once with
``missing_credentials``, before litellm's import and without an HTTP call."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from conftest import API_KEY
from replyguard import Reason, Status, Turn, Verifier, VerifierConfig
from replyguard.testing import ScriptedAgent, ScriptedJudge, capture_events
from support.provider_server import ProviderServer, Step
from support.scripts import script_json

ROOT = Path(__file__).resolve().parents[2]
TURN = Turn(user_message="Book the room for Friday.")


@pytest.fixture(autouse=True)
def _no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def _config(**keys: Any) -> VerifierConfig:
    return VerifierConfig.from_dict(
        {"enabled": True, "verifyAll": True, "agentModel": "openai/gpt-4o", **keys}
    )


def _warnings(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == "judge_credentials_missing"]


async def test_building_warns_and_a_turn_fails_open_at_once() -> None:
    with capture_events() as events:
        verifier = Verifier(_config(), preload=False)
        outcome = await verifier.run(ScriptedAgent(["Done: booked."]), TURN)
    await verifier.aclose()
    assert [(e["log_level"], e["model"], e["variables"]) for e in _warnings(events)] == [
        ("warning", "anthropic/claude-sonnet-4-5", ["ANTHROPIC_API_KEY"])
    ]
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, Reason.MISSING_CREDENTIALS)
    assert outcome.response == "Done: booked."
    verdict = outcome.attempts[0].verdict
    assert verdict is not None and verdict.error is not None
    assert "'anthropic/claude-sonnet-4-5' has no credentials: set ANTHROPIC_API_KEY" in (
        verdict.error
    )


async def test_verify_fails_open_the_same_way() -> None:
    verifier = Verifier(_config(), preload=False)
    verdict = await verifier.verify(TURN, "Done: booked.")
    await verifier.aclose()
    assert (verdict.passed, verdict.fail_open_reason) == (True, Reason.MISSING_CREDENTIALS)


async def test_a_key_set_after_building_counts(
    monkeypatch: pytest.MonkeyPatch, provider: ProviderServer
) -> None:
    # The key's variable is read on every turn, as litellm reads it on every call.
    config = _config(apiKey="env:REPLYGUARD_TEST_LATE_KEY")
    verifier = Verifier(config.model_copy(update={"api_base": provider.url}), preload=False)
    first = await verifier.verify(TURN, "Done: booked.")
    monkeypatch.setenv("REPLYGUARD_TEST_LATE_KEY", API_KEY)
    provider.push(Step(text="PASS"))
    second = await verifier.verify(TURN, "Done: booked.")
    await verifier.aclose()
    assert first.fail_open_reason == Reason.MISSING_CREDENTIALS
    assert "REPLYGUARD_TEST_LATE_KEY" in (first.error or "")
    assert (second.passed, second.fail_open_reason) == (True, None)
    assert len(provider.seen) == 1


async def test_a_panel_member_without_a_key_is_left_out(provider: ProviderServer) -> None:
    # The member behind the proxy answers; the one litellm would send to Google has no key.
    deployments = [
        {
            "modelName": "proxy",
            "model": "openai/gpt-4o-mini",
            "apiBase": provider.url,
            "apiKey": API_KEY,
        },
        {"modelName": "google", "model": "gemini/gemini-2.5-flash"},
    ]
    config = _config(
        model="proxy",
        router={"deployments": deployments},
        runKinds={"jury": {"panel": {"models": ["proxy", "google"]}}},
    )
    provider.push(Step(text="PASS"))
    verifier = Verifier(config, preload=False)
    verdict = await verifier.verify(TURN.model_copy(update={"run_kind": "jury"}), "Done.")
    assert verdict.passed and verdict.fail_open_reason is None
    assert [m.fail_open_reason for m in verdict.members] == [None, Reason.MISSING_CREDENTIALS]
    await verifier.aclose()
    panel = _config(panel={"models": ["openai/gpt-4o-mini", "gemini/gemini-2.5-flash"]})
    verifier = Verifier(panel, preload=False)
    verdict = await verifier.verify(TURN, "Done.")
    await verifier.aclose()
    assert verdict.fail_open_reason == Reason.MISSING_CREDENTIALS
    assert verdict.members == ()  # no member was asked: none had a key


async def test_a_judge_of_the_hosts_own_needs_no_key() -> None:
    with capture_events() as events:
        verifier = Verifier(_config(), judge=ScriptedJudge(["PASS"]), preload=False)
        outcome = await verifier.run(ScriptedAgent(["Done: booked."]), TURN)
    await verifier.aclose()
    assert _warnings(events) == []
    assert outcome.status == Status.PASSED


def test_the_turn_fails_open_before_litellm_is_imported(tmp_path: Path) -> None:
    script = """
import asyncio, json, sys, time
from replyguard import Turn, Verifier, VerifierConfig
from replyguard.testing import ScriptedAgent

async def main():
    config = VerifierConfig(enabled=True, verify_all=True)
    verifier = Verifier(config, preload=False)
    started = time.perf_counter()
    outcome = await verifier.run(ScriptedAgent(["Done."]), Turn(user_message="Go."))
    took = time.perf_counter() - started
    print(json.dumps([outcome.reason, took, "litellm" in sys.modules]))

asyncio.run(main())
"""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
    }
    env["PYTHONPATH"] = str(ROOT / "src")
    reason, took, imported = script_json(script, env=env, cwd=tmp_path)
    assert (reason, imported) == ("missing_credentials", False)
    assert took < 0.5
