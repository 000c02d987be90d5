"""One scripted turn played through every way into a verified turn, and what each showed.

A ``Scenario`` scripts the agent's replies (``Say``, or an exception the agent raises) and the
judge's answers. Each door plays it with the real framework and its own test model
(langchain-core's fake chat model in a real ``create_agent`` graph, pydantic-ai's
``FunctionModel``) or the shipped fakes, and reports a ``Seen``: status, reason, delivered
text, attempts, the feedback the agent received, cost and tokens. A field a door cannot show
(an output validator has no ``Outcome``) is None and is not compared.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agents import Agent as AgentsAgent
from agents import Model, function_tool, set_tracing_disabled
from agents.items import ModelResponse as AgentsResponse
from agents.usage import Usage as AgentsUsage
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from pydantic import Field
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from replyguard import JudgeReply, Outcome, Reply, RunMeta, ToolCallRecord, Turn, Verifier
from replyguard.adapters.langchain_agents import FEEDBACK_ID_PREFIX, ReplyguardMiddleware
from replyguard.adapters.openai_agents import VerifiedRunner
from replyguard.adapters.pydantic_ai import VerifiedAgent, judge_output_validator
from replyguard.config import VerifierConfig
from replyguard.testing import ScriptedAgent, ScriptedJudge, ScriptedStreamAgent

set_tracing_disabled(True)  # the Agents SDK's traces would go to OpenAI

ASK = "Write the weekly report."
TOOL = "send_email"
JUDGE_COST = 0.01
JUDGE_TOKENS = (100, 10)
AGENT_TOKENS = (20, 5)


@dataclass(frozen=True)
class Say:
    """One reply of the agent."""

    text: str
    cost: float | None = None
    """What the agent reports it spent (only a door whose agent returns a ``Reply`` can)."""
    error: bool = False
    """An error report (finish reason ``error``) rather than an answer."""
    tool: bool = False
    """The reply follows a successful call of ``send_email``."""

    def reply(self) -> Reply:
        calls = (ToolCallRecord(name=TOOL, arguments={"to": "team"}),) if self.tool else ()
        usage = {"prompt_tokens": AGENT_TOKENS[0], "completion_tokens": AGENT_TOKENS[1]}
        meta = RunMeta(
            stop_reason="error" if self.error else "stop",
            tool_calls=calls,
            usage=usage,
            cost_usd=self.cost,
        )
        return Reply(text=self.text, meta=meta)


Step = Say | BaseException


@dataclass(frozen=True)
class Purpose:
    """A door's difference from ``run`` that is meant: the fields that differ, and why."""

    fields: frozenset[str]
    why: str


@dataclass(frozen=True)
class Scenario:
    """A turn scripted for every door."""

    name: str
    replies: tuple[Step, ...]
    verdicts: tuple[str | BaseException, ...]
    config: dict[str, Any] = field(default_factory=dict)
    on_purpose: dict[str, Purpose] = field(default_factory=dict)
    """Doors that differ from ``run`` on purpose: in which fields, and why."""

    def judge(self) -> ScriptedJudge:
        return ScriptedJudge([_judged(v) for v in self.verdicts])


def _judged(answer: str | BaseException) -> str | JudgeReply | BaseException:
    if isinstance(answer, BaseException):
        return answer
    prompt, completion = JUDGE_TOKENS
    return JudgeReply(
        text=answer,
        model="scripted-judge",
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost_usd=JUDGE_COST,
    )


