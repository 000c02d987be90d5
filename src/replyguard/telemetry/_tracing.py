"""Optional OpenTelemetry spans: one per turn, attempt, check and judge call.

Off by default. ``tracing: true`` in the config uses the global tracer provider; a
``tracer_provider`` given to ``Verifier`` is used whatever the config says. When tracing is off
(or ``opentelemetry-api``, the ``otel`` extra, is not installed) every span is one shared no-op
object and ``opentelemetry`` is never imported.

The span tree of a turn, parents set through the context (so check spans, which run in their own
tasks, still hang under their attempt)::

    replyguard.turn                  replyguard.status, .reason, .cost_usd, .attempts, ...
    └── replyguard.attempt           replyguard.attempt, .verdict (PASS/FAIL), .category, ...
        ├── replyguard.check {name}  replyguard.check.name, .check.passed, .check.category
        └── chat {model}             gen_ai.* (GenAI semantic conventions), replyguard.cost_usd

``Verifier.verify`` makes one ``replyguard.verify`` span with the attempt's children.
A judge panel's attempt has one ``chat {model}`` child per member call, side by side, and
``replyguard.panel.members``, ``.panel.votes`` (PASS, FAIL or none for a member left out) and
``.panel.agreement`` (the share of the answering members that voted as the panel decided).

A failed step gets status ERROR and an ``exception`` event whose message is the redacted,
one-line ``describe_error`` text (never the raw exception text, which may echo an API key); an
exception that merely passes through a span (the agent's) shows only its class unless
``logContent``. Every OpenTelemetry call is guarded: a failing processor or exporter costs
spans, never a turn.
User content (messages, replies, feedback) goes into attributes only with ``logContent``.

Each verdict recorded on a span (``verdict_attributes``) is also emitted as a
``gen_ai.evaluation.result`` event, parented to the host's span current when the turn began
(see ``_evaluation``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar, Token
from typing import Any

from replyguard.telemetry._evaluation import EVENT_NAME, evaluation_attributes
from replyguard.telemetry._events import Events, describe_error
from replyguard.telemetry._ledger import member_votes, vote
from replyguard.types import Outcome, Turn, Verdict

Attributes = Mapping[str, Any]
_SCALARS = (str, bool, int, float)
# GenAI semantic-convention provider names for litellm's route prefixes.
# Others (openai, anthropic, groq, cohere, deepseek, perplexity) are named as litellm names them.
_PROVIDER_NAMES = {
    "vertex_ai": "gcp.vertex_ai",
    "gemini": "gcp.gemini",
    "google": "gcp.gemini",
    "bedrock": "aws.bedrock",
    "azure": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "mistral": "mistral_ai",
    "xai": "x_ai",
    "watsonx": "ibm.watsonx.ai",
}


TURN_SPANS = frozenset({"replyguard.turn", "replyguard.verify"})
"""The spans a host's call opens: the span current when one starts is the host's."""
_HOST: ContextVar[Any] = ContextVar("replyguard_host_context", default=None)
"""The OpenTelemetry context current when the turn began, when it held a span of the host's."""


def _clean(attributes: Attributes) -> dict[str, Any]:
    """The attributes OpenTelemetry accepts: scalars and tuples of text only, None dropped,
    enums as values."""
    return {
        key: getattr(value, "value", value)
        for key, value in attributes.items()
        if isinstance(value, _SCALARS)
        or (isinstance(value, tuple) and value and all(isinstance(v, str) for v in value))
    }


class _NoSpan:
    """The span of disabled tracing: a constant that does nothing."""

    __slots__ = ()

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set(self, attributes: Attributes) -> None:
        """Add attributes (ignored)."""

    def record(self, build: Callable[..., Attributes], *args: Any) -> None:
        """Add the attributes ``build(*args)`` returns (never called here)."""

    def fail(self, exc: BaseException, secrets: tuple[str, ...] = ()) -> None:
        """Record a failure (ignored)."""

    def error(self, kind: str, description: str) -> None:
        """Record a failure already described (ignored)."""


NO_SPAN = _NoSpan()


class Tracing:
    """Tracing switched off: every span is ``NO_SPAN``."""

    enabled = False
    log_content = False

    def span(self, name: str, attributes: Attributes | None = None, *, client: bool = False) -> Any:
        """A context manager for one span, yielding an object with ``set`` and ``fail``."""
        return NO_SPAN


NO_TRACING = Tracing()


