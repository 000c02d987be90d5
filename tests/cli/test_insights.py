"""``replyguard insights``: a ledger's recurring failures, suggestions built from its numbers.

Two fixture ledgers with different failure profiles: ``ledger_support.jsonl`` (a ``report`` run
kind that keeps exhausting on incomplete answers; feedback logged) and ``ledger_ops.jsonl``
(judge timeouts on one model, cost budgets, stagnant retries, a flaky check; no feedback).
The proposal call is tested at the litellm boundary with respx, in OpenAI's wire format.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from conftest import API_KEY, SecretsGuard
from replyguard.cli import main
from replyguard.insights import Report, percentile, read_ledger, summarise, themes
from support.provider_server import OPENAI, Step

FIXTURES = Path(__file__).parents[1] / "fixtures"
SUPPORT = FIXTURES / "ledger_support.jsonl"
OPS = FIXTURES / "ledger_ops.jsonl"
LONG_FEEDBACK = (  # in ledger_support.jsonl, 118 characters
    "The reply stops after two of the five regions; the remaining regions are missing entirely, "
    "so the report is incomplete."
)
# A key with no API-key shape: only redaction of the config's own secrets can hide it.
PLAIN_KEY = "plainvalue-0123456789-credential"


def report_of(path: Path, top: int = 10) -> Report:
    entries, skipped = read_ledger(path)
    return summarise(entries, ledger=str(path), skipped=skipped, top=top)


def write_ledger(tmp_path: Path, *lines: str | dict[str, Any]) -> Path:
    path = tmp_path / "ledger.jsonl"
    text = [line if isinstance(line, str) else json.dumps(line) for line in lines]
    path.write_text("".join(f"{line}\n" for line in text), encoding="utf-8")
    return path


def turn(status: str = "passed", **keys: Any) -> dict[str, Any]:
    return {"status": status, "attempts": 1, "costUsd": 0.001, "latencyMs": 1000.0, **keys}


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["insights", *args])
    out, err = capsys.readouterr()
    return code, out, err


def rules(report: Report) -> list[str]:
    return [s.rule for s in report.suggestions]


def suggestion(report: Report, rule: str) -> str:
    (text,) = [s.text for s in report.suggestions if s.rule == rule]
    return text


# --- reading the ledger -------------------------------------------------------------------------


def test_lines_that_are_not_entries_are_skipped_counted_and_numbered(tmp_path: Path) -> None:
    path = write_ledger(
        tmp_path, turn(), "not json", "[1, 2]", {"attempts": 2}, turn(), '{"status": "pass'
    )
    entries, skipped = read_ledger(path)
    assert (len(entries), skipped) == (2, [2, 3, 4, 6])


def test_blank_lines_are_neither_entries_nor_skipped(tmp_path: Path) -> None:
    path = write_ledger(tmp_path, turn(), "", "   ", turn())
    entries, skipped = read_ledger(path)
    assert (len(entries), skipped) == (2, [])


def test_unknown_keys_are_ignored(tmp_path: Path) -> None:
    path = write_ledger(tmp_path, turn(verifierVersion="9.9", extra={"nested": True}))
    entries, skipped = read_ledger(path)
    assert (entries[0].status, skipped) == ("passed", [])


def test_a_failed_attempt_without_feedback_text_keeps_its_line(tmp_path: Path) -> None:
    path = write_ledger(tmp_path, turn(feedback=[None, "Say the date."]))
    report = report_of(path)
    assert (report.skipped_lines, report.totals.feedbacks) == (0, 1)


def test_report_lists_the_first_five_skipped_line_numbers(tmp_path: Path) -> None:
    path = write_ledger(tmp_path, turn(), *["oops"] * 7)
    report = report_of(path)
    assert (report.skipped_lines, report.skipped_line_numbers) == (7, [2, 3, 4, 5, 6])


def test_text_report_says_how_many_lines_were_skipped_and_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_ledger(tmp_path, turn(), "oops", turn(), "{")
    code, out, _ = run(capsys, str(path))
    assert code == 0
    assert "skipped 2 lines that are not entries: 2, 4" in out


# --- aggregation --------------------------------------------------------------------------------


def test_percentile_is_nearest_rank() -> None:
    values = [40.0, 10.0, 30.0, 20.0]
    assert (percentile(values, 50), percentile(values, 95), percentile([], 50)) == (
        20.0,
        40.0,
        None,
    )


def test_totals_count_turns_statuses_reasons_cost_and_latency() -> None:
    totals = report_of(OPS).totals
    assert totals.turns == 50
    assert totals.by_status == {"passed": 28, "failed_open": 15, "exhausted": 7}
    assert totals.reasons == {
        "judge_timeout": 8,
        "cost_budget": 5,
        "stagnant": 4,
        "circuit_open": 2,
    }
    assert (totals.cost_usd, totals.judge_cost_usd) == (0.697, 0.4182)
    assert (totals.latency_p50_ms, totals.latency_p95_ms) == (6250.0, 36030.0)


def test_run_kind_rates_attempts_and_cost() -> None:
    report = next(k for k in report_of(SUPPORT).run_kinds if k.name == "report")
    assert (report.turns, report.first_attempt_pass_rate, report.exhausted_rate) == (20, 0.4, 0.4)
    assert (report.mean_attempts, report.max_attempts) == (2.0, 3)
    assert (report.cost_per_turn_usd, report.cost_p95_usd) == (0.024, 0.036)


def test_skipped_turns_count_as_turns_but_not_as_verified() -> None:
    default = next(k for k in report_of(SUPPORT).run_kinds if k.name == "(default)")
    assert (default.turns, default.verified, default.first_attempt_pass_rate) == (4, 0, 0.0)


def test_categories_count_failed_attempts_with_share_and_run_kinds() -> None:
    categories = {c.name: c for c in report_of(OPS).categories}
    assert list(categories) == ["goal_missed", "incomplete", "(none)"]
    goal = categories["goal_missed"]
    assert (goal.count, goal.share, goal.run_kinds) == (19, 0.5588, {"cron": 19})


def test_checks_count_failures_and_the_turns_they_failed_in() -> None:
    checks = {c.name: c for c in report_of(OPS).checks}
    http = checks["http_request"]
    assert (http.failures, http.turns_failed, http.turns_run, http.failure_rate) == (
        7,
        7,
        30,
        0.2333,
    )


def test_failed_checks_repeated_per_attempt_count_once_per_turn(tmp_path: Path) -> None:
    path = write_ledger(tmp_path, turn(checks=["json"], failedChecks=["json", "json"]))
    (check,) = report_of(path).checks
    assert (check.failures, check.turns_failed) == (2, 1)


def test_judge_models_show_fail_open_rate_and_timeouts() -> None:
    models = {m.name: m for m in report_of(OPS).judge_models}
    o3 = models["openai/o3"]
    assert (o3.turns, o3.failed_open, o3.fail_open_rate, o3.timeouts) == (25, 5, 0.2, 5)


# --- feedback themes ----------------------------------------------------------------------------


def test_themes_of_a_ledger_rank_phrases_by_feedbacks_they_are_in() -> None:
    found = [(t.text, t.feedbacks) for t in report_of(SUPPORT).themes[:3]]
    assert found == [("quarterly totals", 12), ("due date", 11), ("missing", 11)]


def test_a_theme_counts_once_per_feedback() -> None:
    (theme,) = themes(["totals totals totals", "totals"])
    assert (theme.text, theme.feedbacks) == ("totals", 2)


def test_stop_words_are_not_themes() -> None:
    found = {t.text for t in themes(["The reply is not in the table.", "It is not in a table."])}
    assert found == {"table"}


def test_a_phrase_hides_the_words_inside_it_when_as_frequent() -> None:
    found = {t.text: t.feedbacks for t in themes(["due date missing", "due date late", "late"])}
    assert found == {"due date": 2, "late": 2}


def test_theme_example_is_cut_to_100_characters() -> None:
    example = themes([LONG_FEEDBACK, LONG_FEEDBACK])[0].example
    assert (len(example), example[-2:]) == (100, "r…")


def test_top_limits_the_themes_listed() -> None:
    assert len(report_of(SUPPORT, top=2).themes) == 2


def test_top_does_not_change_the_suggestions() -> None:
    assert report_of(SUPPORT, top=1).suggestions == report_of(SUPPORT, top=50).suggestions


def test_a_ledger_without_feedback_has_no_themes() -> None:
    assert report_of(OPS).themes == []


# --- suggestions --------------------------------------------------------------------------------


def test_the_two_ledgers_give_different_suggestions() -> None:
    support, ops = report_of(SUPPORT), report_of(OPS)
    assert rules(support) == ["exhausted", "theme", "theme"]
    assert rules(ops) == ["exhausted", "cost_budget", "judge_timeout", "stagnant", "check"]
    assert not {s.text for s in support.suggestions} & {s.text for s in ops.suggestions}


@pytest.mark.parametrize("path", [SUPPORT, OPS], ids=["support", "ops"])
def test_every_suggestion_cites_counts_found_in_the_report(path: Path) -> None:
    report = report_of(path)
    numbers = {int(n) for n in re.findall(r"\d+", report.model_dump_json(exclude={"suggestions"}))}
    for s in report.suggestions:
        cited = re.findall(r"(\d+) of (\d+) [a-z -]+ \((\d+)%\)", s.text)
        assert cited, s.text
        for part, whole, percent in cited:
            assert {int(part), int(whole)} <= numbers, s.text
            assert round(100 * int(part) / int(whole)) == int(percent), s.text


def test_exhausted_run_kind_failing_incomplete_suggests_more_attempts_and_a_rule() -> None:
    assert suggestion(report_of(SUPPORT), "exhausted") == (
        "Run kind 'report': 8 of 20 turns (40%) exhausted, mostly 'incomplete' (26 of 28 failed "
        "attempts): raise runKinds.report.maxAttempts above 3, or add a completeness rule to "
        'AGENTS.md (top theme: "quarterly totals").'
    )


def test_exhausted_run_kind_failing_otherwise_suggests_a_rule_not_attempts() -> None:
    text = suggestion(report_of(OPS), "exhausted")
    assert text.startswith("Run kind 'cron': 7 of 20 turns (35%) exhausted, mostly 'goal_missed'")
    assert "maxAttempts" not in text


def test_judge_timeouts_suggest_a_longer_timeout_naming_the_slow_model() -> None:
    assert suggestion(report_of(OPS), "judge_timeout") == (
        "8 of 15 fail-opens (53%) were judge_timeout, 5 in turns judged by openai/o3, which "
        "failed open in 5 of 25 turns (20%): raise timeoutSeconds, or add fallbackModels to "
        "replace openai/o3."
    )


def test_judge_timeouts_in_turns_no_model_answered_name_no_model(tmp_path: Path) -> None:
    lines = [turn("failed_open", reason="judge_timeout")] * 3 + [turn(judgeModels=["m/x"])] * 5
    text = suggestion(report_of(write_ledger(tmp_path, *lines)), "judge_timeout")
    assert text == (
        "3 of 3 fail-opens (100%) were judge_timeout: raise timeoutSeconds, or add fallbackModels."
    )


def test_cost_budget_stops_suggest_raising_the_run_kinds_ceiling_citing_its_p95() -> None:
    assert suggestion(report_of(OPS), "cost_budget") == (
        "Run kind 'cron': 5 of 20 turns (25%) stopped at cost_budget (p95 per turn $0.0510, "
        "cut short by the ceiling itself): if those turns matter, raise "
        "runKinds.cron.maxCostUsd well above it, or lower maxAttempts so fewer retries are "
        "started."
    )


def test_latency_budget_stops_without_run_kind_suggest_the_top_level_key(tmp_path: Path) -> None:
    lines = [turn("failed_open", reason="latency_budget", latencyMs=9000.0)] * 3 + [turn()] * 7
    text = suggestion(report_of(write_ledger(tmp_path, *lines)), "latency_budget")
    assert "3 of 10 turns (30%)" in text and "raise maxLatencyMs" in text
    assert "p95 per turn 9000 ms" in text


def test_stagnant_turns_suggest_another_model_for_their_run_kind() -> None:
    text = suggestion(report_of(OPS), "stagnant")
    assert text.startswith("4 of 50 turns (8%) stopped as stagnant")
    assert "try another agent model for 'cron'" in text


def test_a_check_failing_often_is_named_and_one_failing_rarely_is_not() -> None:
    texts = [s.text for s in report_of(OPS).suggestions if s.rule == "check"]
    assert len(texts) == 1 and texts[0].startswith(
        "Check 'http_request' failed in 7 of 30 turns it ran in (23%)"
    )


def test_frequent_phrases_are_quoted_as_rules_to_add_once_each() -> None:
    texts = [s.text for s in report_of(SUPPORT).suggestions if s.rule == "theme"]
    assert [t.split('"')[1] for t in texts] == ["quarterly totals", "due date"]
    assert texts[0].startswith('"quarterly totals" comes up in 12 of 32 feedbacks (38%), e.g. "')


def test_a_healthy_ledger_gets_no_suggestion(tmp_path: Path) -> None:
    assert report_of(write_ledger(tmp_path, *[turn()] * 20)).suggestions == []


def test_a_run_kind_with_few_turns_gets_no_suggestion(tmp_path: Path) -> None:
    lines = [turn("exhausted", runKind="rare", attempts=3, categories=["incomplete"] * 3)] * 4
    assert report_of(write_ledger(tmp_path, *lines)).suggestions == []


# --- the command line ---------------------------------------------------------------------------


def test_cli_prints_each_section_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(OPS))
    assert code == 0
    sections = ["TOTALS", "BY RUN KIND", "BY CATEGORY", "BY CHECK", "BY JUDGE MODEL"]
    assert all(f"\n{s}" in out for s in [*sections, "FEEDBACK THEMES", "SUGGESTIONS"])
    assert "  3. 8 of 15 fail-opens (53%) were judge_timeout" in out


def test_cli_json_prints_the_report_with_stable_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(SUPPORT), "--json")
    data = json.loads(out)
    assert code == 0 and list(data) == [
        "ledger",
        "skippedLines",
        "skippedLineNumbers",
        "totals",
        "runKinds",
        "categories",
        "checks",
        "judgeModels",
        "rubrics",
        "rubricChanges",
        "panelMembers",
        "themes",
        "suggestions",
        "drift",
    ]
    assert list(data["runKinds"][0]) == list(report_of(SUPPORT).run_kinds[0].model_dump())
    assert data["suggestions"][0]["rule"] == "exhausted"


def test_cli_empty_ledger_says_so_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, str(write_ledger(tmp_path)))
    assert code == 0 and out.endswith("no turns in the ledger\n")


def test_cli_empty_ledger_as_json_has_zero_totals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run(capsys, str(write_ledger(tmp_path)), "--json")
    data = json.loads(out)
    assert (data["totals"]["turns"], data["totals"]["latencyP50Ms"], data["suggestions"]) == (
        0,
        None,
        [],
    )


def test_cli_missing_ledger_exits_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere.jsonl"
    code, out, err = run(capsys, str(missing))
    assert (code, out) == (2, "")
    assert f"cannot read ledger {missing}: file not found" in err


def test_a_line_torn_inside_a_multibyte_character_is_skipped_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A write stopped by a full disk: the last line ends halfway through "é" (0xC3 0xA9).
    whole = json.dumps(turn(userMessage="café"), ensure_ascii=False).encode()
    torn = whole[: whole.index(b"\xc3") + 1]
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b"\n".join([whole, whole, torn]) + b"\n")
    entries, skipped = read_ledger(path)
    assert (len(entries), skipped) == (2, [3])
    code, out, err = run(capsys, str(path))
    assert (code, err) == (0, "")
    assert "turns 2" in out and "skipped 1 lines that are not entries: 3" in out


def test_a_ledger_of_binary_garbage_reports_no_turns_and_every_line_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "binary.jsonl"
    path.write_bytes(b"\xff\xfe\x00garbage\n\xc3")
    code, out, _ = run(capsys, str(path))
    assert code == 0
    assert "skipped 2 lines that are not entries: 1, 2" in out and "no turns in the ledger" in out


def test_cli_ledger_that_is_a_directory_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, str(tmp_path))
    assert (code, out) == (2, "")
    assert f"cannot read ledger {tmp_path}: IsADirectoryError" in err


def test_cli_propose_without_config_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, str(SUPPORT), "--propose")
    assert code == 2 and "--propose needs --config FILE" in err


def test_cli_top_below_1_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["insights", str(SUPPORT), "--top", "0"])
    assert exited.value.code == 2
    assert "--top: must be a whole number of at least 1" in capsys.readouterr().err


def test_cli_propose_with_a_bad_config_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "verifier.json"
    config.write_text('{"maxAttempts": "three"}')
    code, _, err = run(capsys, str(SUPPORT), "--propose", "--config", str(config))
    assert code == 2 and str(config) in err and "maxAttempts" in err


# --- --propose at the litellm boundary ----------------------------------------------------------

PROPOSAL = "1. Add to AGENTS.md: 'Always include the quarterly totals.'"


@pytest.fixture
def http(respx_litellm: None) -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        yield router


def config_file(tmp_path: Path, **keys: Any) -> str:
    path = tmp_path / "verifier.json"
    path.write_text(json.dumps({"model": OPENAI.judge_model, "apiKey": API_KEY, **keys}))
    return str(path)


def answering(text: str) -> httpx.Response:
    return httpx.Response(200, json=OPENAI.answer(Step(text=text), "gpt-4o-mini"))


def test_propose_prints_the_proposal_under_a_review_header(
    http: respx.MockRouter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    http.post(OPENAI.url).mock(return_value=answering(PROPOSAL))
    code, out, _ = run(capsys, str(SUPPORT), "--propose", "--config", config_file(tmp_path))
    assert code == 0
    assert out.endswith(
        "\nPROPOSAL by openai/gpt-4o-mini, for a human to review (nothing was changed or "
        f"applied)\n{PROPOSAL}\n"
    )


def test_propose_sends_the_aggregated_report_with_the_configured_key(
    http: respx.MockRouter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    route = http.post(OPENAI.url).mock(return_value=answering(PROPOSAL))
    run(capsys, str(SUPPORT), "--propose", "--config", config_file(tmp_path))
    request = route.calls[0].request
    body = json.loads(request.content)
    summary = json.loads(body["messages"][1]["content"])
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert (body["model"], summary["themes"][0]["text"]) == ("gpt-4o-mini", "quarterly totals")
    assert "ledger" not in summary and "t-001" not in request.content.decode()
    assert LONG_FEEDBACK not in request.content.decode()  # only the ≤ 100-character snippets


def test_propose_goes_to_the_configured_api_base(
    http: respx.MockRouter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    route = http.post("http://proxy.test/v1/chat/completions").mock(
        return_value=answering(PROPOSAL)
    )
    config = config_file(tmp_path, apiBase="http://proxy.test/v1")
    code, _, _ = run(capsys, str(OPS), "--propose", "--config", config)
    assert (code, route.call_count) == (0, 1)


def test_propose_with_json_adds_the_proposal_to_the_report(
    http: respx.MockRouter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    http.post(OPENAI.url).mock(return_value=answering(PROPOSAL))
    _, out, _ = run(capsys, str(OPS), "--json", "--propose", "--config", config_file(tmp_path))
    proposal = json.loads(out)["proposal"]
    assert (proposal["text"], proposal["model"]) == (PROPOSAL, "openai/gpt-4o-mini")
    assert "for a human to review" in proposal["header"]


def test_propose_failure_exits_1_with_the_key_redacted_and_no_traceback(
    http: respx.MockRouter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    http.post(OPENAI.url).mock(
        return_value=httpx.Response(401, content=OPENAI.error(401, f"Bad key: {PLAIN_KEY}"))
    )
    config = config_file(tmp_path, apiKey=PLAIN_KEY)
    code, out, err = run(capsys, str(SUPPORT), "--propose", "--config", config)
    assert (code, out) == (1, "")
    assert err.startswith("replyguard insights: the proposal failed: ")
    assert "Bad key: [REDACTED]" in err and PLAIN_KEY not in err and "Traceback" not in err


def test_a_key_the_proposal_echoes_is_never_printed(
    http: respx.MockRouter,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    secrets_guard: SecretsGuard,
) -> None:
    http.post(OPENAI.url).mock(return_value=answering(f"{PROPOSAL}\n(sent with {PLAIN_KEY})"))
    config = config_file(tmp_path, apiKey=PLAIN_KEY)
    code, out, _ = run(capsys, str(SUPPORT), "--json", "--propose", "--config", config)
    assert code == 0 and PLAIN_KEY not in out
    assert json.loads(out)["proposal"]["text"] == f"{PROPOSAL}\n(sent with [REDACTED])"
    # litellm's own DEBUG record of the raw answer is outside replyguard's reach (README)
    assert {leak.logger for leak in secrets_guard.forgive()} <= {"LiteLLM"}


def test_propose_of_an_empty_answer_exits_1(
    http: respx.MockRouter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    http.post(OPENAI.url).mock(return_value=answering(""))
    code, _, err = run(capsys, str(OPS), "--propose", "--config", config_file(tmp_path))
    assert code == 1 and "the proposal failed: JudgeError" in err


def test_a_line_separator_inside_a_record_does_not_split_it(tmp_path: Path) -> None:
    record = {"status": "exhausted", "attempts": 2, "feedback": ["a\u2028b\u0085c"]}
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    entries, skipped = read_ledger(ledger)
    assert (len(entries), skipped) == (1, [])


def test_insights_help_says_what_it_prints_and_its_exit_codes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["insights", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert done.value.code == 0
    assert "Read one or more ledgers" in said and "nothing is written or applied" in said
    assert "exit 0 when the report was printed, 1 when --propose's model call failed, 2 " in said
