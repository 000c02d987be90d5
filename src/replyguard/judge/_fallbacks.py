"""The judge call: one ``litellm.acompletion`` per model, fallbacks in order, cost and tokens.

The ``Judge`` protocol is what the runner needs: given a prompt and the time left, return the
judge's raw text and what it cost. ``LiteLLMJudge`` is the real one; ``replyguard.testing``
ships scripted ones. The runner owns the deadline (``replyguard._deadlines``, which behaves as
``asyncio.timeout``); this module turns off every hidden retry (``max_retries=0``) and never
sleeps, so the deadline is the only clock.

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

Each model's attempt (its request sent, traced, read, or its failure counted) is
``judge/_attempt``'s; with ``judgeAnswer: "verdict_first"`` its answer is streamed and a
leading PASS ends it (``judge/_streamed``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from replyguard.config._schema import VerifierConfig
from replyguard.context._prompt import JudgePrompt
from replyguard.judge._answer_cap import AnswerSessions
from replyguard.judge._attempt import ModelCalls
from replyguard.judge._base import BaseJudge
from replyguard.judge._breaker import CircuitBreaker
from replyguard.judge._clients import ClientScope
from replyguard.judge._failures import Failures, no_answer
from replyguard.judge._litellm import import_litellm
from replyguard.judge._owned import JudgeParts
from replyguard.judge._protocol import JudgeReply, readable
from replyguard.judge._requests import RequestPlan
from replyguard.telemetry._events import Events
from replyguard.telemetry._tracing import NO_TRACING, Tracing

if TYPE_CHECKING:  # loaded when a config names router groups
    from replyguard.judge._router import JudgeRouter

# How long before the deadline the last model's share ends (at most 1 % of the time).
_DEADLINE_GUARD = 0.01


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
        cls,
        config: VerifierConfig,
        events: Events,
        *,
        tracing: Tracing = NO_TRACING,
        redis_down: Callable[[], bool] | None = None,
    ) -> LiteLLMJudge:
        """The judge a ``Verifier`` builds for itself, with the config's circuit breaker
        (kept in the fleet's shared state when ``state`` is configured); ``redis_down``: the
        shared state's word on whether Redis is down now, which its Router routes by."""
        if config.state is not None:
            from replyguard.judge._fleet_breaker import FleetBreaker

            breaker: CircuitBreaker = FleetBreaker.from_config(config.circuit_breaker)
        else:
            breaker = CircuitBreaker.from_config(config.circuit_breaker)
        parts = JudgeParts(
            config, events, router=None, clients=None, sessions=None, redis_down=redis_down
        )
        judge = cls.__new__(cls)
        judge._configure(config, events, breaker, config.model, tracing, parts)
        parts.released_with(judge)
        return judge

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
        self._events = events
        self._breaker = breaker
        self._tracing = tracing
        router = parts.router
        self._key_owner = key_owner
        self._models = config.judge_models
        self._litellm: Any = None  # once imported
        self._routed = frozenset(router.groups & set(self._models)) if router else frozenset()
        self._plan = RequestPlan(config, events, routed=self._routed, key_owner=key_owner)
        failures = Failures(events, breaker, router, self._routed)
        self._calls = ModelCalls(config, parts, self._plan, failures, tracing, self._routed)

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

    @property
    def client_timeout(self) -> float:
        """The timeout litellm's HTTP client gets: past the judgement's deadline, which decides."""
        return self._plan.client_timeout

    def request(
        self, model: str, prompt: JudgePrompt, *, timeout: float, api_key: str | None
    ) -> dict[str, Any]:
        """The keyword arguments of one ``litellm.acompletion`` call (``judge/_requests``).

        A subclass may add litellm options here (the demo adds ``mock_response``).
        """
        return self._plan.params(model, prompt, timeout=timeout, api_key=api_key)

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
        api_key = self._plan.api_key()
        deadline = loop.time() + time_left - min(_DEADLINE_GUARD, time_left / 100)
        spent: JudgeReply | None = None  # the earlier answers, what they cost together
        unreadable: JudgeReply | None = None
        failures: tuple[str, ...] = ()
        last: BaseException | None = None
        models = self._models
        # This frame waits for the call with every turn in flight: nothing in it the collector
        # tracks that a first call does not need (no list of failures until one fails; a
        # range's iterator, where an ``enumerate`` and its tuple iterator are tracked).
        for index in range(len(models)):
            model = models[index]
            remaining = deadline - loop.time()
            if remaining <= 0:
                failures += (f"{model}: no time left",)
                last = TimeoutError()
                break
            if self._breaker is not None and not self._breaker.allow(model):
                self._events.debug("judge_circuit_open", model=model)
                failures += (f"{model}: circuit open",)
                continue
            share = self.share_of(index, remaining)
            # litellm keys its cached HTTP clients on the timeout it is given: a per-call
            # value would open a new client and connection on every call. It gets a constant
            # past the judgement timeout; this model's share is enforced by the attempt.
            params = self.request(model, prompt, timeout=self.client_timeout, api_key=api_key)
            answer = await self._calls.attempt(litellm, model, params, api_key, share, deadline)
            if isinstance(answer, tuple):
                last, said = answer
                failures += (f"{model}: {said}",)
                continue
            if self._breaker is not None:
                self._breaker.record_success(model)
            reply = answer if spent is None else _added(answer, spent)
            if await readable(reply):
                return reply
            self._events.info("judge_model_unreadable", model=model, note=reply.note)
            spent = unreadable = reply
        if unreadable is not None:
            return unreadable
        raise no_answer(failures, last)

    def share_of(self, index: int, remaining: float) -> float:
        """The seconds the ``index``-th model gets: an even share of what is left among it and
        every later model whose circuit is not open (the last one gets all of it)."""
        return remaining / _contenders(self._models[index + 1 :], self._breaker)


def _contenders(later: tuple[str, ...], breaker: CircuitBreaker | None) -> int:
    """A model and each of the ``later`` ones whose circuit is not open: who shares the time."""
    if breaker is None:
        return 1 + len(later)
    return 1 + sum(breaker.state(model) != "open" for model in later)


def _added(reply: JudgeReply, spent: JudgeReply) -> JudgeReply:
    """``reply`` carrying the tokens and cost of the earlier answers too."""
    return reply.model_copy(
        update={
            "prompt_tokens": reply.prompt_tokens + spent.prompt_tokens,
            "completion_tokens": reply.completion_tokens + spent.completion_tokens,
            "cost_usd": reply.cost_usd + spent.cost_usd,
        }
    )
