"""A key echoed in a successful judge answer is redacted before it is stored, sent or printed.

The judge's words reach the ``Verdict`` (raw text, feedback, reasoning, model, the note on an
empty answer), the ``Outcome``, the retry message the agent receives, ``replyguard verify``'s
JSON, the eval reports and the ledger's ``judgeModels``. Each is checked here with the
configured key, an ``env:`` key, a router deployment's key and unconfigured key shapes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import API_KEY, KNOWN_KEYS, SecretsGuard
from replyguard import Turn, Verifier, VerifierConfig
from replyguard.cli import main
from replyguard.judge import JudgeReply
from replyguard.testing import ScriptedAgent, ScriptedJudge
from support.provider_server import ANTHROPIC, ProviderServer, Step

ENV_VALUE = "plainvalue-without-key-shape-123"  # KNOWN_KEYS: an env: key's value
PLAIN = "3f9a1c7e5b2d4f608a1e9c3b7d5f2a64"  # KNOWN_KEYS: no key shape at all
ROUTER_VALUE = "router-deployment-value-0001"
SHAPES = (
    "sk-proj-ABCDEFGHIJKLMNOPQRST",
    "AIzaSyD-shaped-0123456789abcdefghijklmno",
    "ghp_shaped0123456789abcdefghijklmnopqrstu",
)
assert {ENV_VALUE, PLAIN, ROUTER_VALUE, *SHAPES} <= set(KNOWN_KEYS)

GROUP = "judge-group"


def _config(**keys: Any) -> VerifierConfig:
    return VerifierConfig.from_dict({"enabled": True, "verifyAll": True, **keys})


# Each: the config keys that make the secret known (none for a key shape), and the secret.
SOURCES = {
    "configured-key": ({"apiKey": PLAIN}, PLAIN),
    "env-key": ({"apiKey": "env:REPLYGUARD_TEST_JUDGE_KEY"}, ENV_VALUE),
    "router-key": (
        {
            "model": GROUP,
            "router": {
                "deployments": [
                    {"modelName": GROUP, "model": "openai/gpt-4o-mini", "apiKey": ROUTER_VALUE}
                ]
            },
        },
        ROUTER_VALUE,
    ),
    **{f"shape-{key[:4]}": ({}, key) for key in SHAPES},
}
SOURCE_PARAMS = [pytest.param(*value, id=name) for name, value in SOURCES.items()]


@pytest.fixture(autouse=True)
def _env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLYGUARD_TEST_JUDGE_KEY", ENV_VALUE)


def _echoing(secret: str) -> JudgeReply:
    text = f"The reply pastes {secret} into the chat.\nFAIL [rule_violation]: remove {secret}."
    return JudgeReply(text=text, model=f"judge-{secret}")


@pytest.mark.parametrize(("keys", "secret"), SOURCE_PARAMS)
async def test_an_echoed_key_reaches_neither_the_outcome_nor_the_agent(
    keys: dict[str, Any], secret: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    config = _config(**keys, ledgerPath=str(ledger))
    verifier = Verifier(config, judge=ScriptedJudge([_echoing(secret), "PASS"]))
    agent = ScriptedAgent(["Here it is.", "Here it is, without the key."])
    outcome = await verifier.run(agent, Turn(user_message="Send the report."))
    await verifier.aclose()

    assert (outcome.status.value, len(outcome.attempts)) == ("passed", 2)
    verdict = outcome.attempts[0].verdict
    assert verdict is not None and verdict.passed is False
    assert verdict.feedback == "remove [REDACTED]."
    assert verdict.reasoning == "The reply pastes [REDACTED] into the chat."
    assert verdict.model == "judge-[REDACTED]"
    assert secret not in (verdict.raw or "") and "[REDACTED]" in (verdict.raw or "")
    assert secret not in outcome.model_dump_json()
    retry_message = agent.calls[1][-1]["content"]
    assert "remove [REDACTED]." in retry_message and secret not in json.dumps(agent.calls)
    line = json.loads(ledger.read_text())
    assert line["judgeModels"] == ["judge-[REDACTED]", "scripted-judge"]


async def test_the_note_on_an_empty_answer_is_redacted() -> None:
    answer = JudgeReply(text="", model="judge", note=f"the proxy said: bad key {PLAIN}")
    verifier = Verifier(_config(apiKey=PLAIN), judge=ScriptedJudge([answer]))
    verdict = await verifier.verify(Turn(user_message="Hi"), "Hello!")
    assert (verdict.readable, verdict.error) == (False, "the proxy said: bad key [REDACTED]")


async def test_a_pass_keeps_its_note_redacted_and_the_rest_untouched() -> None:
    answer = JudgeReply(text=f"Fine.\nPASS: though it shows {API_KEY}", model="judge")
    verifier = Verifier(_config(apiKey=API_KEY), judge=ScriptedJudge([answer]))
    verdict = await verifier.verify(Turn(user_message="Hi"), "Hello!")
    assert (verdict.passed, verdict.reasoning, verdict.feedback, verdict.model) == (
        True,
        "Fine.",
        "though it shows [REDACTED]",
        "judge",
    )


# -- what the commands print and write -----------------------------------------------------------


def test_verify_json_holds_no_echoed_key(
    tmp_path: Path,
    provider: ProviderServer,
    capsys: pytest.CaptureFixture[str],
    secrets_guard: SecretsGuard,
) -> None:
    body = ANTHROPIC.answer(Step(text=f"FAIL [incomplete]: your key {API_KEY} is in it"), "m")
    body["model"] = f"claude-{API_KEY}"
    provider.push(Step(body=json.dumps(body).encode()))
    config = tmp_path / "verifier.json"
    config.write_text(
        json.dumps({"model": ANTHROPIC.judge_model, "apiKey": API_KEY, "apiBase": provider.url})
    )
    turn = tmp_path / "turn.json"
    turn.write_text(json.dumps({"userMessage": "Send the report.", "reply": "Done."}))
    code = main(["verify", str(turn), "--config", str(config)])
    out = capsys.readouterr().out
    verdict = json.loads(out)
    assert code == 1 and API_KEY not in out
    assert verdict["feedback"] == "your key [REDACTED] is in it"
    assert verdict["model"] == "claude-[REDACTED]"
    assert "your key [REDACTED] is in it" in verdict["retryMessage"]
    # litellm's own DEBUG record of the raw answer is outside replyguard's reach (README)
    assert {leak.logger for leak in secrets_guard.forgive()} <= {"LiteLLM"}


def test_eval_reports_hold_no_echoed_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [
        {
            "userMessage": "Write the summary.",
            "reply": "Here it is.",
            "label": "FAIL",
            "judgeOutput": f"The reply pastes {API_KEY}.\nFAIL [rule_violation]: drop {API_KEY}",
        }
    ]
    dataset = tmp_path / "data.jsonl"
    dataset.write_text("".join(json.dumps(record) + "\n" for record in records))
    config = tmp_path / "verifier.json"
    config.write_text(json.dumps({"apiKey": API_KEY}))
    out = tmp_path / "out"
    code = main(["eval", str(dataset), "--replay", "--config", str(config), "--out", str(out)])
    capsys.readouterr()
    assert code == 0
    report, html = (out / "report.json").read_text(), (out / "report.html").read_text()
    assert API_KEY not in report and API_KEY not in html
    assert "drop [REDACTED]" in report
