"""Each verdict as a ``gen_ai.evaluation.result`` event, read back from the OpenTelemetry
SDK's in-memory log exporter: its GenAI attributes, its parent (the host's span current when
the turn began), no explanation without ``logContent``, nothing when tracing is off, and a
failing log pipeline that costs the event, never the turn."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry._logs import get_logger_provider, set_logger_provider
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from replyguard import Status, Turn, Verifier, VerifierConfig
from replyguard.testing import ScriptedAgent, ScriptedJudge

MakeConfig = Callable[..., VerifierConfig]
FEEDBACK = "Give the date the memo was signed."
FAIL_ANSWER = f"No date given.\nFAIL [incomplete]: {FEEDBACK}"
EXPORTER = InMemoryLogRecordExporter()
"""Shared: the global logger provider can be set once per process."""


class _Switch:
    """A processor in the global logger provider that forwards to ``EXPORTER`` or raises, only
    while a test of this module holds it (``active``): the provider stays global for the rest
    of the session, where other libraries' records (FastAPI's own telemetry) pass through it."""

    def __init__(self) -> None:
        self.inner = SimpleLogRecordProcessor(EXPORTER)
        self.broken = False
        self.active = False

    def on_emit(self, record: Any) -> None:
        if not self.active:
            return
        if self.broken:
            raise RuntimeError("the log pipeline is down")
        self.inner.on_emit(record)

    def emit(self, record: Any) -> None:  # older SDKs call emit
        self.on_emit(record)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


SWITCH = _Switch()


@pytest.fixture
def events() -> Iterator[InMemoryLogRecordExporter]:
    if not isinstance(get_logger_provider(), LoggerProvider):
        provider = LoggerProvider()
        provider.add_log_record_processor(SWITCH)  # type: ignore[arg-type]
        set_logger_provider(provider)
    EXPORTER.clear()
    SWITCH.broken, SWITCH.active = False, True
    yield EXPORTER
    SWITCH.broken, SWITCH.active = False, False
    EXPORTER.clear()


@dataclass
class Otel:
    """A tracer provider with its span exporter, and the global log pipeline's exporter."""

    provider: TracerProvider
    spans: InMemorySpanExporter
    events: InMemoryLogRecordExporter


@pytest.fixture
def otel(events: InMemoryLogRecordExporter) -> Iterator[Otel]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Otel(provider, exporter, events)
    provider.shutdown()


def traced(
    make_config: MakeConfig, provider: TracerProvider, script: list[str], **keys: Any
) -> Verifier:
    """A verifier judging every reply with ``script``, tracing through ``provider``."""
    judge = ScriptedJudge(script, model="judge-a")
    return Verifier(make_config(verifyAll=True, **keys), judge=judge, tracer_provider=provider)


def attributes(exporter: InMemoryLogRecordExporter) -> list[dict[str, Any]]:
    return [dict(r.log_record.attributes or {}) for r in exporter.get_finished_logs()]


async def test_each_verdict_is_an_evaluation_event_under_the_host_span(
    make_config: MakeConfig,
    otel: Otel,
) -> None:
    verifier = traced(make_config, otel.provider, [FAIL_ANSWER, "PASS"])
    host = otel.provider.get_tracer("host-app")
    with host.start_as_current_span("host.chat") as span:
        outcome = await verifier.run(
            ScriptedAgent(["Done.", "Done: 3 May."]), Turn(user_message="q")
        )
    assert outcome.status == Status.PASSED
    records = [r.log_record for r in otel.events.get_finished_logs()]
    assert [r.event_name for r in records] == ["gen_ai.evaluation.result"] * 2
    host_context = span.get_span_context()
    assert all(r.span_id == host_context.span_id for r in records)
    assert all(r.trace_id == host_context.trace_id for r in records)
    first, second = attributes(otel.events)
    assert first == {
        "gen_ai.evaluation.name": "replyguard",
        "gen_ai.evaluation.score.label": "fail",
        "gen_ai.evaluation.score.value": 0.0,
        "replyguard.category": "incomplete",
        "replyguard.judge_model": "judge-a",
        "replyguard.awaiting_user": False,
        "replyguard.decisive": False,
    }
    assert second["gen_ai.evaluation.score.label"] == "pass"


async def test_without_a_host_span_the_event_hangs_under_the_attempt(
    make_config: MakeConfig,
    otel: Otel,
) -> None:
    verifier = traced(make_config, otel.provider, ["PASS"])
    assert not trace.get_current_span().get_span_context().is_valid
    await verifier.run(ScriptedAgent(["Done."]), Turn(user_message="q"))
    (record,) = [r.log_record for r in otel.events.get_finished_logs()]
    (attempt,) = [s for s in otel.spans.get_finished_spans() if s.name == "replyguard.attempt"]
    assert attempt.context is not None and record.span_id == attempt.context.span_id


async def test_the_explanation_is_content_and_needs_log_content(
    make_config: MakeConfig,
    otel: Otel,
) -> None:
    for log_content in (False, True):
        verifier = traced(make_config, otel.provider, [FAIL_ANSWER], logContent=log_content)
        await verifier.verify(Turn(user_message="q"), "Done.")
    without, with_content = attributes(otel.events)
    assert "gen_ai.evaluation.explanation" not in without
    assert with_content["gen_ai.evaluation.explanation"] == FEEDBACK


async def test_a_failed_open_judgement_carries_its_reason_as_the_error_type(
    make_config: MakeConfig,
    otel: Otel,
) -> None:
    verifier = traced(make_config, otel.provider, ["I cannot decide."])
    outcome = await verifier.run(ScriptedAgent(["Done."]), Turn(user_message="q"))
    assert outcome.status == Status.FAILED_OPEN
    (event,) = attributes(otel.events)
    assert event["error.type"] == "unreadable_verdict"
    assert "gen_ai.evaluation.score.label" not in event


async def test_no_tracing_no_event(
    make_config: MakeConfig, events: InMemoryLogRecordExporter
) -> None:
    verifier = Verifier(make_config(verifyAll=True), judge=ScriptedJudge(["PASS"]))
    await verifier.run(ScriptedAgent(["Done."]), Turn(user_message="q"))
    assert events.get_finished_logs() == ()


async def test_a_failing_log_pipeline_costs_the_event_never_the_turn(
    make_config: MakeConfig,
    otel: Otel,
    replyguard_logs: pytest.LogCaptureFixture,
) -> None:
    SWITCH.broken = True
    verifier = traced(make_config, otel.provider, [FAIL_ANSWER, "PASS"])
    outcome = await verifier.run(ScriptedAgent(["Done.", "Done: 3 May."]), Turn(user_message="q"))
    assert outcome.status == Status.PASSED and len(outcome.attempts) == 2
    warned = [r for r in replyguard_logs.records if "tracing_failed" in r.getMessage()]
    assert len(warned) == 1
