"""Judge panels: several judge models asked at once on every judged attempt, one decision.

The members are OpenAI-wire models of three families, all served by the loopback provider
(``apiBase``), which answers each by the model it was asked for. Concurrency is proved with
the provider's barrier (``Step.after_requests``): a member asked only after another answered
would never get past it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import API_KEY, SecretsGuard
from replyguard import (
    Done,
    FailCategory,
    Outcome,
    Reason,
    Status,
    Turn,
    Verdict,
    Verifier,
    VerifierConfig,
)
from replyguard.errors import ConfigError, CrossFamilyError, JudgeError
from replyguard.insights.report import read_ledger, summarise
from replyguard.judge._panel import panel_verdict
from replyguard.runner._preflight import config_findings
from replyguard.telemetry._tracing import verdict_attributes
from replyguard.testing import ScriptedAgent, ScriptedJudge
from support.provider_server import ProviderServer, Seen, Step

GPT, GEMINI, CLAUDE = "openai/gpt-4o-mini", "openai/gemini-2.0-flash", "openai/claude-3-5-haiku"
MEMBERS = [GPT, GEMINI, CLAUDE]
AGENT = "deepseek/deepseek-chat"
FAIL_TEXT = "The date is missing.\nFAIL [incomplete]: Add the report's date."
TURN = Turn(user_message="Write the weekly report, with its date.", run_kind="high")


def by_model(answers: dict[str, Step]) -> Callable[[Seen], Step]:
    """A responder answering each member (litellm sends the name without ``openai/``)."""
    steps = {model.split("/", 1)[1]: step for model, step in answers.items()}
    return lambda seen: steps[seen.body["model"]]


def config(provider: ProviderServer, panel: dict[str, Any], **keys: Any) -> VerifierConfig:
    return VerifierConfig.from_dict(
        {
            "enabled": True,
            "verifyAll": True,
            "model": GPT,
            "agentModel": AGENT,
            "apiKey": API_KEY,
            "apiBase": provider.url,
            "timeoutSeconds": 10,
            "runKinds": {"high": {"panel": {"models": MEMBERS, **panel}}},
            **keys,
        }
    )


async def verdict_of(verifier: Verifier, reply: str = "Done: the report is ready.") -> Verdict:
    try:
        return await verifier.verify(TURN, reply)
    finally:
        await verifier.aclose()


# -- the decision (pure) ---------------------------------------------------------------------------


def member(name: str, passed: bool | None, category: Any = None, **fields: Any) -> Verdict:
    """A member's verdict; ``passed=None``: it did not answer (a fail-open verdict)."""
    if passed is None:
        return Verdict(
            passed=True, readable=False, fail_open_reason=Reason.JUDGE_TIMEOUT, model=name
        )
    return Verdict(passed=passed, category=category, model=name, **fields)


def decide(*members: Verdict, rule: Any = "any_fail", min_answers: int = 1) -> Verdict:
    return panel_verdict(members, rule=rule, min_answers=min_answers, latency_ms=5.0)


@pytest.mark.parametrize(
    ("votes", "rule", "passed"),
    [
        ((True, True, True), "any_fail", True),
        ((True, True, False), "any_fail", False),
        ((True, True, False), "majority", True),
        ((True, False, False), "majority", False),
        ((True, False), "majority", False),  # a tie fails
        ((True, False, None), "majority", False),  # the tie of those that answered
        ((True, True, None), "any_fail", True),
    ],
)
def test_the_rule_decides_on_the_members_that_answered(
    votes: tuple[bool | None, ...], rule: str, passed: bool
) -> None:
    verdict = decide(*(member(f"m{i}", v) for i, v in enumerate(votes)), rule=rule)
    assert (verdict.passed, verdict.readable, verdict.fail_open_reason) == (passed, True, None)
    assert len(verdict.members) == len(votes)


def test_fewer_answers_than_min_answers_fail_open_with_the_members_reason() -> None:
    verdict = decide(member("a", False), member("b", None), member("c", None), min_answers=2)
    assert (verdict.passed, verdict.readable, verdict.fail_open_reason) == (
        True,
        False,
        Reason.JUDGE_TIMEOUT,
    )
    assert verdict.error is not None and "1 of 3 panel members answered" in verdict.error


