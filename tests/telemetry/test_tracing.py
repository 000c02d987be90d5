"""OpenTelemetry spans per turn, attempt, check and judge call, read back from the SDK's
``InMemorySpanExporter``: the tree's shape, the GenAI attributes of a real litellm response
through the loopback provider, redacted error spans, no content without ``logContent``, and
nothing at all when tracing is off.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from conftest import API_KEY
from replyguard import Status, Turn, Verifier, VerifierConfig
from replyguard.runner._preload import wait_for_preload
from replyguard.telemetry._tracing import provider_name, server_attributes
from replyguard.testing import ScriptedAgent, ScriptedJudge
from replyguard.types import CheckResult
from support.provider_server import ANTHROPIC, ProviderServer, Step

MakeConfig = Callable[..., VerifierConfig]
USER_MESSAGE = "Summarise the confidential merger memo."
FIRST = "Done: the memo is about Project Heron."
SECOND = "Done: the memo is about Project Heron, signed on 3 May."
FEEDBACK = "Say when the merger was signed."
FAIL_ANSWER = f"No date.\nFAIL [incomplete]: {FEEDBACK}"
TURN = Turn(user_message=USER_MESSAGE, id="turn-7")


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider_of(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield tracer_provider
    tracer_provider.shutdown()


def through(make_config: MakeConfig, provider: ProviderServer, **keys: Any) -> VerifierConfig:
    """A config judging every reply with an Anthropic judge played by the loopback server."""
    return make_config(
        verifyAll=True,
        model=ANTHROPIC.judge_model,
        agentModel=ANTHROPIC.agent_model,
        apiKey=API_KEY,
        apiBase=provider.url,
        **keys,
    )


def by_name(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def parent_of(span: ReadableSpan, spans: tuple[ReadableSpan, ...]) -> ReadableSpan | None:
    if span.parent is None:
        return None
    return next(s for s in spans if s.context.span_id == span.parent.span_id)


def every_text(spans: tuple[ReadableSpan, ...]) -> str:
    """Every attribute, event and status text of every span, as one string to search."""
    parts: list[str] = []
    for span in spans:
        parts += [span.name, json.dumps(dict(span.attributes or {}), default=str)]
        parts += [span.status.description or ""]
        for event in span.events:
            parts += [event.name, json.dumps(dict(event.attributes or {}), default=str)]
    return "\n".join(parts)


async def test_a_retried_turn_makes_a_turn_span_with_attempts_and_their_checks(
    make_config: MakeConfig, provider_of: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    config = make_config(verifyAll=True, checks=[{"type": "rules", "maxLength": 500}])
    verifier = Verifier(
        config, judge=ScriptedJudge([FAIL_ANSWER, "PASS"]), tracer_provider=provider_of
    )
    outcome = await verifier.run(ScriptedAgent([FIRST, SECOND]), TURN)
    assert outcome.status == Status.PASSED
    spans = exporter.get_finished_spans()
    [turn] = by_name(spans, "replyguard.turn")
    attempts = by_name(spans, "replyguard.attempt")
    checks = by_name(spans, "replyguard.check")
    assert turn.parent is None
    assert [parent_of(a, spans) for a in attempts] == [turn, turn]
    assert [parent_of(c, spans) for c in checks] == attempts  # across the checks' own tasks
    assert [(a.attributes or {}).get("replyguard.attempt") for a in attempts] == [1, 2]
    first, second = (dict(a.attributes or {}) for a in attempts)
    assert (first["replyguard.verdict"], first["replyguard.category"]) == ("FAIL", "incomplete")
    assert second["replyguard.verdict"] == "PASS" and "replyguard.category" not in second
    assert {c.name for c in checks} == {"replyguard.check rules"}
    assert all((c.attributes or {})["replyguard.check.passed"] is True for c in checks)
    attributes = dict(turn.attributes or {})
    assert attributes["replyguard.status"] == "passed"
    assert (attributes["replyguard.attempts"], attributes["replyguard.turn_id"]) == (2, "turn-7")
    assert "replyguard.reason" not in attributes


async def test_a_failed_check_is_recorded_on_its_span(
    make_config: MakeConfig, provider_of: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    config = make_config(verifyAll=True, maxAttempts=1, checks=[{"type": "rules", "maxLength": 5}])
    verifier = Verifier(config, judge=ScriptedJudge([]), tracer_provider=provider_of)
    outcome = await verifier.run(ScriptedAgent([FIRST]), TURN)
    assert outcome.status == Status.EXHAUSTED
    [check] = by_name(exporter.get_finished_spans(), "replyguard.check")
    attributes = dict(check.attributes or {})
    assert (attributes["replyguard.check.name"], attributes["replyguard.check.passed"]) == (
        "rules",
        False,
    )
    assert attributes["replyguard.check.category"] == "rule_violation"


async def test_a_crashed_check_is_an_error_on_its_span_without_the_secret(
    make_config: MakeConfig, provider_of: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    def broken(turn: Turn, reply: Any) -> CheckResult:
        raise RuntimeError(f"cannot reach the store with {API_KEY}")

    config = make_config(verifyAll=True, apiKey=API_KEY)
    verifier = Verifier(
        config, judge=ScriptedJudge(["PASS"]), checks=[broken], tracer_provider=provider_of
    )
    outcome = await verifier.run(ScriptedAgent([FIRST]), TURN)
    assert outcome.status == Status.PASSED  # an ordinary check's crash is ignored
    [check] = by_name(exporter.get_finished_spans(), "replyguard.check broken")
    assert check.status.status_code == StatusCode.ERROR
    assert (check.attributes or {})["error.type"] == "check_error"
    assert "RuntimeError" in (check.status.description or "")
    assert API_KEY not in every_text((check,))


async def test_the_judge_call_carries_genai_attributes_of_the_real_response(
    make_config: MakeConfig,
    provider: ProviderServer,
    provider_of: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    provider.push(Step(text="PASS", prompt_tokens=900, completion_tokens=12))
    config = through(make_config, provider)
    verifier = Verifier(config, tracer_provider=provider_of)
    outcome = await verifier.run(ScriptedAgent([FIRST]), TURN)
    await verifier.aclose()
    assert outcome.status == Status.PASSED
    spans = exporter.get_finished_spans()
    [chat] = by_name(spans, "chat ")
    [attempt] = by_name(spans, "replyguard.attempt")
    assert chat.name == "chat anthropic/claude-sonnet-4-5"
    assert (chat.kind, parent_of(chat, spans)) == (SpanKind.CLIENT, attempt)
    attributes = dict(chat.attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == attributes["gen_ai.system"] == "anthropic"
    assert attributes["gen_ai.request.model"] == "claude-sonnet-4-5"
    assert attributes["gen_ai.response.model"] == "claude-sonnet-4-5"
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (
        900,
        12,
    )
    assert (attributes["gen_ai.request.max_tokens"], attributes["gen_ai.request.temperature"]) == (
        512,
        0,
    )
    assert attributes["replyguard.cost_usd"] == pytest.approx(outcome.judge_cost_usd)
    assert attributes["replyguard.cost_usd"] > 0
    assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
    endpoint = urlsplit(provider.url)
    assert (attributes["server.address"], attributes["server.port"]) == (
        endpoint.hostname,
        endpoint.port,
    )
    assert chat.status.status_code == StatusCode.UNSET


async def test_a_provider_error_marks_the_judge_span_without_the_key(
    make_config: MakeConfig,
    provider: ProviderServer,
    provider_of: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    echo = ANTHROPIC.error(500, f"internal error for key {API_KEY}")
    provider.push(Step(text=None, status=500, body=echo))
    config = through(make_config, provider)
    verifier = Verifier(config, tracer_provider=provider_of)
    outcome = await verifier.run(ScriptedAgent([FIRST]), TURN)
    await verifier.aclose()
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, "judge_error")
    spans = exporter.get_finished_spans()
    [chat] = by_name(spans, "chat ")
    assert chat.status.status_code == StatusCode.ERROR
    [event] = chat.events
    assert event.name == "exception"
    assert "InternalServerError" in str((event.attributes or {})["exception.type"])
    assert "REDACTED" in str((event.attributes or {})["exception.message"])
    assert API_KEY not in every_text(spans)
    [turn] = by_name(spans, "replyguard.turn")
    assert (turn.attributes or {})["replyguard.reason"] == "judge_error"


@pytest.mark.parametrize(
    ("timeout_seconds", "caller_seconds", "ended", "error_type"),
    [
        (0.3, None, (Status.FAILED_OPEN, "judge_timeout"), "TimeoutError"),
        (10, 0.5, None, "CancelledError"),  # the caller gives up first: run() raises
    ],
    ids=["judgement-deadline", "caller-cancels"],
)
async def test_a_slow_judge_call_is_an_error_span_named_by_what_stopped_it(
    make_config: MakeConfig,
    provider: ProviderServer,
    provider_of: TracerProvider,
    exporter: InMemorySpanExporter,
    timeout_seconds: float,
    caller_seconds: float | None,
    ended: tuple[Status, str] | None,
    error_type: str,
) -> None:
    provider.push(Step(text="PASS", delay=5))
    config = through(make_config, provider, timeoutSeconds=timeout_seconds)
    verifier = Verifier(config, tracer_provider=provider_of)
    outcome = None
    try:
        async with asyncio.timeout(caller_seconds):
            outcome = await verifier.run(ScriptedAgent([FIRST]), TURN)
    except TimeoutError:
        pass
    finally:
        await verifier.aclose()
    assert (None if outcome is None else (outcome.status, outcome.reason)) == ended
    [chat] = by_name(exporter.get_finished_spans(), "chat ")
    assert chat.status.status_code == StatusCode.ERROR
    assert (chat.attributes or {})["error.type"] == error_type


async def test_a_model_timeout_is_recorded_when_the_deadline_lands_in_its_closing_pass(
    make_config: MakeConfig,
    provider: ProviderServer,
    provider_of: TracerProvider,
    exporter: InMemorySpanExporter,
    replyguard_logs: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a call to the judge model times out, the judge lets its connection close (one
    loop pass, widened here to span the judgement's deadline). A deadline landing in that
    pass must not erase what happened: the span and the model's circuit still record the
    model's timeout, not the caller's cancellation. They said ``CancelledError``, and the
    failure went uncounted, when that happened to the test above (once in a full run of the
    suite): there the model's own share ends 3 ms before the deadline, and a busy loop runs
    its timers late."""
    import litellm

    from replyguard.judge import _attempt

    async def times_out(**params: Any) -> Any:
        await asyncio.sleep(0.01)
        raise TimeoutError("the read timed out")

    async def slow_closing_pass() -> None:  # the judgement's deadline (0.3 s) lands in it
        await asyncio.sleep(1)

    monkeypatch.setattr(litellm, "acompletion", times_out)
    monkeypatch.setattr(_attempt, "closing_pass", slow_closing_pass)
    verifier = Verifier(
        through(make_config, provider, timeoutSeconds=0.3), tracer_provider=provider_of
    )
    try:
        await verifier.warmup()
        await asyncio.to_thread(wait_for_preload)  # no import holds the GIL (and the timers)
        outcome = await verifier.run(ScriptedAgent([FIRST]), TURN)
    finally:
        await verifier.aclose()
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, "judge_timeout")
    [chat] = by_name(exporter.get_finished_spans(), "chat ")
    assert (chat.attributes or {})["error.type"] == "TimeoutError"
    failed = [r for r in replyguard_logs.records if "judge_model_failed" in r.getMessage()]
    assert len(failed) == 1 and "timeout" in failed[0].getMessage()


