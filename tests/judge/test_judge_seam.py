"""The judge seam: a ``BaseJudge`` is warmed up and closed by its verifier; a plain judge (only
an async ``judge`` method, the documented protocol) works as it always did; the litellm judge
closes what it built, and nothing it was handed."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import API_KEY
from replyguard import BaseJudge, JudgeReply, Status, Turn, Verifier, VerifierConfig
from replyguard.context import ContextLimits, JudgePrompt, build_judge_prompt
from replyguard.judge import LiteLLMJudge
from replyguard.judge._answer_cap import AnswerSessions
from replyguard.judge._clients import ClientScope
from replyguard.telemetry import Events
from replyguard.testing import ScriptedAgent
from support.provider_server import ANTHROPIC, ProviderServer, Step

TURN = Turn(user_message="Send the report.")


class PlainJudge:
    """A custom judge as the protocol documents it: one async method, nothing else."""

    def __init__(self) -> None:
        self.calls = 0

    async def judge(self, prompt: JudgePrompt, *, time_left: float) -> JudgeReply:
        self.calls += 1
        return JudgeReply(text="PASS", model="plain")


class HoldingJudge(BaseJudge):
    """A judge that holds something: it says when it is warm, and records its closing."""

    def __init__(self) -> None:
        self.events: list[str] = []

    @property
    def ready(self) -> bool:
        return "warmup" in self.events

    async def warmup(self) -> None:
        self.events.append("warmup")

    async def aclose(self) -> None:
        self.events.append("aclose")

    def close(self) -> None:
        self.events.append("close")

    async def judge(self, prompt: JudgePrompt, *, time_left: float) -> JudgeReply:
        self.events.append("judge")
        return JudgeReply(text="PASS", model="holding")


async def test_a_plain_custom_judge_judges_warms_up_and_closes_as_before(
    make_config: Any,
) -> None:
    judge = PlainJudge()
    verifier = Verifier(make_config(verifyAll=True), judge=judge)
    await verifier.warmup()
    outcome = await verifier.run(ScriptedAgent(["Done: the report."]), TURN)
    await verifier.aclose()
    verifier.close()
    assert (outcome.status, judge.calls) == (Status.PASSED, 1)


async def test_a_base_judge_is_warmed_up_before_its_first_judgement_and_closed_by_aclose(
    make_config: Any,
) -> None:
    judge = HoldingJudge()
    verifier = Verifier(make_config(verifyAll=True), judge=judge)
    outcome = await verifier.run(ScriptedAgent(["Done: the report."]), TURN)
    await verifier.run(ScriptedAgent(["Done: the report."]), TURN)
    await verifier.aclose()
    assert outcome.status == Status.PASSED
    assert judge.events == ["warmup", "judge", "judge", "aclose"]


async def test_a_verifiers_warmup_and_close_reach_its_base_judge(make_config: Any) -> None:
    judge = HoldingJudge()
    verifier = Verifier(make_config(), judge=judge)
    await verifier.warmup()
    verifier.close()
    assert judge.events == ["warmup", "close"]


async def test_each_panel_members_own_judge_is_closed_with_the_verifier(
    make_config: Any,
) -> None:
    members = {"openai/gpt-4o-mini": HoldingJudge(), "gemini/gemini-2.0-flash": HoldingJudge()}

    class PerMember(HoldingJudge):
        def member(self, model: str) -> HoldingJudge:
            return members[model]

    root = PerMember()
    config = make_config(panel={"models": list(members)})
    verifier = Verifier(config, judge=root)
    verdict = await verifier.verify(TURN, "Done: the report.")
    await verifier.aclose()
    assert verdict.passed and len(verdict.members) == 2
    assert root.events == ["aclose"]  # it answers for no member
    assert [m.events for m in members.values()] == [["warmup", "judge", "aclose"]] * 2


def prompt() -> JudgePrompt:
    return build_judge_prompt(TURN, "Done: the report.", limits=ContextLimits())


def loopback(provider: ProviderServer) -> VerifierConfig:
    return VerifierConfig.from_dict(
        {
            "enabled": True,
            "model": ANTHROPIC.judge_model,
            "agentModel": ANTHROPIC.agent_model,
            "apiKey": API_KEY,
            "apiBase": provider.url,
            "timeoutSeconds": 5,
        }
    )


async def test_the_litellm_judge_closes_the_clients_it_built(provider: ProviderServer) -> None:
    provider.respond_with(lambda seen: Step(text="PASS"))
    judge = LiteLLMJudge(loopback(provider), Events())
    reply = await judge.judge(prompt(), time_left=5)
    assert reply.text == "PASS"
    assert provider.connections == 1
    await judge.aclose()
    assert await provider.wait_for_open_connections(0) == 0


async def test_the_litellm_judge_leaves_open_the_clients_it_was_handed(
    provider: ProviderServer,
) -> None:
    provider.respond_with(lambda seen: Step(text="PASS"))
    scope, sessions = ClientScope(Events(), drain_seconds=1), AnswerSessions()
    judge = LiteLLMJudge(loopback(provider), Events(), clients=scope, sessions=sessions)
    await judge.judge(prompt(), time_left=5)
    await judge.aclose()
    assert await provider.wait_for_open_connections(0, within=0.3) == 1  # the caller's to close
    await scope.aclose()
    await sessions.aclose()
    assert await provider.wait_for_open_connections(0) == 0


async def test_a_run_kinds_judge_shares_the_clients_of_the_judge_it_came_from(
    provider: ProviderServer,
) -> None:
    provider.respond_with(lambda seen: Step(text="PASS"))
    config = loopback(provider)
    judge = LiteLLMJudge(config, Events())
    sibling = judge.sibling(config.model_copy(update={"judge_max_tokens": 300}))
    await sibling.judge(prompt(), time_left=5)
    await judge.judge(prompt(), time_left=5)
    assert provider.connections == 1  # one connection, reused
    await sibling.aclose()  # closes nothing: not its own
    assert await provider.wait_for_open_connections(0, within=0.3) == 1
    await judge.aclose()
    assert await provider.wait_for_open_connections(0) == 0


@pytest.mark.parametrize("judge", [PlainJudge(), HoldingJudge()], ids=["plain", "base"])
def test_either_kind_of_judge_satisfies_the_judge_protocol(judge: Any) -> None:
    from replyguard import Judge

    checked: Judge = judge
    assert callable(checked.judge)