def test_a_fail_merges_the_failing_feedback_under_member_names_and_sums_the_spend() -> None:
    verdict = decide(
        member("a", False, "incomplete", feedback="Add the date.", cost_usd=0.01, prompt_tokens=9),
        member("b", True, cost_usd=0.02, prompt_tokens=9),
        member("c", False, "tone_mismatch", feedback="Less slang.", cost_usd=0.03),
        member("d", False, "tone_mismatch"),
    )
    assert verdict.feedback == (
        "[a] Add the date.\n[c] Less slang.\n[d] failed the reply, without details"
    )
    assert verdict.category is FailCategory.TONE_MISMATCH  # named most often
    assert (round(verdict.cost_usd, 6), verdict.prompt_tokens) == (0.06, 18)
    assert verdict.model == "a, b, c, d"


def test_the_panels_model_names_the_members_that_decided() -> None:
    decided = decide(member("a", True), member("b", None), member("c", False, "incomplete"))
    assert decided.model == "a, c"
    assert [m.model for m in decided.members] == ["a", "b", "c"]
    none = decide(member("a", None), member("b", None), min_answers=1)
    assert (none.fail_open_reason, none.model) == (Reason.JUDGE_TIMEOUT, "a, b")


def test_a_pass_awaits_the_user_when_most_passing_members_say_so() -> None:
    yes = decide(member("a", True, awaiting_user=True), member("b", True, awaiting_user=True))
    no = decide(member("a", True, awaiting_user=True), member("b", True))
    assert (yes.awaiting_user, no.awaiting_user) == (True, False)


# -- config ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("panel", "message"),
    [
        ({"models": [GPT]}, "at least two models"),
        ({"models": [GPT, GPT]}, "listed twice"),
        ({"models": [GPT, GEMINI], "minAnswers": 3}, "minAnswers (3)"),
        ({"models": [GPT, GEMINI], "rule": "unanimous"}, "rule"),
        ({"models": [GPT, {"model": " "}]}, "must name a model"),
        ({"models": [GPT, GEMINI], "minAnswers": 0}, "minAnswers"),
    ],
)
def test_a_bad_panel_is_a_config_error_naming_the_key(panel: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=r"runKinds\.high\.panel") as caught:
        VerifierConfig.from_dict({"runKinds": {"high": {"panel": panel}}})
    assert message in str(caught.value)


def test_members_of_one_family_are_warned_about() -> None:
    data = {"agentModel": AGENT, "runKinds": {"high": {"panel": {"models": [GPT, "gpt-4.1"]}}}}
    findings = config_findings(VerifierConfig.from_dict(data))
    found = [f for f in findings if f.event == "panel_same_family"]
    assert [(f.key, f.level) for f in found] == [("runKinds.high.panel.models", "warning")]


def test_a_member_of_the_agents_family_is_refused_with_require_cross_family() -> None:
    data = {
        "agentModel": "openai/gpt-4o",
        "requireCrossFamily": True,
        "runKinds": {"high": {"panel": {"models": [GEMINI, GPT]}}},
    }
    with pytest.raises(CrossFamilyError, match="gpt-4o-mini"):
        Verifier(VerifierConfig.from_dict(data), preload=False)


# -- over the loopback provider --------------------------------------------------------------------


async def test_members_are_asked_at_once_within_one_deadline(provider: ProviderServer) -> None:
    provider.respond_with(lambda seen: Step(text="PASS", after_requests=3))
    verdict = await verdict_of(Verifier(config(provider, {}, timeoutSeconds=3)))
    assert verdict.passed and verdict.fail_open_reason is None
    assert [(m.model, m.readable) for m in verdict.members] == [(m, True) for m in MEMBERS]
    assert sorted(seen.body["model"] for seen in provider.seen) == [
        "claude-3-5-haiku",
        "gemini-2.0-flash",
        "gpt-4o-mini",
    ]


async def test_one_fail_fails_the_reply_with_its_feedback_under_its_name(
    provider: ProviderServer,
) -> None:
    provider.respond_with(
        by_model(
            {
                GPT: Step(),
                GEMINI: Step(text=FAIL_TEXT, after_answers=2),  # the others have answered
                CLAUDE: Step(prompt_tokens=100),
            }
        )
    )
    verdict = await verdict_of(Verifier(config(provider, {})))
    assert (verdict.passed, verdict.category) == (False, FailCategory.INCOMPLETE)
    assert verdict.feedback == f"[{GEMINI}] Add the report's date."
    assert verdict.prompt_tokens == 900 + 900 + 100
    assert [m.passed for m in verdict.members] == [True, False, True]