@pytest.mark.parametrize("log_content", [False, True])
async def test_user_content_reaches_spans_only_with_log_content(
    make_config: MakeConfig,
    provider_of: TracerProvider,
    exporter: InMemorySpanExporter,
    log_content: bool,
) -> None:
    config = make_config(verifyAll=True, logContent=log_content)
    verifier = Verifier(
        config, judge=ScriptedJudge([FAIL_ANSWER, "PASS"]), tracer_provider=provider_of
    )
    await verifier.run(ScriptedAgent([FIRST, SECOND]), TURN)
    text = every_text(exporter.get_finished_spans())
    assert "Project Heron" not in text and "merger memo" not in text
    assert (FEEDBACK in text) is log_content
    # An agent's exception may quote the user: its class alone, unless logContent.
    exporter.clear()
    with pytest.raises(RuntimeError):
        await verifier.run(ScriptedAgent([RuntimeError(f"cannot read {USER_MESSAGE}")]), TURN)
    [turn] = exporter.get_finished_spans()
    [event] = turn.events
    assert (event.attributes or {})["exception.type"] == "RuntimeError"
    assert (USER_MESSAGE in every_text((turn,))) is log_content
    if not log_content:
        assert turn.status.description == "RuntimeError"


async def test_verify_makes_one_span_with_the_verdict(
    make_config: MakeConfig, provider_of: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    config = make_config(checks=[{"type": "rules", "maxLength": 500}])
    verifier = Verifier(config, judge=ScriptedJudge([FAIL_ANSWER]), tracer_provider=provider_of)
    verdict = await verifier.verify(TURN, FIRST)
    assert not verdict.passed
    spans = exporter.get_finished_spans()
    [span] = by_name(spans, "replyguard.verify")
    assert span.parent is None
    assert [parent_of(c, spans) for c in by_name(spans, "replyguard.check")] == [span]
    assert (span.attributes or {})["replyguard.verdict"] == "FAIL"


async def test_an_agent_error_on_the_first_attempt_marks_the_turn_span(
    make_config: MakeConfig, provider_of: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    verifier = Verifier(make_config(verifyAll=True), tracer_provider=provider_of)
    with pytest.raises(RuntimeError, match="agent broke"):
        await verifier.run(ScriptedAgent([RuntimeError(f"agent broke with {API_KEY}")]), TURN)
    [turn] = exporter.get_finished_spans()
    assert turn.status.status_code == StatusCode.ERROR
    assert API_KEY not in every_text((turn,))


def one_turn_in_a_child(setup: str, tracing: bool, report: str) -> str:
    """What a fresh Python process prints (``report``, an expression) after ``setup`` and one
    turn of a verifier with ``tracing`` as given."""
    script = (
        "import asyncio, sys\n"
        "from replyguard import Turn, Verifier, VerifierConfig\n"
        "from replyguard.testing import ScriptedAgent, ScriptedJudge\n"
        f"{setup}"
        f"config = VerifierConfig(enabled=True, verify_all=True, tracing={tracing},\n"
        "                        agent_model='openai/gpt-4o')\n"
        "verifier = Verifier(config, judge=ScriptedJudge(['PASS']))\n"
        "outcome = asyncio.run(verifier.run(ScriptedAgent(['Done.']), Turn(user_message='hi')))\n"
        f"print({report})\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout.strip()


def test_config_tracing_uses_the_global_tracer_provider() -> None:
    # In a child process: the global provider can be set only once, and a processor added to it
    # could never be taken off again.
    setup = (
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import "
        "InMemorySpanExporter\n"
        "exporter = InMemorySpanExporter()\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "trace.set_tracer_provider(provider)\n"
    )
    names = one_turn_in_a_child(
        setup, True, "sorted(s.name for s in exporter.get_finished_spans())"
    )
    assert names == "['replyguard.attempt', 'replyguard.turn']"


async def test_no_spans_when_tracing_is_off(
    make_config: MakeConfig, provider_of: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = provider_of.get_tracer("the host")
    with tracer.start_as_current_span("host request"):
        verifier = Verifier(make_config(verifyAll=True), judge=ScriptedJudge(["PASS"]))
        outcome = await verifier.run(ScriptedAgent([FIRST]), TURN)
    assert outcome.status == Status.PASSED
    assert [s.name for s in exporter.get_finished_spans()] == ["host request"]


def test_tracing_off_never_imports_opentelemetry() -> None:
    report = "outcome.status.value, sorted(m for m in sys.modules if 'opentelemetry' in m)"
    assert one_turn_in_a_child("", False, report) == "passed []"


class RaisingProcessor(SpanProcessor):
    """A host's span processor that fails on every span it is shown."""

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise RuntimeError("exporter queue full")

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("exporter queue full")


async def test_a_span_processor_that_raises_never_costs_the_reply(
    make_config: MakeConfig, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(RaisingProcessor())
    config = make_config(verifyAll=True, checks=[{"type": "rules", "maxLength": 500}])
    verifier = Verifier(
        config, judge=ScriptedJudge([FAIL_ANSWER, "PASS"]), tracer_provider=tracer_provider
    )
    outcome = await verifier.run(ScriptedAgent([FIRST, SECOND]), TURN)
    assert (outcome.status, outcome.response, len(outcome.attempts)) == (
        Status.PASSED,
        SECOND,
        2,
    )
    warned = [r for r in replyguard_logs.records if "tracing_failed" in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelname == "WARNING"


def command_check(seconds: float) -> dict[str, Any]:
    """A required command check that takes ``seconds``, with a time limit of its own."""
    command = [sys.executable, "-c", f"import time; time.sleep({seconds})"]
    return {
        "type": "command",
        "command": command,
        "timeoutSeconds": 10,
        "required": True,
        "passReply": "none",
    }


@pytest.mark.parametrize("traced", [False, True], ids=["off", "on"])
async def test_a_checks_own_time_limit_holds_with_tracing_on_or_off(
    make_config: MakeConfig, provider_of: TracerProvider, traced: bool
) -> None:
    # The check outlasts the judgement's timeout but not its own time limit.
    config = make_config(
        verifyAll=True, maxAttempts=1, timeoutSeconds=0.3, checks=[command_check(0.6)]
    )
    verifier = Verifier(
        config, judge=ScriptedJudge(["PASS"]), tracer_provider=provider_of if traced else None
    )
    outcome = await verifier.run(ScriptedAgent([FIRST]), TURN)
    [check] = outcome.attempts[0].checks
    assert (outcome.status, check.passed, check.error) == (Status.PASSED, True, None)


class NotMyBusiness:
    """A check that never applies: it must be neither run nor traced."""

    name = "not-mine"
    required = True

    def __init__(self) -> None:
        self.runs = 0

    def applies(self, turn: Turn, reply: Any) -> bool:
        return False

    async def check(self, turn: Turn, reply: Any) -> CheckResult:
        self.runs += 1
        return CheckResult(name=self.name, passed=False)


async def test_a_check_that_does_not_apply_is_neither_run_nor_traced(
    make_config: MakeConfig, provider_of: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    check = NotMyBusiness()
    verifier = Verifier(
        make_config(verifyAll=True),
        judge=ScriptedJudge(["PASS"]),
        checks=[check],
        tracer_provider=provider_of,
    )
    assert verifier.checks[-1] is check  # the check itself, not its traced wrapper
    outcome = await verifier.run(ScriptedAgent([FIRST]), TURN)
    assert (outcome.status, check.runs) == (Status.PASSED, 0)
    assert by_name(exporter.get_finished_spans(), "replyguard.check") == []


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("mistral/mistral-large-latest", "mistral_ai"),
        ("xai/grok-4", "x_ai"),
        ("azure_ai/claude-sonnet-4-5", "azure.ai.inference"),
        ("azure/gpt-4o", "azure.ai.openai"),
        ("watsonx/ibm/granite-13b", "ibm.watsonx.ai"),
        ("gemini/gemini-2.5-pro", "gcp.gemini"),
        ("vertex_ai/gemini-2.5-pro", "gcp.vertex_ai"),
        ("bedrock/anthropic.claude-3-haiku", "aws.bedrock"),
        ("openai/gpt-4o", "openai"),
        ("gpt-4o", "openai"),
        ("anthropic/claude-sonnet-4-5", "anthropic"),
        ("groq/llama-3.3-70b", "groq"),
        ("cohere/command-r", "cohere"),
        ("deepseek/deepseek-chat", "deepseek"),
        ("perplexity/sonar", "perplexity"),
    ],
)
def test_litellm_routes_map_to_semantic_convention_provider_names(model: str, name: str) -> None:
    assert provider_name(model) == name


@pytest.mark.parametrize(
    ("api_base", "expected"),
    [
        (
            "https://judge.example.internal/v1",
            {"server.address": "judge.example.internal", "server.port": 443},
        ),
        ("http://10.0.0.7:4000", {"server.address": "10.0.0.7", "server.port": 4000}),
        (None, {}),
        ("http://host:notaport", {}),
    ],
)
def test_the_judge_endpoint_is_named_when_known(
    api_base: str | None, expected: dict[str, Any]
) -> None:
    assert server_attributes(api_base) == expected