@dataclass(frozen=True)
class Seen:
    """What one door showed of the turn (None: the door cannot show it)."""

    status: str | None
    reason: str | None
    """The reason, "" for none."""
    response: str | None
    attempts: int | None
    feedback: tuple[str, ...] | None
    cost_usd: float | None
    judge_tokens: int | None
    agent_tokens: int | None
    awaiting_user: bool | None = None
    wrapped: bool = False
    """The framework wraps each feedback in words of its own (pydantic-ai's retry prompt):
    each of ``run``'s feedback must be inside the matching one."""

    def differences(self, other: Seen) -> list[str]:
        """The fields both doors show and that differ, each as ``name: theirs != mine``."""
        out: list[str] = []
        for name in Seen.__dataclass_fields__:
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine is None or theirs is None or name == "wrapped":
                continue
            if name == "feedback" and self.wrapped:
                inside = len(mine) == len(theirs) and all(
                    t in m for m, t in zip(mine, theirs, strict=True)
                )
                if not inside:
                    out.append(f"feedback: {theirs!r} not inside {mine!r}")
                continue
            if isinstance(mine, float) and isinstance(theirs, float):
                if abs(mine - theirs) > 1e-9:
                    out.append(f"{name}: {theirs!r} != {mine!r}")
            elif mine != theirs:
                out.append(f"{name}: {theirs!r} != {mine!r}")
        return out


def seen_outcome(outcome: Outcome | dict[str, Any], feedback: Sequence[str]) -> Seen:
    """A ``Seen`` from an ``Outcome`` (or its JSON)."""
    if isinstance(outcome, dict):
        outcome = Outcome.model_validate(outcome)
    usage = getattr(outcome, "usage", None)  # None: a replyguard before Outcome.usage
    return Seen(
        status=outcome.status.value,
        reason=outcome.reason.value if outcome.reason is not None else "",
        response=outcome.response,
        attempts=len(outcome.attempts),
        feedback=tuple(feedback),
        cost_usd=round(outcome.cost_usd, 9),
        judge_tokens=usage.judge_tokens if usage is not None else None,
        agent_tokens=usage.agent_tokens if usage is not None else None,
        awaiting_user=outcome.awaiting_user,
    )


def config_of(scenario: Scenario, **more: Any) -> VerifierConfig:
    data: dict[str, Any] = {
        "enabled": True,
        "model": "anthropic/claude-sonnet-4-5",
        "agentModel": "openai/gpt-4o",
        "verifyAll": True,
        "maxAttempts": 3,
        "sideEffectTools": [TOOL],
    }
    data.update(scenario.config)
    data.update(more)
    return VerifierConfig.from_dict(data)


def _last_user(messages: Sequence[dict[str, Any]]) -> str:
    return str(messages[-1]["content"])


# -- the doors built on ``run`` and ``stream`` ----------------------------------------------------


async def via_run(scenario: Scenario) -> Seen:
    agent = ScriptedAgent([s.reply() if isinstance(s, Say) else s for s in scenario.replies])
    verifier = Verifier(config_of(scenario), judge=scenario.judge())
    outcome = await verifier.run(agent, Turn(user_message=ASK))
    return seen_outcome(outcome, [_last_user(call) for call in agent.calls[1:]])


async def via_run_sync(scenario: Scenario) -> Seen:
    agent = ScriptedAgent([s.reply() if isinstance(s, Say) else s for s in scenario.replies])
    verifier = Verifier(config_of(scenario), judge=scenario.judge())
    outcome = await asyncio.to_thread(verifier.run_sync, agent, Turn(user_message=ASK))
    verifier.close()
    return seen_outcome(outcome, [_last_user(call) for call in agent.calls[1:]])


def _stream_script(scenario: Scenario) -> list[Sequence[Any] | BaseException]:
    script: list[Sequence[Any] | BaseException] = []
    for step in scenario.replies:
        if isinstance(step, BaseException):
            script.append(step)
        else:
            reply = step.reply()
            script.append([reply.text, reply.meta] if reply.text else [reply.meta])
    return script


async def _via_stream(scenario: Scenario, mode: str) -> Seen:
    agent = ScriptedStreamAgent(_stream_script(scenario))
    config = config_of(scenario, streaming={"mode": mode, "holdBackChars": 4})
    verifier = Verifier(config, judge=scenario.judge())
    outcome = None
    async for event in verifier.stream(agent, Turn(user_message=ASK)):
        outcome = getattr(event, "outcome", outcome)
    assert outcome is not None
    return seen_outcome(outcome, [_last_user(call) for call in agent.calls[1:]])