async def test_a_majority_panel_passes_over_one_fail(provider: ProviderServer) -> None:
    provider.respond_with(by_model({GPT: Step(), GEMINI: Step(text=FAIL_TEXT), CLAUDE: Step()}))
    verdict = await verdict_of(Verifier(config(provider, {"rule": "majority"})))
    assert verdict.passed and verdict.feedback is None


async def test_a_failing_member_is_left_out_and_the_rest_decide(
    provider: ProviderServer,
) -> None:
    provider.respond_with(
        by_model({GPT: Step(text=None, status=500), GEMINI: Step(text=FAIL_TEXT), CLAUDE: Step()})
    )
    verdict = await verdict_of(Verifier(config(provider, {"rule": "majority"})))
    assert (verdict.passed, verdict.fail_open_reason) == (False, None)  # 1:1 of those answering
    assert verdict.members[0].fail_open_reason == Reason.JUDGE_ERROR


async def test_too_few_answers_fail_open(provider: ProviderServer) -> None:
    provider.respond_with(
        by_model(
            {GPT: Step(text=None, status=500), GEMINI: Step(text="no verdict"), CLAUDE: Step()}
        )
    )
    verdict = await verdict_of(Verifier(config(provider, {"minAnswers": 2})))
    assert (verdict.passed, verdict.readable, verdict.fail_open_reason) == (
        True,
        False,
        Reason.JUDGE_ERROR,
    )
    assert [m.fail_open_reason for m in verdict.members] == [
        Reason.JUDGE_ERROR,
        Reason.UNREADABLE_VERDICT,
        None,
    ]


async def test_a_hung_member_is_left_out_at_the_shared_deadline(
    provider: ProviderServer,
) -> None:
    provider.respond_with(by_model({GPT: Step(delay=30), GEMINI: Step(), CLAUDE: Step()}))
    verifier = Verifier(config(provider, {}, timeoutSeconds=0.5))
    await verifier.warmup()
    verdict = await verdict_of(verifier)
    assert verdict.passed and verdict.fail_open_reason is None
    assert verdict.members[0].fail_open_reason == Reason.JUDGE_TIMEOUT
    assert 400 <= verdict.latency_ms < 3000  # the deadline, not the hung member's 30 s


async def test_each_member_has_its_own_circuit_breaker(provider: ProviderServer) -> None:
    provider.respond_with(
        by_model({GPT: Step(text=None, status=503), GEMINI: Step(), CLAUDE: Step()})
    )
    verifier = Verifier(config(provider, {}, circuitBreaker={"failureThreshold": 1}))
    try:
        first = await verifier.verify(TURN, "Done.")
        second = await verifier.verify(TURN, "Done.")
    finally:
        await verifier.aclose()
    assert first.members[0].fail_open_reason == Reason.JUDGE_ERROR
    assert second.members[0].fail_open_reason == Reason.CIRCUIT_OPEN
    asked = [seen.body["model"] for seen in provider.seen]
    assert (asked.count("gpt-4o-mini"), asked.count("gemini-2.0-flash")) == (1, 2)
    assert second.passed and second.fail_open_reason is None


async def test_a_member_falls_back_to_its_own_fallbacks_only(provider: ProviderServer) -> None:
    provider.respond_with(
        by_model(
            {
                GPT: Step(text=None, status=503),
                "openai/mistral-small": Step(text=FAIL_TEXT),
                GEMINI: Step(),
            }
        )
    )
    members = [{"model": GPT, "fallbackModels": ["openai/mistral-small"]}, GEMINI]
    verdict = await verdict_of(Verifier(config(provider, {"models": members})))
    assert not verdict.passed and verdict.feedback == f"[{GPT}] Add the report's date."
    assert [seen.body["model"] for seen in provider.seen].count("mistral-small") == 1


async def test_the_concurrency_limit_takes_one_slot_per_member(provider: ProviderServer) -> None:
    provider.respond_with(lambda seen: Step())
    verdict = await verdict_of(Verifier(config(provider, {}, maxConcurrentJudgeCalls=1)))
    assert all(m.readable and m.fail_open_reason is None for m in verdict.members)


