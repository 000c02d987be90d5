"""The demo runs every path through the real runner, and the CLI's config check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_verify import BrokenPipe

from replyguard import FailCategory, Reason, Status, VerifierConfig
from replyguard._cli.demo import run_demo, write_workspace
from replyguard._cli.streams import PIPE_CLOSED
from replyguard.cli import main

ROOT = Path(__file__).resolve().parents[2]


async def test_demo_walks_every_path(tmp_path: Path) -> None:
    write_workspace(str(tmp_path))
    printed: list[str] = []
    outcomes = await run_demo(str(tmp_path), printed.append)
    assert [(o.status, o.reason) for o in outcomes] == [
        (Status.SKIPPED, None),
        (Status.NOT_TRIGGERED, None),
        (Status.PASSED, None),
        (Status.PASSED, None),
        (Status.EXHAUSTED, None),
        (Status.PASSED, None),
        (Status.PASSED, None),
        (Status.EXHAUSTED, Reason.STAGNANT),
        (Status.PASSED, None),
        (Status.PASSED, None),
        (Status.FAILED_OPEN, Reason.JUDGE_TIMEOUT),
        (Status.PASSED, None),
        (Status.PASSED, None),
        (Status.FLAGGED, Reason.SIDE_EFFECTS),
        (Status.PASSED, None),
        (Status.PASSED, None),
        (Status.PASSED, None),
        (Status.PASSED, None),
        (Status.EXHAUSTED, Reason.OPERATOR_MESSAGE),
    ]
    assert [len(o.attempts) for o in outcomes] == [1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 1, 1, 2, 1, 2] + [
        2
    ] * 4
    assert [o.awaiting_user for o in outcomes] == [False] * 11 + [True] + [False] * 7
    told = [line for line in printed if line.startswith("    retry message: - ")]
    assert told == ['    retry message: - send_email({"invoice":"2026-03","to":"ada@example.com"})']
    panel = outcomes[14].attempts[0].verdict
    assert panel is not None and [m.passed for m in panel.members] == [True, False, True]
    assert any(
        "FAIL [incomplete]: [gemini/gemini-2.0-flash] Say how much." in line for line in printed
    )
    assert any("→ PASS [awaiting_user]" in line for line in printed)
    custom = outcomes[9].attempts[0].verdict
    assert custom is not None and custom.category == "medical_advice"
    assert any("FAIL [medical_advice]: It names a dose" in line for line in printed)
    assert all(o.judge_cost_usd > 0 for o in outcomes[2:7])  # priced by litellm's map
    assert any("FAIL [rule_violation]: Remove the emoji." in line for line in printed)
    caught = [outcomes[5].attempts[0].verdict, outcomes[6].attempts[0].verdict]
    assert [(v.category, v.decisive, v.cost_usd) for v in caught if v] == [
        (FailCategory.GOAL_MISSED, True, 0.0),
        (FailCategory.INCOMPLETE, True, 0.0),
    ]


async def test_the_demo_shows_each_part_of_grounded_replies(tmp_path: Path) -> None:
    write_workspace(str(tmp_path))
    printed: list[str] = []
    outcomes = await run_demo(str(tmp_path), printed.append)
    claims, evidence, figures, exhausted = outcomes[15:]
    first = [o.attempts[0].verdict for o in (claims, evidence, figures, exhausted)]
    assert [(v.category, v.decisive) for v in first if v] == [
        (FailCategory.INCOMPLETE, True),  # "Email sent." with no tool call, by the check
        (FailCategory.GROUNDING, False),  # the judge, shown the refund's result
        (FailCategory.GROUNDING, True),  # a date no source holds, by the check
        (FailCategory.GROUNDING, False),
    ]
    assert exhausted.response == "I could not complete that; a colleague will follow up."
    assert any('→ {"order": "A-58812", "refunded": "1200.00"' in line for line in printed)
    assert any("April 11, 2026 (date)" in line for line in printed)


def test_cli_demo_prints_each_turn(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert out.count("→ status=") == 19
    assert "status=flagged reason=side_effects" in out
    assert "status=passed awaiting_user=true" in out
    assert "status=failed_open reason=judge_timeout" in out


async def test_the_demo_explains_itself(tmp_path: Path) -> None:
    write_workspace(str(tmp_path))
    printed: list[str] = []
    await run_demo(str(tmp_path), printed.append)
    assert "The judge is scripted" in printed[1] and "no" in printed[2]  # said first
    assert "no network" in " ".join(printed[:3])
    scenario = {line.split("]")[0] + "]": i for i, line in enumerate(printed) if line[:1] == "["}
    fifth = printed[scenario["[5]"] : scenario["[6]"]]
    assert "maxAttempts: 2" in fifth[0] and "    config: maxAttempts: 2" in fifth
    seventh = printed[scenario["[7]"] : scenario["[8]"]]
    assert "        tool call: send_email(to='ada@example.com') succeeded" in seventh
    cold = [line for line in printed if "(cold start: the first judge call)" in line]
    assert len(cold) == 1 and cold[0] in printed[scenario["[3]"] : scenario["[4]"]]
    steps = printed[printed.index("Next steps:") :]
    assert printed.index("Next steps:") > scenario["[13]"]
    assert any("replyguard verify" in line for line in steps)
    assert any("replyguard check-config" in line for line in steps)


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ("demo", "The judge is scripted: no API key, no network."),
        ("schema", "Print the JSON Schema of the config file"),
        ("check-config", "Check a config file with every check the verifier makes"),
    ],
)
def test_each_command_describes_itself_in_its_help(
    command: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    assert said in " ".join(capsys.readouterr().out.split())


def test_check_config_prints_effective_config_with_key_masked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "verifier.json"
    path.write_text(json.dumps({"enabled": True, "apiKey": "sk-literal-secret-123456"}))
    assert main(["check-config", "--show", str(path)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["enabled"] is True and shown["maxAttempts"] == 3
    assert shown["apiKey"] == "**********"


def test_check_config_names_file_and_key_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "verifier.json"
    path.write_text(json.dumps({"maxAtempts": 2}))
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "maxAtempts: unknown key" in err


def test_example_config_shows_every_key_with_its_default_but_enabled() -> None:
    """Started from, the example judges: it is enabled, though the default stays off."""
    example = ROOT / "config.example.json"
    document = json.loads(example.read_text(encoding="utf-8"))
    defaults = VerifierConfig().model_dump(mode="json", by_alias=True)
    assert document["$schema"] == "./replyguard.schema.json"
    assert (document["enabled"], defaults["enabled"]) == (True, False)
    shown = {key: value for key, value in document.items() if key not in ("$schema", "runKinds")}
    expected = {key: value for key, value in defaults.items() if key != "runKinds"}
    assert shown == {**expected, "enabled": True}
    loaded = VerifierConfig.load(example)
    assert set(loaded.run_kinds) == {"auto_reply", "research_summary", "plan_draft"}
    assert loaded.for_run_kind("auto_reply").max_attempts == 2


def test_shipped_schema_matches_the_config_model(capsys: pytest.CaptureFixture[str]) -> None:
    shipped = json.loads((ROOT / "replyguard.schema.json").read_text(encoding="utf-8"))
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == shipped
    assert set(shipped["properties"]) == set(VerifierConfig().model_dump(by_alias=True)) | {
        "$schema"
    }


def test_check_config_into_a_closed_pipe_ends_quietly_not_as_a_config_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader that stops reading (``| head``) is not a broken config: 141, as a shell
    reports a command ended by SIGPIPE (it was 2, "internal error: BrokenPipeError"), and
    no traceback."""
    monkeypatch.setattr(sys, "stdout", BrokenPipe())
    assert main(["check-config", str(ROOT / "config.example.json")]) == PIPE_CLOSED
    assert capsys.readouterr().err == ""


NUMBERS = "two three four five six seven eight nine ten eleven twelve thirteen fourteen "
NUMBERS += "fifteen sixteen seventeen eighteen nineteen twenty"


def test_the_demos_help_names_no_other_count_of_scenarios_than_it_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It once said "ten scenarios" while running 15: any count it gives is the demo's own
    ("one" is left out: it is a pronoun as often as a count)."""
    from replyguard._cli.demo import SCENARIOS

    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    words = capsys.readouterr().out.lower().replace("-", " ").split()
    counts = {NUMBERS.split().index(w) + 2 for w in words if w in NUMBERS.split()}
    counts |= {int(w) for w in words if w.isdigit()}
    assert counts <= {len(SCENARIOS)}
    assert "side effects" in " ".join(words) and "panel)." in words


def test_python_dash_m_replyguard_runs_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "replyguard", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout.startswith("replyguard "), done.stderr) == (0, True, "")
    usage = subprocess.run(
        [sys.executable, "-m", "replyguard"], capture_output=True, text=True, timeout=60
    )
    assert usage.returncode == 2 and usage.stderr.startswith("usage: replyguard ")