async def via_stream_buffer(scenario: Scenario) -> Seen:
    return await _via_stream(scenario, "buffer")


async def via_stream_release(scenario: Scenario) -> Seen:
    return await _via_stream(scenario, "release")


# -- LangChain: the agent middleware in a real create_agent graph ---------------------------------


class ScriptModel(GenericFakeChatModel):
    """langchain-core's fake chat model, accepting tools, raising scripted exceptions."""

    script: list[Any] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        entry = self.script.pop(0)
        if isinstance(entry, BaseException):
            raise entry
        self.messages = iter([entry])
        return super()._generate(messages, *args, **kwargs)


@tool
def send_email(to: str) -> str:
    """Send the report."""
    return "sent"


def _langchain_script(scenario: Scenario) -> list[Any]:
    prompt, completion = AGENT_TOKENS
    usage = {
        "input_tokens": prompt,
        "output_tokens": completion,
        "total_tokens": prompt + completion,
    }
    script: list[Any] = []
    for step in scenario.replies:
        if isinstance(step, BaseException):
            script.append(step)
            continue
        if step.tool:
            call = {"name": TOOL, "args": {"to": "team"}, "id": "call-1", "type": "tool_call"}
            script.append(AIMessage("", tool_calls=[call]))
        metadata = {"finish_reason": "error" if step.error else "stop"}
        script.append(AIMessage(step.text, usage_metadata=usage, response_metadata=metadata))  # type: ignore[arg-type]
    return script


async def via_langchain_middleware(scenario: Scenario) -> Seen:
    model = ScriptModel(messages=iter([]), script=_langchain_script(scenario))
    verifier = Verifier(config_of(scenario), judge=scenario.judge())
    agent = create_agent(model, tools=[send_email], middleware=[ReplyguardMiddleware(verifier)])
    state = await agent.ainvoke({"messages": [HumanMessage(ASK)]})
    messages = state["messages"]
    feedback = [str(m.text) for m in messages if str(m.id or "").startswith(FEEDBACK_ID_PREFIX)]
    seen = seen_outcome(messages[-1].response_metadata["replyguard"], feedback)
    # A tool-calling model step counts no tokens of its own here; its reply's do.
    return replace(seen, response=str(messages[-1].text), cost_usd=None)


# -- pydantic-ai: the output validator and VerifiedAgent, on a FunctionModel ----------------------


class _Model:
    """A FunctionModel body answering from the scenario's replies."""

    def __init__(self, scenario: Scenario) -> None:
        self.steps = list(scenario.replies)
        self.calls: list[list[ModelMessage]] = []
        self.__name__ = "scripted"

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls.append(list(messages))
        if _after_tool(messages):
            return self._answer(self.steps.pop(0), after_tool=True)
        step = self.steps[0]
        if isinstance(step, Say) and step.tool:
            return ModelResponse(parts=[ToolCallPart(TOOL, {"to": "team"}, tool_call_id="call-1")])
        return self._answer(self.steps.pop(0), after_tool=False)

    def _answer(self, step: Step, *, after_tool: bool) -> ModelResponse:
        if isinstance(step, BaseException):
            raise step
        usage = RequestUsage(input_tokens=AGENT_TOKENS[0], output_tokens=AGENT_TOKENS[1])
        finish = "error" if step.error else "stop"
        return ModelResponse(parts=[TextPart(step.text)], usage=usage, finish_reason=finish)


def _pydantic_agent(model: _Model, scenario: Scenario) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(
        FunctionModel(model), retries=config_of(scenario).max_attempts - 1
    )

    @agent.tool_plain
    def send_email(to: str) -> str:
        """Send the report."""
        return "sent"

    return agent


