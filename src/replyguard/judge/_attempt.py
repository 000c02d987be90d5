"""One judge model's attempt for a litellm judge: its request sent within its share of the
time (through the Router for a router group, else litellm with the byte-capped session), in a
trace span, and its answer read (a verdict-first answer streamed: ``judge/_streamed``), or its
failure logged and counted against its circuit (``judge/_failures``).

The table of what each outcome leads to is in ``judge/_fallbacks``, which calls this once per
model in order.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from replyguard._deadlines import Deadline
from replyguard.config._schema import VerifierConfig
from replyguard.errors import ConfigError, JudgeConfigError
from replyguard.judge._answer_cap import CallTicket, capped_context
from replyguard.judge._failures import Failures
from replyguard.judge._litellm import _provider, classify_failure, read_response
from replyguard.judge._owned import JudgeParts
from replyguard.judge._protocol import JudgeReply
from replyguard.judge._requests import RequestPlan
from replyguard.judge._settling import closing_pass, let_go, shielded
from replyguard.judge._streamed import (
    VERDICT_FIRST_REMINDER,
    VERDICT_FIRST_SYSTEM,
    read_stream,
)
from replyguard.judge._unanswered import Request, sending
from replyguard.telemetry._tracing import (
    Tracing,
    answer_attributes,
    chat_attributes,
    finish_reasons,
)

if TYPE_CHECKING:  # loaded when a config names router groups
    from replyguard.judge._router import JudgeRouter


class ModelCalls:
    """The calls of one litellm judge's models (its config, parts, plan and failures)."""

    def __init__(
        self,
        config: VerifierConfig,
        parts: JudgeParts,
        plan: RequestPlan,
        failures: Failures,
        tracing: Tracing,
        routed: frozenset[str],
    ) -> None:
        self._config = config
        self._parts = parts
        self._plan = plan
        self._failures = failures
        self._tracing = tracing
        self._routed = routed
        self._router: JudgeRouter | None = parts.router
        self._unpriced: set[str] = set()  # models litellm's price map could not price

    async def attempt(
        self,
        litellm: Any,
        model: str,
        params: dict[str, Any],
        api_key: str | None,
        share: float,
        deadline: float,
    ) -> JudgeReply | tuple[Exception, str]:
        """``model``'s answer to the request ``params`` within its ``share`` of seconds, or
        its failure (logged, counted against its circuit) with what to say of it. A
        configuration error and the caller's cancellation propagate."""
        loop = asyncio.get_running_loop()
        tracing = self._tracing
        attributes = None
        if tracing.enabled:
            attributes = chat_attributes(model, params, self._config.underlying_models(model))
        if model not in self._routed:
            self._capped(litellm, model, params)
        with tracing.span(f"chat {model}", attributes, client=True) as span:
            ticket, task = CallTicket(), None
            try:
                call = (
                    await self._caller(litellm, model)
                    if model in self._routed
                    else litellm.acompletion
                )
                request = sending(self._plan.models_behind(model), _added(params))
                until = loop.time() + share
                # The call's own task, started where its answer's ticket is seen, and shielded:
                # cut off from outside, it is cancelled once (``let_go``).
                task = capped_context(ticket).run(
                    loop.create_task, self._call(litellm, call, model, params, until, request)
                )
                response = await shielded(task)
            except JudgeConfigError as exc:  # the Router could not be built (logged)
                span.fail(exc)
                raise
            except asyncio.CancelledError as exc:
                if task is not None:
                    await let_go(task)
                # The caller's deadline for this judgement cancels the call from outside, a
                # hair before or after this model's own share runs out (both timers can fire
                # in one pass of a busy loop): past the share, the hang is still this model's
                # timeout and counts against its circuit.
                if loop.time() >= deadline:
                    hung = TimeoutError()
                    span.fail(hung)
                    self._failures.failed(model, hung, ())
                else:
                    span.fail(exc)
                await closing_pass()
                raise
            except Exception as exc:
                return await self._failures.not_answered(
                    model, exc, span, ticket.too_large, api_key
                )
            reasons: tuple[str, ...] = ()
            if isinstance(response, JudgeReply):  # a streamed answer, read already
                answer = response
            else:
                answer = read_response(response, model, self._unpriced)
                reasons = finish_reasons(response) if tracing.enabled else ()
            request.replied(answer)  # the answer prices itself
            if tracing.enabled:
                usage = (answer.prompt_tokens, answer.completion_tokens, answer.cost_usd)
                span.set(answer_attributes(answer.model, *usage, reasons))
        return answer

    async def _call(
        self,
        litellm: Any,
        call: Any,
        model: str,
        params: dict[str, Any],
        until: float,
        request: Request,
    ) -> Any:
        """One model's call within its share (ending at loop time ``until``), on the
        verifier's own clients; a streamed answer is read here, within the share too (its
        text noted in ``request`` as it arrives)."""
        try:
            with Deadline(until), self._parts.clients.using(litellm):
                response = await self._plan.send(call, model, params)
                if params.get("stream") is True:
                    messages, received = params["messages"], request.received
                    return await read_stream(response, model, messages, self._unpriced, received)
                return response
        except Exception as exc:
            if _refused(exc):  # the provider answered with an error: nothing was billed
                request.forget()
            raise

    async def _caller(self, litellm: Any, model: str) -> Any:
        """What sends ``model``'s request: the Router for a router group, else litellm."""
        if model not in self._routed or self._router is None:
            return litellm.acompletion
        try:
            router = await self._router.router()
        except ConfigError as exc:
            raise self._plan.misconfigured(exc) from None
        return router.acompletion

    def _capped(self, litellm: Any, model: str, params: dict[str, Any]) -> None:
        """Have ``params`` read the answer through the byte-capped session (``answer_cap``)."""
        sessions = self._parts.sessions
        session = sessions.session(litellm)
        if session is None:
            return
        params["shared_session"] = session
        if _provider(model) == "anthropic":  # its route takes a client, not a session
            params["client"] = sessions.handler(session, self._plan.client_timeout)


def _refused(exc: Exception) -> bool:
    """Whether the provider refused the request with an error status (it bills nothing), as
    opposed to its answer being cut (a timeout, a stream ended mid-way)."""
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and classify_failure(exc) != "timeout"


def _added(params: dict[str, Any]) -> str:
    """The text a request adds to the judge's prompt: the verdict-first notes, if streamed."""
    return VERDICT_FIRST_SYSTEM + VERDICT_FIRST_REMINDER if params.get("stream") is True else ""
