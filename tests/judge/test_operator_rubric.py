"""The operator's side of the rubric: custom ``categories`` and the ``rubricFile``.

Parsing and config checks are pure; the judge's side runs over the loopback provider (the
prompt the provider receives, the retry message, the ledger line) and respx (the structured
output schema at OpenAI's endpoint).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from conftest import API_KEY
from replyguard import FailCategory, Turn, Verifier, VerifierConfig
from replyguard.cli import main
from replyguard.context import DEFAULT_RUBRIC, ContextLimits, Rubric, build_judge_prompt
from replyguard.errors import ConfigError
from replyguard.insights.report import read_ledger, summarise
from replyguard.judge import VERDICT_FORMAT, verdict_format
from replyguard.judge._verdict import parse_verdict
from replyguard.testing import ScriptedAgent
from replyguard.types import Status
from support.provider_server import ANTHROPIC, OPENAI, ProviderServer, Step

CATEGORIES = {"medical_advice": "Remove the dosage advice and suggest seeing a doctor."}
CRITERIA = "Never quote a price without the currency.\nAlways name the data source."


# -- parsing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "FAIL [medical_advice]: drop the dosage",
        "FAIL [Medical Advice]: drop the dosage",
        "**FAIL [MEDICAL-ADVICE]**: drop the dosage",
        '{"verdict": "FAIL", "category": "Medical_Advice", "feedback": "drop the dosage"}',
    ],
)
def test_a_custom_category_is_read_in_any_case_as_its_name(text: str) -> None:
    verdict = parse_verdict(text, categories=CATEGORIES)
    assert (verdict.passed, verdict.category, verdict.feedback) == (
        False,
        "medical_advice",
        "drop the dosage",
    )
    assert type(verdict.category) is str


def test_a_built_in_category_stays_a_fail_category_beside_custom_ones() -> None:
    verdict = parse_verdict("FAIL [incomplete]: finish it", categories=CATEGORIES)
    assert verdict.category is FailCategory.INCOMPLETE


def test_a_custom_category_unknown_to_the_parser_is_kept_in_the_feedback() -> None:
    verdict = parse_verdict("FAIL [medical_advice]: drop the dosage")
    assert (verdict.category, verdict.feedback) == (None, "[medical_advice] drop the dosage")


@pytest.mark.parametrize("text", ["PASS [medical_advice]", "PASS [whatever]: fine"])
def test_a_tag_on_a_pass_is_ignored(text: str) -> None:
    verdict = parse_verdict(text, categories=CATEGORIES)
    assert (verdict.passed, verdict.readable, verdict.category) == (True, True, None)


def test_a_verdict_built_with_a_built_in_name_holds_the_enum() -> None:
    from replyguard import Verdict

    assert Verdict(passed=False, category="refusal").category is FailCategory.REFUSAL


# -- config --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("categories", "message"),
    [
        ({"Medical": "x"}, "lower-case snake_case"),
        ({"medical advice": "x"}, "lower-case snake_case"),
        ({"medical__advice": "x"}, "lower-case snake_case"),
        ({"incomplete": "x"}, "is built in"),
        ({"awaiting_user": "x"}, "is built in"),
        ({"medical_advice": "  "}, "needs its retry guidance"),
    ],
)
def test_a_bad_category_is_refused_naming_the_key(categories: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match="categories") as caught:
        VerifierConfig.from_dict({"categories": categories})
    assert message in str(caught.value)


def test_a_category_guidance_must_be_text() -> None:
    with pytest.raises(ConfigError, match=r"categories\.medical_advice"):
        VerifierConfig.from_dict({"categories": {"medical_advice": 3}})


def _workspace(tmp_path: Path, rubric: str | None = CRITERIA) -> Path:
    space = tmp_path / "space"
    space.mkdir()
    if rubric is not None:
        (space / "RUBRIC.md").write_text(rubric, encoding="utf-8")
    return space


def _config_file(tmp_path: Path, **keys: Any) -> Path:
    path = tmp_path / "verifier.json"
    path.write_text(json.dumps({"workspaceDir": "space", "rubricFile": "RUBRIC.md", **keys}))
    return path


def test_a_rubric_file_is_read_relative_to_the_config_files_workspace(tmp_path: Path) -> None:
    _workspace(tmp_path)
    config = VerifierConfig.load(_config_file(tmp_path))
    assert config.operator_rubric() == CRITERIA


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda space: (space / "RUBRIC.md").write_text(" \n\t\n"), "is empty"),
        (lambda space: (space / "RUBRIC.md").unlink(), "not found"),
        (lambda space: (space / "RUBRIC.md").write_text("word " * 600), "quarter"),
        (lambda space: (space / "RUBRIC.md").write_bytes(b"\xff\xfe rules"), "not UTF-8"),
    ],
    ids=["empty", "missing", "too-large", "not-utf8"],
)
def test_a_bad_rubric_file_is_refused_when_the_config_loads(
    tmp_path: Path, setup: Callable[[Path], Any], message: str
) -> None:
    setup(_workspace(tmp_path))
    path = _config_file(tmp_path, contextTokenBudget=2000)
    with pytest.raises(ConfigError, match="rubricFile") as caught:
        VerifierConfig.load(path)
    assert message in str(caught.value) and str(path) in str(caught.value)


def test_a_run_kinds_smaller_budget_bounds_the_rubric(tmp_path: Path) -> None:
    (_workspace(tmp_path) / "RUBRIC.md").write_text("word " * 400)  # 400 tokens
    VerifierConfig.load(_config_file(tmp_path))  # a quarter of 8000: fits
    path = _config_file(tmp_path, runKinds={"cheap": {"contextTokenBudget": 1200}})
    with pytest.raises(ConfigError, match="quarter"):
        VerifierConfig.load(path)


@pytest.mark.parametrize("name", ["../RUBRIC.md", "/etc/passwd"])
def test_a_rubric_path_outside_the_workspace_is_refused(tmp_path: Path, name: str) -> None:
    _workspace(tmp_path)
    with pytest.raises(ConfigError, match="rubricFile"):
        VerifierConfig.load(_config_file(tmp_path, rubricFile=name))


def test_a_rubric_symlink_leading_outside_the_workspace_is_refused(tmp_path: Path) -> None:
    space = _workspace(tmp_path, rubric=None)
    (tmp_path / "outside.md").write_text(CRITERIA)
    os.symlink(tmp_path / "outside.md", space / "RUBRIC.md")
    with pytest.raises(ConfigError, match="outside workspaceDir"):
        VerifierConfig.load(_config_file(tmp_path))


def test_a_rubric_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    space = _workspace(tmp_path, rubric=None)
    os.mkfifo(space / "RUBRIC.md")
    with pytest.raises(ConfigError, match="not a regular file"):
        VerifierConfig.load(_config_file(tmp_path))


def test_a_rubric_file_that_is_a_directory_is_a_config_error_naming_file_and_key(
    tmp_path: Path,
) -> None:
    (_workspace(tmp_path, rubric=None) / "RUBRIC.md").mkdir()
    path = _config_file(tmp_path)
    with pytest.raises(ConfigError, match="rubricFile") as caught:
        VerifierConfig.load(path)
    assert str(path) in str(caught.value) and "not a regular file" in str(caught.value)
    config = VerifierConfig.from_dict(
        {"workspaceDir": str(tmp_path / "space"), "rubricFile": "RUBRIC.md"}
    )
    with pytest.raises(ConfigError, match=r"rubricFile: 'RUBRIC\.md' is not a regular file"):
        Verifier(config, preload=False)


def test_check_config_reports_a_rubric_directory_as_an_error_not_an_internal_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (_workspace(tmp_path, rubric=None) / "RUBRIC.md").mkdir()
    code = main(["check-config", str(_config_file(tmp_path))])
    out, err = capsys.readouterr()
    assert code == 2
    assert "rubricFile" in out + err and "internal error" not in out + err


def test_a_rubric_file_needs_a_workspace() -> None:
    config = VerifierConfig.from_dict({"rubricFile": "RUBRIC.md"})
    with pytest.raises(ConfigError, match="needs workspaceDir"):
        Verifier(config, preload=False)


# -- the prompt ----------------------------------------------------------------------------------


def test_without_additions_the_rubric_is_the_built_in_one() -> None:
    assert Rubric().system == DEFAULT_RUBRIC.system
    assert "operator" not in DEFAULT_RUBRIC.system


def test_the_operator_rubric_and_categories_are_in_the_system_message_only() -> None:
    rubric = Rubric(CRITERIA, tuple(CATEGORIES.items()))
    turn = Turn(user_message="How much ibuprofen can I take?")
    prompt = build_judge_prompt(turn, "Take 800 mg.", limits=ContextLimits(), rubric=rubric)
    assert CRITERIA in prompt.system
    assert f"- medical_advice: {CATEGORIES['medical_advice']}" in prompt.system
    assert "refusal, grounding, medical_advice." in prompt.system
    assert prompt.user.endswith("FAIL [goal_missed|incomplete|rule_violation|tone_mismatch|"
                                "refusal|grounding|medical_advice]: feedback")  # fmt: skip
    assert CRITERIA not in prompt.user


def test_the_rubric_is_identical_on_every_call_and_its_digest_tracks_its_text() -> None:
    first = Rubric(CRITERIA, tuple(CATEGORIES.items()))
    again = Rubric(CRITERIA, tuple(CATEGORIES.items()))
    turn = Turn(user_message="Hi")
    prompts = [
        build_judge_prompt(turn, "Hello.", limits=ContextLimits(), rubric=r) for r in (first, again)
    ]
    assert prompts[0].system == prompts[1].system and prompts[0].nonce != prompts[1].nonce
    assert first.digest == again.digest != DEFAULT_RUBRIC.digest
    assert Rubric(CRITERIA + "!").digest != first.digest
    assert len(first.digest) == 12


@pytest.mark.parametrize("budget", [1400, 4000])
def test_the_largest_rubric_a_config_accepts_leaves_a_prompt_within_the_budget(
    tmp_path: Path, budget: int
) -> None:
    space = _workspace(tmp_path)
    path = _config_file(tmp_path, contextTokenBudget=budget, categories=CATEGORIES)
    config = None
    for words in range(budget // 4, 0, -5):  # the largest rubric the config accepts
        (space / "RUBRIC.md").write_text("word " * words)
        try:
            config = VerifierConfig.load(path)
            break
        except ConfigError:
            continue
    assert config is not None
    rubric = Rubric(config.operator_rubric(), tuple(CATEGORIES.items()))
    turn = Turn(user_message="Summarise. " * 400, history=[{"role": "user", "content": "x " * 900}])
    prompt = build_judge_prompt(
        turn, "Done. " * 900, limits=ContextLimits(budget=budget), rubric=rubric
    )
    assert prompt.tokens <= budget


def test_categories_that_leave_no_room_for_the_review_are_refused() -> None:
    many = {f"category_{n}": "Explain at length what to change. " * 6 for n in range(12)}
    with pytest.raises(ConfigError, match="categories: with the built-in rubric"):
        Verifier(VerifierConfig.from_dict({"categories": many, "contextTokenBudget": 1000}))


# -- structured output ---------------------------------------------------------------------------


@pytest.fixture
def http(respx_litellm: None) -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        yield router


def test_the_verdict_schema_lists_the_custom_categories_after_the_built_ins() -> None:
    schema = verdict_format(("medical_advice",))
    enum = schema["json_schema"]["schema"]["properties"]["category"]["anyOf"][0]["enum"]
    assert enum == [*(c.value for c in FailCategory), "medical_advice"]
    assert verdict_format(()) is VERDICT_FORMAT
    assert "medical_advice" not in json.dumps(VERDICT_FORMAT)


async def test_a_structured_judge_is_sent_the_custom_categories_and_may_answer_one(
    http: respx.MockRouter, make_config: Callable[..., VerifierConfig]
) -> None:
    answer = {
        "reasoning": "A dosage is given.",
        "verdict": "FAIL",
        "category": "medical_advice",
        "feedback": "Drop the dosage.",
    }

    def respond(request: httpx.Request) -> httpx.Response:
        model = json.loads(request.content)["model"]
        return httpx.Response(200, json=OPENAI.answer(Step(text=json.dumps(answer)), model))

    route = http.post(OPENAI.url).mock(side_effect=respond)
    config = make_config(
        model="openai/gpt-4o-mini",
        agentModel="anthropic/claude-sonnet-4-5",
        apiKey=API_KEY,
        categories=CATEGORIES,
    )
    verdict = await Verifier(config).verify(Turn(user_message="Dose?"), "Take 800 mg.")
    sent = json.loads(route.calls[0].request.content)
    assert sent["response_format"] == verdict_format(("medical_advice",))
    assert (verdict.passed, verdict.category) == (False, "medical_advice")


# -- end to end over the loopback provider -------------------------------------------------------


async def test_a_turn_failed_in_a_custom_category_retries_with_its_guidance(
    tmp_path: Path, provider: ProviderServer
) -> None:
    space = _workspace(tmp_path)
    ledger = tmp_path / "ledger.jsonl"
    provider.push(Step(text="A dose is named.\nFAIL [Medical Advice]: drop the dose"), Step())
    config = VerifierConfig.from_dict(
        {
            "enabled": True,
            "verifyAll": True,
            "model": ANTHROPIC.judge_model,
            "agentModel": ANTHROPIC.agent_model,
            "apiKey": API_KEY,
            "apiBase": provider.url,
            "workspaceDir": str(space),
            "rubricFile": "RUBRIC.md",
            "categories": CATEGORIES,
            "ledgerPath": str(ledger),
        }
    )
    agent = ScriptedAgent(["Take 800 mg.", "Please ask a doctor about the dose."])
    outcome = await Verifier(config).run(agent, Turn(user_message="How much ibuprofen?"))
    assert outcome.status == Status.PASSED
    assert outcome.attempts[0].verdict is not None
    assert outcome.attempts[0].verdict.category == "medical_advice"
    retry_message = agent.calls[1][-1]["content"]
    assert "(medical_advice)" in retry_message and CATEGORIES["medical_advice"] in retry_message
    system = provider.seen[0].prompt_texts[0]
    assert CRITERIA in system and "- medical_advice:" in system
    assert provider.seen[1].prompt_texts[0] == system  # the same rubric: cacheable
    entries, _ = read_ledger(ledger)
    assert entries[0].categories == ("medical_advice",)
    assert entries[0].rubric == Rubric(CRITERIA, tuple(CATEGORIES.items())).digest
    report = summarise(entries, ledger=str(ledger), skipped=[])
    assert [(c.name, c.count) for c in report.categories] == [("medical_advice", 1)]


def test_insights_shows_each_rubric_and_how_often_it_changed(tmp_path: Path) -> None:
    def line(rubric: str | None, ts: str, status: str = "passed") -> str:
        return json.dumps({"status": status, "rubric": rubric, "ts": ts, "attempts": 1})

    ledger = tmp_path / "ledger.jsonl"
    rows = [
        line("aaaaaaaaaaaa", "2026-01-01T00:00:00Z"),
        line("aaaaaaaaaaaa", "2026-01-02T00:00:00Z", "exhausted"),
        line(None, "2026-01-02T12:00:00Z"),  # an older line without the field
        line("bbbbbbbbbbbb", "2026-01-03T00:00:00Z"),
        line("aaaaaaaaaaaa", "2026-01-04T00:00:00Z"),
    ]
    ledger.write_text("\n".join(rows) + "\n")
    entries, _ = read_ledger(ledger)
    report = summarise(entries, ledger=str(ledger), skipped=[])
    assert report.rubric_changes == 2
    first, second = report.rubrics
    assert (first.name, first.turns, first.first_seen, first.last_seen) == (
        "aaaaaaaaaaaa",
        3,
        "2026-01-01T00:00:00Z",
        "2026-01-04T00:00:00Z",
    )
    assert (first.exhausted_rate, second.name, second.turns) == (0.3333, "bbbbbbbbbbbb", 1)
