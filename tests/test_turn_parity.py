"""Every way into a verified turn decides alike: the same scripted replies and verdicts, played
through each door (``support.turn_parity``), end as ``Verifier.run`` ends them: status, reason,
delivered text, attempts, the feedback the agent received, cost and tokens.

Where a door differs on purpose, its scenario says why (``Scenario.on_purpose``; the same list
is in docs/turns.md, "Every door decides alike"). The one-shot doors (``verify``, ``eval
--replay``, ``replyguard serve``'s ``/v1/verify``, the Agents SDK guardrail, shadow mode's rule)
have no second attempt: each verdict gets the status ``run`` gives it, ``failed`` where ``run``
would retry.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agents import Agent as AgentsAgent
from agents import OutputGuardrailTripwireTriggered, Runner

from replyguard import Reply, Status, Turn, Verifier
from replyguard._records import EvalRecord
from replyguard.adapters._shared import acts_on
from replyguard.adapters.openai_agents import judge_output_guardrail
from replyguard.evaluation import judge_records
from replyguard.runner._judgement import judge_one
from support.turn_parity import (
    ASK,
    DOORS,
    TOOL,
    AgentsModel,
    Purpose,
    Say,
    Scenario,
    cases,
    config_of,
    via_run,
)

FAIL = "FAIL [incomplete]: Add the report's date."
FAIL_AGAIN = "FAIL [incomplete]:  add the REPORT'S date. "
FAIL_OTHER = "FAIL [incomplete]: Name the report's owner."
A, B, C = Say("Done: the report."), Say("Done: the report, dated."), Say("Done: report v3.")
OOPS = RuntimeError("model down")
OWN_TIMEOUT = TimeoutError("the agent's HTTP client timed out")
"""The agent's own timeout: its failure (``agent_error``), not the verifier's latency budget."""

VALIDATOR_NO_ERROR = Purpose(
    frozenset({"response", "attempts"}),
    "pydantic-ai raises the model's error out of the run: an output validator never sees it "
    "(VerifiedAgent delivers the previous reply)",
)
NO_AGENT_COST = (
    "the framework reports no agent cost per reply, so maxCostUsd counts the judge alone "
    "and the turn goes on where run stops"
)
DECIDED = frozenset({"status", "reason", "response", "attempts", "feedback", "judge_tokens"})
NO_FINISH_REASON = Purpose(
    frozenset({"reason", "response"}),
    "an Agents SDK run result carries no finish reason: an error report reads as an answer "
    "and is judged",
)
CUT_SHORT = Purpose(
    frozenset({"agent_tokens"}),
    "a stream an incremental check cut short never reaches its usage report (the RunMeta "
    "after its text): its tokens are not counted",
)
CUTS = {"stream_buffer": CUT_SHORT, "stream_release": CUT_SHORT, "serve_stream": CUT_SHORT}


SCENARIOS = [
    Scenario("pass_first", (A,), ("PASS",)),
    Scenario("fail_then_pass", (A, B), (FAIL, "PASS")),
    Scenario("exhausted", (A, B), (FAIL, FAIL_OTHER), {"maxAttempts": 2}),
    Scenario(
        "exhausted_deliver_first",
        (A, B),
        (FAIL, FAIL_OTHER),
        {"maxAttempts": 2, "deliver": "first"},
    ),
    Scenario(
        "exhausted_operator_message",
        (A, B),
        (FAIL, FAIL_OTHER),
        {"maxAttempts": 2, "onExhausted": {"incomplete": "A colleague will follow up."}},
    ),
    Scenario(
        "stagnant_operator_message",
        (A, B),
        (FAIL, FAIL_AGAIN),
        {"onExhausted": {"*": "A colleague will follow up."}},
    ),
    Scenario(
        "exhausted_other_category_delivers",
        (A, B),
        (FAIL, FAIL_OTHER),
        {"maxAttempts": 2, "onExhausted": {"grounding": "A colleague will follow up."}},
    ),
    Scenario("stagnant_feedback_in_other_case", (A, B), (FAIL, FAIL_AGAIN)),
    Scenario("stagnant_reply_in_other_case", (A, Say("  DONE: the   report. ")), (FAIL,)),
    Scenario(
        "deciding_check_repeats_on_a_changed_reply",
        (Say("Done: a long report."), Say("Done: a longer report."), Say("Done.")),
        ("PASS",),
        {"checks": [{"type": "rules", "maxLength": 12}]},
        on_purpose=CUTS,
    ),
    Scenario(
        "deciding_check_repeats_on_the_same_reply",
        (Say("Done: a long report."), Say("Done: a long report.")),
        (),
        {"checks": [{"type": "rules", "maxLength": 12}]},
        on_purpose=CUTS,
    ),
    Scenario(
        "best_attempt_by_the_checks",
        (Say("Done: short."), Say("Done: a long report.")),
        (FAIL,),
        {"checks": [{"type": "rules", "maxLength": 12}], "maxAttempts": 2, "deliver": "best"},
    ),
    Scenario("cost_budget", (A, B), (FAIL, "PASS"), {"maxCostUsd": 0.015}),
    Scenario(
        "cost_budget_counts_the_agents_retries",
        (A, Say(B.text, cost=0.01), C),
        (FAIL, FAIL_OTHER, "PASS"),
        {"maxCostUsd": 0.035},
        on_purpose={
            "langchain_middleware": Purpose(DECIDED | {"agent_tokens"}, NO_AGENT_COST),
            "pydantic_validator": Purpose(
                frozenset({"response", "attempts", "feedback"}), NO_AGENT_COST
            ),
            "pydantic_verified_agent": Purpose(DECIDED, NO_AGENT_COST),
            "agents_verified_runner": Purpose(DECIDED | {"agent_tokens"}, NO_AGENT_COST),
        },
    ),
    Scenario("judge_error", (A,), (RuntimeError("judge down"),)),
    Scenario("unreadable_verdict", (A,), ("I am not sure.",)),
    Scenario("awaiting_user", (Say("Which week do you mean?"),), ("PASS [awaiting_user]",)),
    Scenario("blank_retry", (A, Say(" \n ")), (FAIL,)),
    Scenario(
        "error_report_retry",
        (A, Say("Sorry, an error occurred.", error=True)),
        (FAIL,),
        on_purpose={"agents_verified_runner": NO_FINISH_REASON},
    ),
    Scenario(
        "agent_error_on_retry",
        (A, OOPS),
        (FAIL,),
        on_purpose={"pydantic_validator": VALIDATOR_NO_ERROR},
    ),
    Scenario(
        "agent_timeout_on_retry",
        (A, OWN_TIMEOUT),
        (FAIL,),
        on_purpose={"pydantic_validator": VALIDATOR_NO_ERROR},
    ),
    Scenario(
        "agent_timeout_on_retry_within_max_latency",
        (A, OWN_TIMEOUT),
        (FAIL,),
        {"maxLatencyMs": 600_000},
        on_purpose={"pydantic_validator": VALIDATOR_NO_ERROR},
    ),
    Scenario("shadow", (A,), (FAIL,), {"mode": "shadow"}),
    Scenario(
        "side_effects_deliver", (Say(A.text, tool=True),), (FAIL,), {"onSideEffects": "deliver"}
    ),
    Scenario("side_effects_notice", (Say(A.text, tool=True), B), (FAIL, "PASS")),
    Scenario("disabled", (A,), (), {"enabled": False}),
    Scenario("skipped_blank_first_reply", (Say("  "),), ()),
    Scenario(
        "json_repair_delivered",
        (Say('{"report": "done",}'),),
        ("PASS",),
        {"checks": [{"type": "json", "deliverRepaired": True}]},
    ),
    Scenario("one_attempt_only", (A,), (FAIL,), {"maxAttempts": 1}),
]


@pytest.mark.parametrize(
    ("scenario", "door"),
    list(cases(SCENARIOS)),
    ids=[f"{s.name}-{d}" for s, d in cases(SCENARIOS)],
)
async def test_every_door_decides_as_run(scenario: Scenario, door: str) -> None:
    expected = await via_run(scenario)
    seen = await DOORS[door](scenario)
    differing = {line.split(":", 1)[0] for line in seen.differences(expected)}
    purpose = scenario.on_purpose.get(door)
    meant = purpose.fields if purpose is not None else frozenset()
    assert differing == meant, f"{door} on {scenario.name}: {seen.differences(expected)}"


# -- the one-shot doors ----------------------------------------------------------------------------

ONE_SHOT = [
    Scenario("pass", (A,), ("PASS",)),
    Scenario("fail", (A,), (FAIL,)),
    Scenario("awaiting_user", (A,), ("PASS [awaiting_user]",)),
    Scenario("unreadable", (A,), ("hmm",)),
    Scenario("judge_error", (A,), (RuntimeError("judge down"),)),
    Scenario("shadow_fail", (A,), (FAIL,), {"mode": "shadow"}),
    Scenario(
        "side_effects_deliver", (Say(A.text, tool=True),), (FAIL,), {"onSideEffects": "deliver"}
    ),
    Scenario("side_effects_notice", (Say(A.text, tool=True),), (FAIL,)),
    Scenario(
        "deciding_check",
        (Say("Done: a long report."),),
        (),
        {"checks": [{"type": "rules", "maxLength": 12}]},
        on_purpose=CUTS,
    ),
]


def _one_shot_status(status: str) -> str:
    """``run``'s status of a one-attempt turn, as a one-shot door names it."""
    return "failed" if status == Status.EXHAUSTED else status