async def via_pydantic_validator(scenario: Scenario) -> Seen:
    verifier = Verifier(config_of(scenario), judge=scenario.judge())
    model = _Model(scenario)
    agent = _pydantic_agent(model, scenario)
    agent.output_validator(judge_output_validator(verifier))
    try:
        output = (await agent.run(ASK)).output
    except Exception as exc:  # the run ended in the model's error
        output = f"<raised {type(exc).__name__}>"
    requests = [m for m in (model.calls[-1] if model.calls else []) if isinstance(m, ModelRequest)]
    feedback = [
        str(part.content)
        for request in requests[1:]
        for part in request.parts
        if isinstance(part, RetryPromptPart | UserPromptPart)
    ]
    attempts = sum(1 for call in model.calls if not _after_tool(call))
    return Seen(None, None, output, attempts, tuple(feedback), None, None, None, wrapped=True)


def _after_tool(messages: Sequence[ModelMessage]) -> bool:
    last = messages[-1]
    return isinstance(last, ModelRequest) and any(p.part_kind == "tool-return" for p in last.parts)


async def via_pydantic_verified_agent(scenario: Scenario) -> Seen:
    verifier = Verifier(config_of(scenario), judge=scenario.judge())
    model = _Model(scenario)
    result = await VerifiedAgent(_pydantic_agent(model, scenario), verifier).run(ASK)
    requests = [m for m in (model.calls[-1] if model.calls else []) if isinstance(m, ModelRequest)]
    prompts = [
        str(part.content)
        for request in requests
        for part in request.parts
        if isinstance(part, UserPromptPart)
    ]
    seen = seen_outcome(result.outcome, prompts[1:])
    # pydantic-ai reports the run's usage of every request (tool steps too).
    return replace(seen, agent_tokens=None)


# -- the OpenAI Agents SDK: VerifiedRunner, on a scripted Model --------------------------------