class _LiveSpan:
    """One OpenTelemetry span, current for the duration of its ``with`` block.

    Every OpenTelemetry call is guarded: a host's span processor or exporter that raises costs
    the span (one ``tracing_failed`` warning per verifier), never the turn.
    """

    __slots__ = (
        "_attributes",
        "_client",
        "_host",
        "_manager",
        "_name",
        "_owner",
        "_span",
        "failed",
    )

    def __init__(self, owner: _OtelTracing, name: str, attributes: Attributes, client: bool):
        self._owner, self._name, self._attributes, self._client = owner, name, attributes, client
        self._manager: Any = None
        self._span: Any = None
        self._host: Token[Any] | None = None
        self.failed = False

    def __enter__(self) -> _LiveSpan:
        kind = self._owner.client_kind if self._client else self._owner.internal_kind
        if self._name in TURN_SPANS:
            self._host = _HOST.set(self._owner.host_context())
        try:
            manager = self._owner.tracer.start_as_current_span(
                self._name,
                kind=kind,
                attributes=_clean(self._attributes),
                record_exception=False,  # recorded here, redacted
                set_status_on_exception=False,
            )
            self._span = manager.__enter__()
            self._manager = manager
        except Exception as exc:
            self._owner.broken(exc)
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, traceback: Any) -> None:
        if exc is not None and not self.failed:
            # An exception passing through (the agent's, say): its text may quote user
            # content, so only its class unless ``logContent``.
            self.fail(exc, detailed=self._owner.log_content)
        manager, self._manager, self._span = self._manager, None, None
        if self._host is not None:
            _HOST.reset(self._host)
            self._host = None
        if manager is not None:
            try:
                manager.__exit__(kind, exc, traceback)
            except Exception as error:
                if error is not exc:
                    self._owner.broken(error)

    def set(self, attributes: Attributes) -> None:
        """Add attributes (None values are left out)."""
        if self._span is not None:
            try:
                self._span.set_attributes(_clean(attributes))
            except Exception as exc:
                self._owner.broken(exc)

    def record(self, build: Callable[..., Attributes], *args: Any) -> None:
        """Add the attributes ``build(*args)`` returns (built only when tracing is on); a
        verdict's (``verdict_attributes``) is also emitted as an evaluation event."""
        self.set(build(*args))
        if build is verdict_attributes:
            self._owner.evaluation(*args)

    def fail(
        self, exc: BaseException, secrets: tuple[str, ...] = (), *, detailed: bool = True
    ) -> None:
        """Mark the span ERROR with a redacted description of ``exc`` (its class alone when
        not ``detailed``)."""
        name = type(exc).__name__
        said = describe_error(exc, (*self._owner.secrets, *secrets)) if detailed else name
        self.error(name, said)

    def error(self, kind: str, description: str) -> None:
        """Mark the span ERROR: ``kind`` is its ``error.type``, ``description`` (already free of
        secrets) its status message and exception event."""
        self.failed = True
        if self._span is None:
            return
        try:
            self._span.set_attribute("error.type", kind)
            self._span.set_status(self._owner.error_status, description)
            self._span.add_event(
                "exception", {"exception.type": kind, "exception.message": description}
            )
        except Exception as error:
            self._owner.broken(error)


class _OtelTracing(Tracing):
    enabled = True

    def __init__(self, tracer_provider: Any, events: Events, *, log_content: bool) -> None:
        from opentelemetry import trace

        from replyguard._version import __version__

        if tracer_provider is None:
            self.tracer = trace.get_tracer("replyguard", __version__)
        else:
            self.tracer = tracer_provider.get_tracer("replyguard", __version__)
        self.secrets = events.secrets
        self.log_content = log_content
        self._events = events
        self._warned = False
        self.client_kind = trace.SpanKind.CLIENT
        self.internal_kind = trace.SpanKind.INTERNAL
        self.error_status = trace.StatusCode.ERROR
        self._logger: Any = None

    def host_context(self) -> Any:
        """The current OpenTelemetry context when it holds a (valid) span, else None."""
        try:
            from opentelemetry import context, trace

            if trace.get_current_span().get_span_context().is_valid:
                return context.get_current()
        except Exception as exc:
            self.broken(exc)
        return None

    def evaluation(self, verdict: Verdict, with_content: bool) -> None:
        """Emit ``verdict`` as a ``gen_ai.evaluation.result`` event, parented to the host's
        span of this turn (else to the current span); never raises."""
        try:
            from opentelemetry._logs import LogRecord

            if self._logger is None:
                from opentelemetry._logs import get_logger

                from replyguard._version import __version__

                self._logger = get_logger("replyguard", __version__)
            # A record, not emit's keywords: emit(record) with a named record works from
            # opentelemetry-api 1.35 (the extra's floor); the keyword form came later.
            self._logger.emit(
                LogRecord(
                    event_name=EVENT_NAME,
                    attributes=_clean(evaluation_attributes(verdict, with_content)),
                    context=_HOST.get(),
                )
            )
        except Exception as exc:
            self.broken(exc)

    def span(self, name: str, attributes: Attributes | None = None, *, client: bool = False) -> Any:
        return _LiveSpan(self, name, attributes or {}, client)

    def broken(self, exc: Exception) -> None:
        """An OpenTelemetry call raised: warn the first time, carry on."""
        if not self._warned:
            self._warned = True
            self._events.warning(
                "tracing_failed", error=describe_error(exc, self.secrets), span_lost=True
            )