@pytest.mark.parametrize("scenario", ONE_SHOT, ids=[s.name for s in ONE_SHOT])
async def test_verify_and_eval_replay_give_each_verdict_runs_status(
    scenario: Scenario, tmp_path: Path
) -> None:
    one = Scenario(
        scenario.name, scenario.replies, scenario.verdicts, {**scenario.config, "maxAttempts": 1}
    )
    expected = await via_run(one)
    assert expected.status is not None
    reply = one.replies[0]
    assert isinstance(reply, Say)
    verifier = Verifier(config_of(one), judge=one.judge())
    judgement = await judge_one(verifier, Turn(user_message=ASK), reply.reply())
    assert (judgement.status, judgement.reason) == (
        _one_shot_status(expected.status),
        expected.reason or None,
    )
    if one.verdicts and isinstance(one.verdicts[0], str):
        meta: dict[str, Any] = {"stopReason": "stop"}
        if reply.tool:
            meta["toolCalls"] = [{"name": TOOL, "arguments": {}}]
        line = {"userMessage": ASK, "reply": {"text": reply.text, "meta": meta}}
        record = EvalRecord.model_validate_json(
            json.dumps({**line, "judgeOutput": one.verdicts[0]})
        )
        [result] = await judge_records(
            [(1, record)], config_of(one), replay=True, concurrency=1, progress=lambda d, t: None
        )
        assert result.judgement.status == judgement.status
    assert await _via_serve_verify(one, reply) == (judgement.status, judgement.reason)