async def test_a_run_retries_on_the_panels_fail_and_logs_each_members_vote(
    provider: ProviderServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The first attempt: the FAIL is held until both PASSes were written, so the panel (which
    # decides at its first FAIL and cancels who is still out) has every member's vote.
    provider.push(Step(), Step(text=FAIL_TEXT, after_answers=2), Step())
    provider.respond_with(lambda seen: Step())  # the retry
    ledger = tmp_path / "ledger.jsonl"
    verifier = Verifier(config(provider, {}, ledgerPath=str(ledger)))
    agent = ScriptedAgent(["Done: the report.", "Done: the report, dated 3 May."])
    with caplog.at_level(logging.INFO, logger="replyguard"):
        outcome = await verifier.run(agent, TURN)
    await verifier.aclose()
    assert (outcome.status, len(outcome.attempts)) == (Status.PASSED, 2)
    assert "Add the report's date." in agent.calls[1][-1]["content"]
    assert len(provider.seen) == 6
    line = json.loads(ledger.read_text())
    votes = [{"PASS", "FAIL"} >= set(p["votes"].values()) for p in line["panel"]]
    assert [p["decision"] for p in line["panel"]] == ["FAIL", "PASS"] and all(votes)
    assert sorted(line["judgeModels"]) == sorted(MEMBERS)
    logged = [getattr(r, "replyguard", {}) for r in caplog.records]
    verdicts = [event for event in logged if event.get("event") == "verdict"]
    assert len(verdicts[0]["panel"]) == 3


async def test_a_streamed_turn_is_judged_by_the_panel(provider: ProviderServer) -> None:
    provider.respond_with(lambda seen: Step(text="PASS", after_requests=3))

    async def agent(messages: list[dict[str, Any]]) -> AsyncIterator[str]:
        for piece in ("Done: ", "the report."):
            yield piece

    verifier = Verifier(config(provider, {}, timeoutSeconds=3))
    events = [event async for event in verifier.stream(agent, TURN)]
    await verifier.aclose()
    done = events[-1]
    assert isinstance(done, Done)
    verdict = done.outcome.attempts[0].verdict
    assert verdict is not None and len(verdict.members) == 3 and verdict.passed


async def test_a_custom_judge_may_give_each_member_its_own(make_config: Any) -> None:
    judges = {GPT: ScriptedJudge(["PASS"]), GEMINI: ScriptedJudge([FAIL_TEXT])}

    class PerMember(ScriptedJudge):
        def member(self, model: str) -> ScriptedJudge:
            return judges[model]

    data = {"agentModel": AGENT, "runKinds": {"high": {"panel": {"models": [GPT, GEMINI]}}}}
    verifier = Verifier(make_config(**data), judge=PerMember([]))
    verdict = await verdict_of(verifier)
    assert [m.passed for m in verdict.members] == [True, False]
    for judge in judges.values():
        judge.assert_exhausted()


def test_insights_and_spans_show_each_members_agreement(tmp_path: Path) -> None:
    def line(decision: str, votes: dict[str, str | None]) -> str:
        panel = [{"attempt": 1, "decision": decision, "votes": votes}]
        return json.dumps({"status": "passed", "panel": panel})

    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text(
        "\n".join(
            [
                line("PASS", {"a": "PASS", "b": "PASS", "c": None}),
                line("FAIL", {"a": "FAIL", "b": "PASS", "c": "FAIL"}),
                line("PASS", {"a": "PASS", "b": "FAIL", "c": "PASS"}),
            ]
        )
    )
    report = summarise(read_ledger(ledger)[0], ledger=str(ledger), skipped=[])
    stats = {
        m.name: (m.answered, m.agreed, m.left_out, m.agreement_rate) for m in report.panel_members
    }
    assert stats == {"a": (3, 3, 0, 1.0), "b": (3, 1, 0, 0.3333), "c": (2, 2, 1, 1.0)}
    verdict = decide(member("a", False), member("b", True), member("c", None))
    attributes = verdict_attributes(verdict, False)
    assert attributes["replyguard.panel.votes"] == ("FAIL", "PASS", "none")
    assert attributes["replyguard.panel.agreement"] == 0.5


async def test_a_turn_without_a_panel_is_judged_by_one_model(provider: ProviderServer) -> None:
    provider.respond_with(lambda seen: Step())
    verifier = Verifier(config(provider, {}))
    try:
        verdict = await verifier.verify(Turn(user_message="Hi"), "Hello.")
    finally:
        await verifier.aclose()
    assert verdict.members == () and len(provider.seen) == 1


def test_run_sync_asks_the_members_at_once_too(provider: ProviderServer) -> None:
    provider.respond_with(lambda seen: Step(after_requests=3))
    verifier = Verifier(config(provider, {}, timeoutSeconds=3))
    try:
        outcome: Outcome = verifier.run_sync(ScriptedAgent(["Done: the report."]), TURN)
    finally:
        verifier.close()
    assert outcome.status == Status.PASSED and len(outcome.attempts[0].verdict.members) == 3  # type: ignore[union-attr]


def test_the_eval_report_shows_each_members_agreement_with_the_labels(
    provider: ProviderServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from replyguard.cli import main

    def responder(seen: Seen) -> Step:
        prompt = seen.prompt
        if seen.body["model"] == "gemini-2.0-flash":  # fails everything
            return Step(text=FAIL_TEXT)
        if seen.body["model"] == "claude-3-5-haiku":  # right on all: fails the undated one
            return Step(text=FAIL_TEXT if "no date" in prompt else "PASS")
        return Step(text="PASS")  # gpt: passes everything

    provider.respond_with(responder)
    rows = [
        {"userMessage": "The report.", "reply": "Here, dated 3 May.", "label": "PASS"},
        {"userMessage": "The report.", "reply": "Here it is, no date.", "label": "FAIL"},
        {"userMessage": "The report.", "reply": "Here, dated 4 May.", "label": "PASS"},
    ]
    dataset = tmp_path / "d.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = tmp_path / "verifier.json"
    data = {
        "model": GPT,
        "agentModel": AGENT,
        "apiKey": API_KEY,
        "apiBase": provider.url,
        "panel": {"models": MEMBERS, "rule": "majority"},
    }
    path.write_text(json.dumps(data))
    out_dir = tmp_path / "out"
    assert main(["eval", str(dataset), "--config", str(path), "--out", str(out_dir)]) == 0
    report = json.loads((out_dir / "report.json").read_text())
    panel = report["panel"]
    agreed = {n: (m["answered"], m["agreed"], m["agreedWithPanel"]) for n, m in panel.items()}
    assert agreed == {GPT: (3, 2, 2), GEMINI: (3, 1, 1), CLAUDE: (3, 3, 3)}
    assert report["panel"][CLAUDE]["accuracy"] == 1.0 and report["accuracy"] == 1.0
    printed = capsys.readouterr().out
    assert f"panel member {GEMINI}: agrees with the labels on 1 of 3" in printed
    # Wilson, 1 of 3 at z = 1.959964: [0.0615, 0.7923]
    assert panel[GEMINI]["intervals"]["accuracy"] == {
        "value": 0.3333,
        "low": 0.0615,
        "high": 0.7923,
        "n": 3,
    }
    assert "(accuracy 0.333, 95 % 0.061 to 0.792; kappa" in printed
    page = (out_dir / "report.html").read_text()
    assert "<h2>Judge panel members</h2>" in page and f"<td>{GEMINI}</td><td>1 of 3</td>" in page


async def test_with_shared_state_each_member_keeps_its_own_fleet_breaker(
    provider: ProviderServer,
) -> None:
    from support.redis_server import REDIS_PASSWORD, redis_server

    provider.respond_with(
        by_model({GPT: Step(text=None, status=503), GEMINI: Step(), CLAUDE: Step()})
    )
    with redis_server(REDIS_PASSWORD) as redis:
        state = {"redisUrl": redis.url(), "keyPrefix": "panel-test:", "timeoutMs": 3000}
        keys = {"state": state, "circuitBreaker": {"failureThreshold": 1}}
        verifier = Verifier(config(provider, {}, **keys))
        try:
            first = await verifier.verify(TURN, "Done.")
            second = await verifier.verify(TURN, "Done.")
        finally:
            await verifier.aclose()
    assert first.members[0].fail_open_reason == Reason.JUDGE_ERROR
    assert second.members[0].fail_open_reason == Reason.CIRCUIT_OPEN
    assert [m.fail_open_reason for m in second.members[1:]] == [None, None]
    assert second.passed and second.fail_open_reason is None
    asked = [seen.body["model"] for seen in provider.seen]
    assert (asked.count("gpt-4o-mini"), asked.count("claude-3-5-haiku")) == (1, 2)


async def test_a_member_the_price_map_does_not_know_is_looked_up_once(
    provider: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import litellm

    asked: list[str] = []
    price = litellm.completion_cost

    def counted(**kwargs: Any) -> float:
        asked.append(str(kwargs["completion_response"].model))
        return float(price(**kwargs))

    monkeypatch.setattr(litellm, "completion_cost", counted)
    provider.respond_with(lambda seen: Step())
    verifier = Verifier(config(provider, {}))
    try:
        for _ in range(3):
            verdict = await verifier.verify(TURN, "Done.")
    finally:
        await verifier.aclose()
    # gpt-4o-mini is priced on every call; the two names the map lacks are tried once each.
    assert asked.count("gemini-2.0-flash") == asked.count("claude-3-5-haiku") == 1
    assert verdict.members[0].cost_usd > 0 and verdict.members[1].cost_usd == 0


async def test_a_key_a_member_echoes_is_redacted_before_the_feedback_is_merged(
    provider: ProviderServer, secrets_guard: SecretsGuard
) -> None:
    echo = f"The reply is wrong.\nFAIL [incomplete]: use the key {API_KEY} to finish."
    provider.respond_with(by_model({GPT: Step(text=echo), GEMINI: Step(), CLAUDE: Step()}))
    verdict = await verdict_of(Verifier(config(provider, {})))
    assert not verdict.passed and verdict.feedback is not None
    assert (
        API_KEY not in verdict.feedback and "[openai/gpt-4o-mini] use the key" in verdict.feedback
    )
    assert all(API_KEY not in (m.raw or "") for m in verdict.members)
    # litellm's own DEBUG record of the raw response is its business, not replyguard's.
    assert {leak.logger for leak in secrets_guard.forgive()} <= {"LiteLLM"}


async def test_cancelling_a_judgement_cancels_every_members_call(
    provider: ProviderServer,
) -> None:
    provider.respond_with(lambda seen: Step(delay=30))
    verifier = Verifier(config(provider, {}))
    await verifier.warmup()
    task = asyncio.create_task(verifier.verify(TURN, "Done."))
    assert await provider.wait_for_requests(3, within=10) == 3
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await provider.wait_for_open_connections(0, within=5) == 0
    await verifier.aclose()


def _per_member(answers: dict[str, Any]) -> ScriptedJudge:
    """A custom judge giving each member its own scripted judge (``answers``: per member, its
    one answer: a text, or an exception the call raises)."""
    judges = {model: ScriptedJudge([answer]) for model, answer in answers.items()}

    class PerMember(ScriptedJudge):
        def member(self, model: str) -> ScriptedJudge:
            return judges[model]

    return PerMember([])


@pytest.mark.parametrize(
    ("answers", "judge_models"),
    [
        pytest.param(
            {GPT: "PASS", GEMINI: JudgeError("down"), CLAUDE: "no verdict here"},
            [GPT],
            id="one-of-three-counted",
        ),
        pytest.param(
            {GPT: "PASS", GEMINI: "PASS", CLAUDE: JudgeError("down")},
            sorted([GPT, GEMINI]),
            id="two-of-three-counted",
        ),
        pytest.param(
            {GPT: JudgeError("down"), GEMINI: JudgeError("down"), CLAUDE: "no verdict here"},
            sorted(MEMBERS),
            id="none-counted-names-the-members-asked",
        ),
    ],
)
async def test_the_ledger_names_as_judge_models_the_members_whose_verdict_counted(
    make_config: Any, tmp_path: Path, answers: dict[str, Any], judge_models: list[str]
) -> None:
    """``judgeModels`` names who decided the turn; ``panel`` still shows every member's vote
    (``null``: left out). When no member's verdict counted, it names every member asked (not
    the verifier's own model, which no panel turn asks)."""
    ledger = tmp_path / "ledger.jsonl"
    data = {
        "agentModel": AGENT,
        "model": "anthropic/claude-sonnet-4-5",
        "ledgerPath": str(ledger),
        "runKinds": {"high": {"panel": {"models": MEMBERS}}},
    }
    verifier = Verifier(make_config(**data), judge=_per_member(answers))
    try:
        await verifier.run(ScriptedAgent(["Done: the report."]), TURN)
    finally:
        await verifier.aclose()
    line = json.loads(ledger.read_text().splitlines()[0])
    assert line["judgeModels"] == judge_models
    assert set(line["panel"][0]["votes"]) == set(MEMBERS)