class AgentsModel(Model):
    """An Agents SDK model answering from the scenario's replies."""

    def __init__(self, scenario: Scenario) -> None:
        self.steps = list(scenario.replies)
        self.inputs: list[Any] = []

    async def get_response(
        self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
    ) -> AgentsResponse:
        items = list(input) if isinstance(input, list) else []
        self.inputs.append(items)
        after_tool = bool(items) and items[-1].get("type") == "function_call_output"
        step = self.steps[0]
        if not after_tool and isinstance(step, Say) and step.tool:
            call = ResponseFunctionToolCall(
                arguments='{"to": "team"}', call_id="call-1", name=TOOL, type="function_call"
            )
            return AgentsResponse(output=[call], usage=AgentsUsage(), response_id=None)
        step = self.steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        text = ResponseOutputText(annotations=[], text=step.text, type="output_text")
        message = ResponseOutputMessage(
            id="msg-1", content=[text], role="assistant", status="completed", type="message"
        )
        prompt, completion = AGENT_TOKENS
        usage = AgentsUsage(
            requests=1,
            input_tokens=prompt,
            output_tokens=completion,
            total_tokens=prompt + completion,
        )
        return AgentsResponse(output=[message], usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def via_agents_verified_runner(scenario: Scenario) -> Seen:
    verifier = Verifier(config_of(scenario), judge=scenario.judge())
    model = AgentsModel(scenario)

    @function_tool
    def send_email(to: str) -> str:
        """Send the report."""
        return "sent"

    agent: AgentsAgent[Any] = AgentsAgent(name="reporter", model=model, tools=[send_email])
    result = await VerifiedRunner(verifier).run(agent, ASK)
    asked = [
        str(item["content"])
        for item in (model.inputs[-1] if model.inputs else [])
        if isinstance(item, dict) and item.get("role") == "user"
    ]
    return seen_outcome(result.outcome, asked[1:])


# -- replyguard serve: the OpenAI wire, through the ASGI app, on a scripted upstream ------------


class ScriptedUpstream:
    """An ``Upstream`` answering from the scenario's replies in the OpenAI wire; each request's
    messages kept. A reply that follows a tool call is asked for by a client whose messages end
    with the assistant's ``send_email`` call and its result (an agent loop's turn)."""

    def __init__(self, scenario: Scenario) -> None:
        self.steps = list(scenario.replies)
        self.requests: list[dict[str, Any]] = []
        self.last_cost: float | None = None

    def _next(self, request: dict[str, Any]) -> Say:
        self.requests.append(request)
        step = self.steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        self.last_cost = step.cost
        return step

    def price(self, model: str, usage: dict[str, Any] | None) -> float | None:
        return self.last_cost

    async def complete(self, request: dict[str, Any]) -> tuple[dict[str, Any], float | None]:
        step = self._next(request)
        prompt, completion = AGENT_TOKENS
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": step.text},
            "finish_reason": "error" if step.error else "stop",
        }
        usage = {"prompt_tokens": prompt, "completion_tokens": completion}
        usage["total_tokens"] = prompt + completion
        return {
            "id": "chatcmpl-1",
            "model": "gpt-4o",
            "choices": [choice],
            "usage": usage,
        }, step.cost

    async def stream(self, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        response, _ = await self.complete(request)
        choice = response["choices"][0]
        delta = {"role": "assistant", "content": choice["message"]["content"]}
        yield {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        yield {"choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}
        yield {"choices": [], "usage": response["usage"]}


def _serve_messages(scenario: Scenario) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
    first = scenario.replies[0] if scenario.replies else None
    if isinstance(first, Say) and first.tool:
        call = {"id": "call-1", "type": "function"}
        call["function"] = {"name": TOOL, "arguments": '{"to": "team"}'}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": "call-1", "content": "sent"})
    return messages


def _sse_answer(text: str) -> dict[str, Any]:
    """The chunks of a streamed answer folded back into one answer."""
    content, guard, usage = "", None, None
    for line in text.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line.removeprefix("data: "))
        for choice in chunk["choices"]:
            content += choice["delta"].get("content") or ""
        guard = chunk.get("replyguard", guard)
        usage = chunk.get("usage", usage)
    message = {"content": content}
    return {"choices": [{"message": message}], "replyguard": guard, "usage": usage}


async def _via_serve(scenario: Scenario, *, stream: bool) -> Seen:
    import httpx

    from replyguard.serve._app import Served, build_app

    upstream = ScriptedUpstream(scenario)
    served = Served.from_config(config_of(scenario), judge=scenario.judge(), upstream=upstream)
    body: dict[str, Any] = {"model": "gpt-4o", "messages": _serve_messages(scenario)}
    if stream:
        body.update(stream=True, stream_options={"include_usage": True})
    transport = httpx.ASGITransport(app=build_app(served))
    async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
        response = await client.post("/v1/chat/completions", json=body)
    await served.verifier.aclose()
    answer = _sse_answer(response.text) if stream else response.json()
    guard = answer["replyguard"]
    sent = [r["messages"] for r in upstream.requests]
    return Seen(
        status=guard["status"],
        reason=guard["reason"] or "",
        response=answer["choices"][0]["message"]["content"],
        attempts=guard["attempts"],
        feedback=tuple(str(m[-1]["content"]) for m in sent[1:]),
        cost_usd=None,  # the answer shows the agent's usage, not replyguard's spend
        judge_tokens=None,
        agent_tokens=(answer["usage"] or {}).get("total_tokens", 0),
    )


async def via_serve(scenario: Scenario) -> Seen:
    return await _via_serve(scenario, stream=False)


async def via_serve_stream(scenario: Scenario) -> Seen:
    return await _via_serve(scenario, stream=True)


Door = Callable[[Scenario], Awaitable[Seen]]

DOORS: dict[str, Door] = {
    "run_sync": via_run_sync,
    "stream_buffer": via_stream_buffer,
    "stream_release": via_stream_release,
    "langchain_middleware": via_langchain_middleware,
    "pydantic_validator": via_pydantic_validator,
    "pydantic_verified_agent": via_pydantic_verified_agent,
    "agents_verified_runner": via_agents_verified_runner,
    "serve": via_serve,
    "serve_stream": via_serve_stream,
}
"""Every door played against ``run`` (``via_run``)."""


def cases(scenarios: Sequence[Scenario]) -> Iterator[tuple[Scenario, str]]:
    for scenario in scenarios:
        for door in DOORS:
            yield scenario, door