async def _via_serve_verify(scenario: Scenario, reply: Say) -> tuple[str, str | None]:
    """``replyguard serve``'s ``POST /v1/verify`` on the same turn: its status and reason."""
    import httpx

    from replyguard.serve._app import Served, build_app

    served = Served.from_config(config_of(scenario), judge=scenario.judge())
    meta: dict[str, Any] = {"stopReason": "stop"}
    if reply.tool:
        meta["toolCalls"] = [{"name": TOOL, "arguments": {"to": "team"}}]
    body = {"turn": {"userMessage": ASK}, "reply": {"text": reply.text, "meta": meta}}
    transport = httpx.ASGITransport(app=build_app(served))
    async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
        answer = (await client.post("/v1/verify", json=body)).json()
    await served.verifier.aclose()
    return answer["status"], answer["reason"]


async def test_the_judge_of_a_one_shot_door_sees_the_side_effect_marks_run_shows() -> None:
    reply = Say(A.text, tool=True).reply()
    scenario = Scenario("marks", (Say(A.text, tool=True),), ("PASS",))
    via_verify, via_run_judge = scenario.judge(), scenario.judge()
    await Verifier(config_of(scenario), judge=via_verify).verify(Turn(user_message=ASK), reply)
    agent_reply = reply

    async def agent(messages: list[dict[str, Any]]) -> Reply:
        return agent_reply

    await Verifier(config_of(scenario), judge=via_run_judge).run(agent, Turn(user_message=ASK))
    mark = "a side effect that already happened"
    assert mark in via_verify.calls[0].user and mark in via_run_judge.calls[0].user


@pytest.mark.parametrize(
    ("mode", "on_side_effects", "acted"),
    [("enforce", "notice", False), ("shadow", "notice", False), ("enforce", "deliver", True)],
)
async def test_a_guardrail_acts_on_a_fail_exactly_when_run_would_retry(
    mode: str, on_side_effects: str, acted: bool
) -> None:
    settings = {"mode": mode, "onSideEffects": on_side_effects}
    scenario = Scenario("guard", (Say(A.text, tool=acted), B), (FAIL, "PASS"), settings)
    verifier = Verifier(config_of(scenario), judge=scenario.judge())
    assessed = await verifier._assess(Turn(user_message=ASK), Say(A.text, tool=acted).reply())
    expected = await via_run(scenario)
    assert acts_on(verifier, Turn(user_message=ASK), assessed) == (expected.attempts == 2)


@pytest.mark.parametrize("mode", ["enforce", "shadow"])
async def test_the_agents_sdk_guardrail_trips_exactly_when_run_would_retry(mode: str) -> None:
    scenario = Scenario("guard", (A, B), (FAIL, "PASS"), {"mode": mode})
    expected = await via_run(scenario)
    verifier = Verifier(config_of(scenario), judge=scenario.judge())
    guarded: AgentsAgent[Any] = AgentsAgent(
        name="reporter",
        model=AgentsModel(scenario),
        output_guardrails=[judge_output_guardrail(verifier)],
    )
    try:
        await Runner.run(guarded, ASK)
        tripped = False
    except OutputGuardrailTripwireTriggered:
        tripped = True
    assert tripped == (expected.attempts == 2)
