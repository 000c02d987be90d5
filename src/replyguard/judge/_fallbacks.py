"""The judge call: one ``litellm.acompletion`` per model, fallbacks in order, cost and tokens.

The ``Judge`` protocol is what the runner needs: given a prompt and the time left, return the
judge's raw text and what it cost. ``LiteLLMJudge`` is the real one; ``replyguard.testing``
ships scripted ones. The runner owns the deadline (``asyncio.timeout``); this module turns off
every hidden retry (``max_retries=0``) and never sleeps, so the deadline is the only clock.

Models are tried in order (``model``, then ``fallbackModels``). Each attempt gets an even share
of the time left among the models still to try whose circuit is not open; the last gets all
that is left, ending a few milliseconds before the deadline so that its own timeout, not the
caller's cancellation, ends a hung call (and is counted by its circuit breaker).

What a failed or empty attempt leads to (the HTTP status decides, not litellm's class name)::

    outcome of one model's attempt                 next step          circuit breaker
    ─────────────────────────────────────────────  ─────────────────  ───────────────
    readable verdict                               return it          success
    unreadable verdict (no choices, null content,  next model; the    success
      tool calls only, a refusal, no verdict line)   last one returned
    timeout of its share, litellm Timeout          next model         failure
    5xx (529 included), 408, 409, 429 (Retry-After
      or not: never waited for), connection error,
      any error without a status                   next model         failure
    400 naming ``temperature`` or                  the same call      -
      ``response_format`` (an option the model       without it, never
      refuses: o-series and ``temperature=0``)       sent it again
    4xx but 408/409/429: 400, 401, 402, 403, 404,  raise JudgeConfig-  not counted
      413, 422, ...; an unset ``env:`` key           Error, log ERROR
    circuit open                                   skip (DEBUG log)   -

413 (request too large) counts as configuration: the prompt is bounded by
``contextTokenBudget``, so a model or proxy that refuses its size refuses every turn's, and the
operator must lower the budget or pick another judge (litellm reports Anthropic's 413 as a 400
anyway, as it does a context-window overflow).

When no model answered: ``CircuitOpenError`` if every circuit was open, ``TimeoutError`` if the
last failure was a timeout (or no time was left), else ``JudgeError``, each listing every
model's redacted failure. An answer's tokens and cost add up over every answer of the
judgement, unreadable ones included.

Structured output: when litellm says a model supports a JSON schema ``response_format``
(``litellm.supports_response_schema``; any error there counts as no), the request asks for
``VERDICT_FORMAT`` (its category enum extended by the config's custom ``categories``), a
JSON object with ``reasoning``, ``verdict``, ``category`` and ``feedback`` that
``parse_verdict`` reads like any other verdict. Where litellm sends that schema to Anthropic
as its native ``output_format``, the judge sends the ``output_format`` litellm made of it
once (the same request; litellm's mapping costs about 0.7 ms per call), and a 400 naming
``output_format`` is a refusal of the schema. Other models get the text format the rubric
describes. The answer is read the same way either way: a tool-call-only or
empty answer is still unreadable.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from replyguard.config._schema import VerifierConfig
from replyguard.context._prompt import JudgePrompt
from replyguard.errors import CircuitOpenError, ConfigError, JudgeConfigError, JudgeError
from replyguard.judge._answer_cap import (
    MAX_ANSWER_BYTES,
    AnswerSessions,
    capped_call,
    is_too_large,
)
from replyguard.judge._base import BaseJudge
from replyguard.judge._breaker import CircuitBreaker
from replyguard.judge._clients import ClientScope
from replyguard.judge._litellm import (
    _loaded_litellm,
    _provider,
    classify_failure,
    import_litellm,
    native_structured_format,
    read_response,
    supports_structured_verdict,
)
from replyguard.judge._owned import JudgeParts
from replyguard.judge._prompt_cache import with_cached_system
from replyguard.judge._protocol import JudgeReply, verdict_format
from replyguard.telemetry._events import Events, describe_error
from replyguard.telemetry._tracing import (
    NO_TRACING,
    Tracing,
    answer_attributes,
    chat_attributes,
    finish_reasons,
)

if TYPE_CHECKING:  # loaded when a config names router groups
    from replyguard.judge._router import JudgeRouter

# How long before the deadline the last model's share ends (at most 1 % of the time).
_DEADLINE_GUARD = 0.01
# How long a judge call cancelled from outside is given to close its connection (a few
# milliseconds) before the turn goes on without waiting for it (``_cancelled_once``).
_SETTLE_SECONDS = 0.1
# Judge calls given up on while still closing, held until they end (or their loop is closed).
_UNSETTLED: set[asyncio.Task[Any]] = set()
# The HTTP client's own timeout runs this much past the judgement's deadline, so the deadline
# (enforced here, always first) decides, and a slow call is a timeout, never a client error.
_CLIENT_TIMEOUT_MARGIN = 2.0
# What a judgement can do without: a model that refuses one is asked again without it. (Not
# litellm's ``drop_params``: on every call it costs about 2 % of a loopback call's time.)
# ``output_format`` is the verdict schema in Anthropic's own form (``_format_params``).
_OPTIONAL = ("temperature", "response_format", "output_format")
_FORMAT_OPTIONS = frozenset({"response_format", "output_format"})


class LiteLLMJudge(BaseJudge):
    """The judge through litellm: the configured model, then each fallback (see module doc).

    ``apiKey`` (and ``apiBase``) belong to the primary model's provider: a fallback on another
    provider gets them only when ``apiBase`` is set (a proxy serving every model); otherwise
    litellm reads that provider's own environment variables, and the key never leaves for a
    provider it was not issued by.

    It holds its own share of litellm's HTTP clients, its byte-capped answer sessions and its
    Router (``replyguard.judge._owned``), shared with the judges it makes for run kinds and
    panel members (``sibling``), and closed by its ``aclose``.
    """

    def __init__(
        self,
        config: VerifierConfig,
        events: Events,
        *,
        breaker: CircuitBreaker | None = None,
        key_owner: str | None = None,
        tracing: Tracing = NO_TRACING,
        router: JudgeRouter | None = None,
        clients: ClientScope | None = None,
        sessions: AnswerSessions | None = None,
    ) -> None:
        """``key_owner``: the model whose provider issued ``apiKey`` (default: ``config.model``).
        ``router``, ``clients``, ``sessions``: a Router, a share of litellm's HTTP clients and
        byte-capped aiohttp sessions (``_answer_cap``) to use and leave open; without them the
        judge builds its own (the Router when the config names router groups), and its
        ``aclose`` closes them."""
        parts = JudgeParts(config, events, router=router, clients=clients, sessions=sessions)
        self._configure(config, events, breaker, key_owner, tracing, parts)
        parts.released_with(self)

    @classmethod
    def for_verifier(
        cls, config: VerifierConfig, events: Events, *, tracing: Tracing = NO_TRACING
    ) -> LiteLLMJudge:
        """The judge a ``Verifier`` builds for itself, with the config's circuit breaker
        (kept in the fleet's shared state when ``state`` is configured)."""
        if config.state is not None:
            from replyguard.judge._fleet_breaker import FleetBreaker

            breaker: CircuitBreaker = FleetBreaker.from_config(config.circuit_breaker)
        else:
            breaker = CircuitBreaker.from_config(config.circuit_breaker)
        return cls(config, events, breaker=breaker, key_owner=config.model, tracing=tracing)

    def _configure(
        self,
        config: VerifierConfig,
        events: Events,
        breaker: CircuitBreaker | None,
        key_owner: str | None,
        tracing: Tracing,
        parts: JudgeParts,
    ) -> None:
        self._config = config
        self._parts = parts
        self._sessions = parts.sessions
        self._clients = parts.clients
        self._events = events
        self._breaker = breaker
        self._tracing = tracing
        self._router = router = parts.router
        self._key_owner = key_owner
        self._models = config.judge_models
        self._structured: dict[str, bool] = {}  # per model, asked of litellm once
        self._formats: dict[str, dict[str, Any]] = {}  # the schema's option, per model
        self._unpriced: set[str] = set()  # models litellm's price map could not price
        self._refused: dict[str, frozenset[str]] = {}  # options a model refused (_send)
        self._format = verdict_format(tuple(config.categories))
        self._max_tokens = {model: config.judge_max_tokens_for(model) for model in self._models}
        self._litellm: Any = None  # once imported
        primary = _provider(key_owner or config.model)
        self._routed = frozenset(router.groups & set(self._models)) if router else frozenset()
        self._own_credentials = {
            model: model not in self._routed
            and (config.api_base is not None or _provider(model) == primary)
            for model in self._models
        }

    def sibling(self, config: VerifierConfig) -> LiteLLMJudge:
        """The judge of a run kind's or a panel member's ``config``, on this judge's clients,
        sessions, Router and breaker (this judge's ``aclose`` closes them; the sibling's closes
        nothing). The ``apiKey`` stays this judge's model's provider's."""
        if config is self._config:
            return self
        judge = LiteLLMJudge.__new__(LiteLLMJudge)
        key_owner = self._key_owner or self._config.model
        judge._configure(config, self._events, self._breaker, key_owner, self._tracing, self._parts)
        judge._owner = self
        return judge

    _owner: LiteLLMJudge | None = None
    """The judge whose parts a sibling shares (None: its own)."""

    @property
    def ready(self) -> bool:
        """True once ``warmup`` has nothing left to do (litellm imported, no Router to build),
        so a caller may skip awaiting it."""
        return self._litellm is not None and not self._routed

    async def warmup(self) -> None:
        """Import litellm, load what the first call to each judge model's route would, and
        build the Router (off the loop), so the first judgement's deadline is not spent on
        them."""
        self._litellm = await import_litellm()
        await self._parts.warmup()

    async def aclose(self) -> None:
        """Close what this judge built: its Router, its clients and sessions of the running
        loop (once the calls in flight there have finished), and litellm's logging worker
        there. A sibling closes nothing: the judge it came from does."""
        if self._owner is None:
            await self._parts.aclose()

    def close(self) -> None:
        """Discard the Router this judge built (its clients need a loop: ``aclose``)."""
        if self._owner is None:
            self._parts.close()

    async def _caller(self, litellm: Any, model: str) -> Any:
        """What sends ``model``'s request: the Router for a router group, else litellm."""
        if model not in self._routed or self._router is None:
            return litellm.acompletion
        try:
            router = await self._router.router()
        except ConfigError as exc:
            raise self._misconfigured(exc) from None
        return router.acompletion

    @property
    def client_timeout(self) -> float:
        """The timeout litellm's HTTP client gets: past the judgement's deadline, which decides."""
        return self._config.timeout_seconds + _CLIENT_TIMEOUT_MARGIN

    def request(
        self, model: str, prompt: JudgePrompt, *, timeout: float, api_key: str | None
    ) -> dict[str, Any]:
        """The keyword arguments of one ``litellm.acompletion`` call.

        A subclass may add litellm options here (the demo adds ``mock_response``).
        """
        refused = self._refused.get(model, frozenset())
        params: dict[str, Any] = {
            "model": model,
            "messages": with_cached_system(self._config.underlying_models(model), prompt.messages),
            "max_tokens": self._max_tokens.get(model) or self._config.judge_max_tokens_for(model),
            "timeout": timeout,
            "max_retries": 0,
            "num_retries": 0,
        }
        if "temperature" not in refused:
            params["temperature"] = 0
        if not refused & _FORMAT_OPTIONS and self._wants_structured(model):
            params.update(self._format_params(model))
        if self._own_credentials.get(model, False):
            params["api_base"] = self._config.api_base
            params["api_key"] = api_key
        return params

    async def judge(self, prompt: JudgePrompt, *, time_left: float) -> JudgeReply:
        """Ask each model in turn, within ``time_left`` seconds, until one gives a verdict.

        Returns the first readable verdict, else the last unreadable one; raises
        ``JudgeConfigError`` at once on a configuration error, ``CircuitOpenError`` when every
        model's circuit is open, ``TimeoutError`` when time ran out (or the last failure was a
        timeout), and ``JudgeError`` otherwise.
        """
        litellm = self._litellm or await import_litellm()
        self._litellm = litellm
        loop = asyncio.get_running_loop()
        self._parts.watch(loop)
        api_key = self._api_key()
        deadline = loop.time() + time_left - min(_DEADLINE_GUARD, time_left / 100)
        spent: JudgeReply | None = None  # the earlier answers, what they cost together
        unreadable: JudgeReply | None = None
        failures: list[str] = []
        last: BaseException | None = None
        for index, model in enumerate(self._models):
            remaining = deadline - loop.time()
            if remaining <= 0:
                failures.append(f"{model}: no time left")
                last = TimeoutError()
                break
            if self._breaker is not None and not self._breaker.allow(model):
                self._events.debug("judge_circuit_open", model=model)
                failures.append(f"{model}: circuit open")
                continue
            share = self.share_of(index, remaining)
            # litellm keys its cached HTTP clients on the timeout it is given: a per-call
            # value would open a new client and connection on every call. It gets a constant
            # past the judgement timeout; this model's share is enforced here.
            params = self.request(model, prompt, timeout=self.client_timeout, api_key=api_key)
            tracing = self._tracing
            attributes = (
                chat_attributes(model, params, self._config.underlying_models(model))
                if tracing.enabled
                else None
            )
            if model not in self._routed:
                self._capped(litellm, model, params)
            oversized: JudgeReply | None = None
            with (
                tracing.span(f"chat {model}", attributes, client=True) as span,
                capped_call() as ticket,
            ):
                try:
                    call = (
                        await self._caller(litellm, model)
                        if model in self._routed
                        else litellm.acompletion
                    )
                    response = await _cancelled_once(
                        loop.create_task(
                            self._call(litellm, call, model, params, loop.time() + share)
                        )
                    )
                except JudgeConfigError as exc:  # the Router could not be built (logged)
                    span.fail(exc)
                    raise
                except asyncio.CancelledError as exc:
                    # The caller's deadline for this judgement cancels the call from outside,
                    # a hair before or after this model's own share runs out (both timers can
                    # fire in one pass of a busy loop): past the share, the hang is still this
                    # model's timeout and counts against its circuit.
                    if loop.time() >= deadline:
                        hung = TimeoutError()
                        span.fail(hung)
                        self._failed(model, hung, ())
                    else:
                        span.fail(exc)
                    await _closing_pass()
                    raise
                except Exception as exc:
                    answered = ticket.too_large or is_too_large(exc)
                    if not answered:
                        # Recorded before the closing pass: the caller's deadline, a hair
                        # after this model's share, can land in that pass.
                        secrets = self._secrets(api_key)
                        span.fail(exc, secrets)
                        self._failed(model, exc, secrets)
                        failures.append(f"{model}: {describe_error(exc, secrets)}")
                        last = exc
                    if isinstance(exc, TimeoutError):  # this model's share ran out mid-call
                        await _closing_pass()
                    if not answered:
                        continue
                    # The model answered, at a length no verdict needs: unreadable.
                    note = f"the answer passed {MAX_ANSWER_BYTES} bytes and was not read"
                    oversized = JudgeReply(text="", model=model, note=note)
                answer = oversized or read_response(response, model, self._unpriced)
                if tracing.enabled and oversized is None:
                    span.set(
                        answer_attributes(
                            answer.model,
                            answer.prompt_tokens,
                            answer.completion_tokens,
                            answer.cost_usd,
                            finish_reasons(response),
                        )
                    )
            if self._breaker is not None:
                self._breaker.record_success(model)
            reply = answer if spent is None else _added(answer, spent)
            if (await reply.parsed()).readable:
                return reply
            self._events.info("judge_model_unreadable", model=model, note=reply.note)
            spent = unreadable = reply
        if unreadable is not None:
            return unreadable
        message = "; ".join(failures)
        if last is None:
            raise CircuitOpenError(message)
        if classify_failure(last) == "timeout":
            raise TimeoutError(message)
        raise JudgeError(message, last_error_class=type(last).__name__)

    async def _call(
        self, litellm: Any, call: Any, model: str, params: dict[str, Any], until: float
    ) -> Any:
        """One model's call within its share (ending at loop time ``until``), on the
        verifier's own clients."""
        async with asyncio.timeout_at(until):
            with self._clients.using(litellm):
                return await self._send(call, model, params)

    async def _send(self, call: Any, model: str, params: dict[str, Any]) -> Any:
        """One call of ``params``; when the model refuses an option it does not need (a 400
        naming ``temperature`` or ``response_format``: litellm's own ``UnsupportedParamsError``
        for ``temperature=0`` on an o-series model, or the provider's), the same call again
        without it; once that call is answered, the model is never sent the option again."""
        try:
            return await call(**params)
        except Exception as exc:
            refused = _refused_options(exc, params)
            if not refused:
                raise
        response = await call(**{key: value for key, value in params.items() if key not in refused})
        self._refused[model] = self._refused.get(model, frozenset()) | refused
        self._events.debug("judge_option_refused", model=model, options=sorted(refused))
        return response

    def _capped(self, litellm: Any, model: str, params: dict[str, Any]) -> None:
        """Have ``params`` read the answer through the byte-capped session (``answer_cap``)."""
        session = self._sessions.session(litellm)
        if session is None:
            return
        params["shared_session"] = session
        if _provider(model) == "anthropic":  # its route takes a client, not a session
            handler = self._sessions.handler(litellm, self.client_timeout)
            if handler is not None:
                params["client"] = handler

    def _secrets(self, api_key: str | None) -> tuple[str, ...]:
        """What a failure's description must not show: the configured secrets and every key
        read since (this call's ``apiKey``, the keys the Router's builds read)."""
        routed = self._router.resolved_keys if self._router is not None else ()
        return (*self._events.secrets, *((api_key,) if api_key else ()), *routed)

    def _api_key(self) -> str | None:
        try:
            return self._config.resolve_api_key()
        except ConfigError as exc:
            raise self._misconfigured(exc) from None

    def _misconfigured(self, exc: ConfigError) -> JudgeConfigError:
        """Log a configuration error found at call time; the error to raise for it."""
        error = describe_error(exc, self._events.secrets)
        self._events.error(
            "judge_misconfigured",
            model=self._config.model,
            status_code=None,
            error_class=type(exc).__name__,
            error=error,
        )
        return JudgeConfigError(error, last_error_class=type(exc).__name__)

    def _wants_structured(self, model: str) -> bool:
        known = self._structured.get(model)
        if known is None:
            known = all(map(supports_structured_verdict, self._config.underlying_models(model)))
            if _loaded_litellm() is not None:  # before litellm is loaded the answer is a guess
                self._structured[model] = known
        return known

    def _format_params(self, model: str) -> dict[str, Any]:
        """How the verdict schema is sent to ``model``: as ``response_format``, or, on
        Anthropic's route, as the ``output_format`` litellm makes of it (the same request,
        without litellm mapping it again on every call: ``native_structured_format``)."""
        known = self._formats.get(model)
        if known is None:
            native = None
            if model not in self._routed:
                native = native_structured_format(model, self._format)
            known = native or {"response_format": self._format}
            if _loaded_litellm() is not None:
                self._formats[model] = known
        return known

    def share_of(self, index: int, remaining: float) -> float:
        """The seconds the ``index``-th model gets: an even share of what is left among it and
        every later model whose circuit is not open (the last one gets all of it)."""
        return remaining / self._contenders(index)

    def _contenders(self, index: int) -> int:
        """This model and each later one whose circuit is not open: who shares the time."""
        later = self._models[index + 1 :]
        if self._breaker is None:
            return 1 + len(later)
        return 1 + sum(self._breaker.state(model) != "open" for model in later)

    def _failed(self, model: str, exc: Exception, secrets: tuple[str, ...]) -> None:
        """Log one model's failure, count it against its circuit, or raise if it is ours."""
        kind: str = classify_failure(exc)
        fields = {
            "model": model,
            "status_code": getattr(exc, "status_code", None),
            "error_class": type(exc).__name__,
            "error": describe_error(exc, secrets),
        }
        if kind == "config":
            self._events.error("judge_misconfigured", **fields)
            raise JudgeConfigError(
                f"{model}: {fields['error']}", last_error_class=type(exc).__name__
            ) from None
        if model in self._routed and _over_router_limit(exc):
            kind = "router_limit"  # the Router's own rpm/tpm limit: no fault of the model's
        elif self._breaker is not None:
            self._breaker.record_failure(model)
        self._events.warning("judge_model_failed", failure=kind, **fields)


async def _cancelled_once(call: asyncio.Task[Any]) -> Any:
    """The result of ``call`` (a judge call in a task of its own), cancelling it at most once.

    A cancelled HTTP request closes its connection in a few steps (httpcore's clean-up awaits
    a lock and the stream's close); a second cancellation arriving meanwhile ends the clean-up
    before the socket is closed, and the connection stays open at the provider until its
    client is closed. Two are common: the turn's deadline and the judgement's fall a few
    milliseconds after this model's own share, and a busy loop runs them while the first
    clean-up is still under way. So the call runs in its own task, shielded: the caller's
    cancellation cancels it once (not at all when its own share already did), and waits up
    to ``_SETTLE_SECONDS`` for it to finish (cancellations meanwhile are held back, then
    raised). A call still closing after that ends by itself.
    """
    try:
        return await asyncio.shield(call)
    except asyncio.CancelledError:
        if not call.done() and not call.cancelling():
            call.cancel()
        await _settled(call)
        raise


async def _settled(call: asyncio.Task[Any]) -> None:
    """Wait up to ``_SETTLE_SECONDS`` for ``call`` to end, holding back cancellations."""
    for given_up in list(_UNSETTLED):  # a snapshot: run_sync's loop may add from its thread
        if given_up.get_loop().is_closed():  # a host closed it with the call unfinished:
            _UNSETTLED.discard(given_up)  # nothing will run it again, nor let it go
    _UNSETTLED.add(call)
    call.add_done_callback(_forget)
    loop = asyncio.get_running_loop()
    until = loop.time() + _SETTLE_SECONDS
    while not call.done() and (left := until - loop.time()) > 0:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait((call,), timeout=left)


def _forget(call: asyncio.Task[Any]) -> None:
    """A settled call's end, read (it was given up on: nobody else reads it)."""
    _UNSETTLED.discard(call)
    if not call.cancelled():
        call.exception()


async def _closing_pass() -> None:
    """One pass of the event loop after a call was cut off mid-request.

    Cutting the call off closes its connection's transport, but the socket itself is closed
    by a callback the loop runs on its next pass; without this pass the turn could end (and a
    host could stop its loop, or block it) with the hung request's connection still open at
    the provider.
    """
    await asyncio.sleep(0)


def _refused_options(exc: Exception, params: dict[str, Any]) -> frozenset[str]:
    """The optional parameters of ``params`` a 400 names: what the model refuses."""
    if getattr(exc, "status_code", None) != 400:
        return frozenset()
    text = str(exc)
    return frozenset(name for name in _OPTIONAL if name in params and name in text)


def _over_router_limit(exc: Exception) -> bool:
    """Whether the Router refused the call itself: every deployment of the group at its rpm or
    tpm (a 429 that never reached a provider, so it does not count against the circuit)."""
    if getattr(exc, "status_code", None) != 429:
        return False
    text = str(exc)
    return "No deployments available" in text or "over defined rpm limit" in text


def _added(reply: JudgeReply, spent: JudgeReply) -> JudgeReply:
    """``reply`` carrying the tokens and cost of the earlier answers too."""
    return reply.model_copy(
        update={
            "prompt_tokens": reply.prompt_tokens + spent.prompt_tokens,
            "completion_tokens": reply.completion_tokens + spent.completion_tokens,
            "cost_usd": reply.cost_usd + spent.cost_usd,
        }
    )