def otel_available() -> bool:
    """Whether ``opentelemetry-api`` (the ``otel`` extra) is installed."""
    return importlib.util.find_spec("opentelemetry") is not None


def build_tracing(
    enabled: bool, tracer_provider: Any, events: Events, *, log_content: bool
) -> Tracing:
    """Live tracing when asked for (by the config or a given provider), else ``NO_TRACING``.

    Without ``opentelemetry-api`` tracing stays off, with a ``tracing_unavailable`` warning:
    observability never stops a verifier from working.
    """
    if not enabled and tracer_provider is None:
        return NO_TRACING
    if not otel_available():
        events.warning("tracing_unavailable", fix="pip install 'replyguard[otel]'")
        return NO_TRACING
    return _OtelTracing(tracer_provider, events, log_content=log_content)


# -- attributes ------------------------------------------------------------------------------


def provider_name(model: str) -> str | None:
    """The GenAI ``gen_ai.provider.name`` of a litellm model name (its route prefix)."""
    from replyguard._families import model_family

    route = model.split("/", 1)[0].lower() if "/" in model else model_family(model)
    return _PROVIDER_NAMES.get(route, route) if route else None


def chat_attributes(
    model: str, request: Mapping[str, Any], deployments: Sequence[str] = ()
) -> dict[str, Any]:
    """The GenAI request attributes of one judge call (``request``: litellm's arguments;
    ``deployments``: the models behind a router group, whose common provider is named)."""
    providers = {provider_name(m) for m in deployments or (model,)}
    provider = providers.pop() if len(providers) == 1 else None
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,
        "gen_ai.request.model": model.split("/", 1)[1] if "/" in model else model,
        "gen_ai.request.max_tokens": request.get("max_tokens"),
        "gen_ai.request.temperature": request.get("temperature"),
        **server_attributes(request.get("api_base")),
    }


def server_attributes(api_base: Any) -> dict[str, Any]:
    """``server.address`` and ``server.port`` of an endpoint URL (none when it is unknown)."""
    if not isinstance(api_base, str) or not api_base:
        return {}
    from urllib.parse import urlsplit

    try:
        url = urlsplit(api_base)
        port = url.port or {"http": 80, "https": 443}.get(url.scheme)
    except ValueError:  # a malformed port: no server attributes rather than a failed call
        return {}
    return {"server.address": url.hostname, "server.port": port}


def answer_attributes(
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    cost_usd: float,
    finish_reasons: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The GenAI response attributes of one judge call, and its cost."""
    return {
        "gen_ai.response.model": model,
        "gen_ai.response.finish_reasons": finish_reasons,
        "gen_ai.usage.input_tokens": prompt_tokens,
        "gen_ai.usage.output_tokens": completion_tokens,
        "replyguard.cost_usd": cost_usd,
    }


def finish_reasons(response: Any) -> tuple[str, ...]:
    """Why each choice of a litellm response ended (``stop``, ``length``, ...), as given."""

    def field(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)

    reasons = (field(choice, "finish_reason") for choice in field(response, "choices") or ())
    return tuple(reason for reason in reasons if isinstance(reason, str))


def turn_attributes(turn: Turn, run_kind: str | None, mode: str) -> dict[str, Any]:
    """The attributes of a turn's span known before it runs (no content)."""
    return {
        "replyguard.turn_id": turn.id,
        "replyguard.run_kind": run_kind,
        "replyguard.mode": mode,
        "replyguard.heartbeat": turn.heartbeat,
    }


def outcome_attributes(outcome: Outcome) -> dict[str, Any]:
    """How a turn ended (no content)."""
    return {
        "replyguard.status": outcome.status,
        "replyguard.reason": outcome.reason,
        "replyguard.skip_reason": outcome.skip_reason,
        "replyguard.attempts": len(outcome.attempts),
        "replyguard.cost_usd": outcome.cost_usd,
        "replyguard.judge_cost_usd": outcome.judge_cost_usd,
    }


def verdict_attributes(verdict: Verdict, with_content: bool) -> dict[str, Any]:
    """One verdict; its feedback (the judge's words on the reply) only ``with_content``."""
    attributes: dict[str, Any] = {
        "replyguard.verdict": "PASS" if verdict.passed else "FAIL",
        "replyguard.category": verdict.category,
        "replyguard.reason": verdict.fail_open_reason,
        "replyguard.cost_usd": verdict.cost_usd,
        "replyguard.judge_model": verdict.model,
        "replyguard.decisive": verdict.decisive,
    }
    if verdict.members:
        votes = member_votes(verdict)
        decision = vote(verdict)
        answered = [v for v in votes.values() if v is not None]
        agreed = sum(v == decision for v in answered) if decision is not None else 0
        attributes["replyguard.panel.members"] = tuple(votes)
        attributes["replyguard.panel.votes"] = tuple(v or "none" for v in votes.values())
        attributes["replyguard.panel.agreement"] = agreed / len(answered) if answered else 0.0
    if with_content:
        attributes["replyguard.feedback"] = verdict.feedback
    return attributes
