"""``VerifierConfig``: the operator's JSON file as a validated, frozen pydantic model.

JSON keys are camelCase, Python attributes snake_case. ``VerifierConfig.load(path)`` accepts
either the bare verifier object or a document holding it at ``agents.defaults.verifier``.
Every problem is reported as a ``ConfigError`` naming the file and the key; an input value is
never echoed (it may be a secret).

This module declares the fields (a new key is a field line here, its section's model in a
module of its own); the validators beyond a field's type are ``ConfigRules``'s
(``config/_rules.py``) and the file's reading and error naming are ``config/_loading.py``'s.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, Field, ValidationError
from pydantic.alias_generators import to_camel

from replyguard.config._checks import FILE_MODEL, CheckSpec, HeartbeatCheckSpec
from replyguard.config._exhausted import OnExhausted
from replyguard.config._field_docs import DocumentedSchema
from replyguard.config._keys import ENV_PREFIX, MASK, ApiKey, key_values, resolved_key
from replyguard.config._loading import beside_file, checked_now, read_document, validated
from replyguard.config._panel import PanelConfig, PanelMember
from replyguard.config._router import RouterConfig
from replyguard.config._rubric import check_fits, read_rubric
from replyguard.config._rules import ConfigRules, RunKindsInvalid
from replyguard.config._serve import ServeConfig
from replyguard.config._state import SpendLimit, StateConfig
from replyguard.config._streaming import StreamingConfig
from replyguard.errors import ConfigError

__all__ = [
    "ENV_PREFIX",
    "MASK",
    "CircuitBreakerConfig",
    "RunKind",
    "StreamingConfig",
    "VerifierConfig",
]
DEFAULT_TRIGGER_KEYWORDS = ("done", "completed", "finished", "ready", "here you go")
REASONING_JUDGE_MAX_TOKENS = 4096


Attempts = Annotated[int, Field(ge=1, le=50)]
TimeoutSeconds = Annotated[float, Field(gt=0, le=3600)]
CostUsd = Annotated[float, Field(ge=0)]
LatencyMs = Annotated[int, Field(ge=1)]
TokenBudget = Annotated[int, Field(ge=1000)]
JudgeMaxTokens = Annotated[int, Field(ge=16, le=65536)]
SampleRate = Annotated[float, Field(ge=0, le=1)]
Deliver = Literal["last", "first", "best"]
JudgeAfterChecks = Literal["on_pass", "always", "never"]
Mode = Literal["enforce", "shadow"]
OnSideEffects = Literal["notice", "deliver", "retry"]
ModelNames = Annotated[tuple[str, ...], Field(strict=False)]


class CircuitBreakerConfig(BaseModel):
    """When a judge model is rested after failing, and for how long."""

    model_config = FILE_MODEL

    failure_threshold: int = Field(default=5, ge=1)
    """Consecutive failures (errors, timeouts) that open a model's circuit."""
    cooldown_seconds: float = Field(default=30.0, gt=0, le=86400)
    """How long an open circuit stays open; then one probe call may close it."""


class RunKind(BaseModel):
    """A named budget profile; each key set here overrides the verifier's own for its turns."""

    model_config = FILE_MODEL

    mode: Mode | None = None
    model: str | None = None
    fallback_models: ModelNames | None = None
    max_attempts: Attempts | None = None
    max_cost_usd: CostUsd | None = None
    max_latency_ms: LatencyMs | None = None
    timeout_seconds: TimeoutSeconds | None = None
    verify_all: bool | None = None
    verify_heartbeat: bool | None = None
    trigger_keywords: ModelNames | None = None
    sample_rate: SampleRate | None = None
    context_token_budget: TokenBudget | None = None
    judge_max_tokens: JudgeMaxTokens | None = None
    judge_after_checks: JudgeAfterChecks | None = None
    deliver: Deliver | None = None
    on_exhausted: OnExhausted | None = None
    streaming: StreamingConfig | None = None
    on_side_effects: OnSideEffects | None = None
    panel: PanelConfig | None = None

    def overrides(self) -> dict[str, Any]:
        """The keys this profile sets (an explicit null included), as attribute names."""
        return {name: getattr(self, name) for name in self.model_fields_set}


class VerifierConfig(ConfigRules):
    """The verifier's configuration. Every attribute has the contract's default."""

    model_config = FILE_MODEL

    enabled: bool = False
    """Off unless switched on. ``Verifier.verify()`` judges even when off."""
    mode: Mode = "enforce"
    """``"shadow"``: judge and log, but never retry; a FAIL delivers the reply unchanged with
    status ``flagged``, so a team can measure the judge before enforcing it."""
    router: RouterConfig | None = None
    """Judge deployments behind a litellm Router; ``model`` then names one of its groups."""
    model: str = "anthropic/claude-sonnet-4-5"
    """The judge model, in litellm naming (or a ``router`` group)."""
    agent_model: str | None = None
    """The agent's model, for the cross-family check."""
    require_cross_family: bool = False
    """Refuse a judge of the agent's model family (``false``: warn)."""
    fallback_models: ModelNames = ()
    """Judge models tried in order when the judge call errors."""
    api_base: str | None = None
    """Base URL passed to litellm (a proxy, or a test server)."""
    api_key: ApiKey = None
    """API key passed to litellm; ``"env:NAME"`` reads the variable at call time."""
    verify_all: bool = False
    """Verify every final reply, keywords or not."""
    verify_heartbeat: bool = False
    """Verify every heartbeat reply, keywords or not."""
    max_attempts: Attempts = 3
    """Attempts per turn, the first reply included."""
    trigger_keywords: tuple[str, ...] = Field(default=DEFAULT_TRIGGER_KEYWORDS, strict=False)
    """Words and phrases that make a reply worth judging (whole-word, case-insensitive)."""
    timeout_seconds: TimeoutSeconds = 30.0
    """Deadline of one judgement, fallbacks included; then fail open."""
    context_token_budget: TokenBudget = 8000
    """The whole judge prompt never exceeds this many tokens."""
    response_token_cap: int = Field(default=3000, ge=50)
    """Longer replies keep head and tail, with a marked gap."""
    rules_token_cap: int = Field(default=2000, ge=0)
    """User rules beyond this are cut, marked."""
    history_turns: int = Field(default=5, ge=0)
    """Most recent history messages shown to the judge."""
    workspace_dir: str | None = None
    """Where ``rulesFiles`` and ``heartbeatFile`` are read from (relative to the config file)."""
    rules_files: tuple[str, ...] = Field(default=("AGENTS.md", "SOUL.md"), strict=False)
    """Rules files, read inside ``workspaceDir`` only."""
    heartbeat_file: str = "HEARTBEAT.md"
    """The heartbeat task list, inside ``workspaceDir``."""
    rubric_file: str | None = None
    """The operator's own judging criteria, inside ``workspaceDir``: added to the built-in
    rubric (the same on every call, so still cached). Refused when the config loads if it is
    empty or larger than a quarter of the smallest ``contextTokenBudget``."""
    categories: dict[str, str] = Field(default_factory=dict)
    """Custom FAIL categories, ``{name: retry guidance}``: names lower-case snake_case, never a
    built-in or ``awaiting_user``. The judge is shown them; on a FAIL in one the agent gets its
    guidance."""
    max_cost_usd: CostUsd | None = None
    """Per-turn ceiling on spend (judge calls, plus agent retries that report their cost):
    a retry is not started when one more judgement at the last call's cost would pass it."""
    judge_max_tokens: JudgeMaxTokens = 512
    """Verdict length limit; when not set, 4096 for reasoning judge models."""
    judge_answer: Literal["reasoning_first", "verdict_first"] = "reasoning_first"
    """The order of the judge's answer: reasoning, then the verdict; or ``"verdict_first"``:
    the verdict first, the answer streamed and a PASS ending the call at once (no reasoning
    waited for or paid), a FAIL read to its end for its feedback (docs/judge-answer.md)."""
    log_content: bool = False
    """Put user text, replies and feedback into log events (and trace spans)."""
    tracing: bool = False
    """OpenTelemetry spans per turn, attempt, check and judge call, through the global tracer
    provider (needs the ``otel`` extra)."""
    checks: tuple[CheckSpec, ...] = Field(
        default=(HeartbeatCheckSpec.model_construct(type="heartbeat"),), strict=False
    )
    """Deterministic checks run before the judge, in parallel (each type: docs/checks.md)."""
    judge_after_checks: JudgeAfterChecks = "on_pass"
    """Call the judge only when every check passed, always, or never (checks alone decide)."""
    max_latency_ms: LatencyMs | None = None
    """Deadline of the whole verification of a turn (judge calls, checks, agent retries);
    when it passes, the best reply so far is delivered (``failed_open``, ``latency_budget``)."""
    run_kinds: dict[str, RunKind] = Field(default_factory=dict)
    """Named budget profiles, chosen per turn by ``Turn.run_kind``."""
    circuit_breaker: CircuitBreakerConfig = CircuitBreakerConfig.model_construct()
    """Rest a judge model after repeated failures; turns then fail open at once."""
    max_concurrent_judge_calls: int | None = Field(default=None, ge=1)
    """At most this many judge calls at once per verifier; more wait within their deadline."""
    sample_rate: SampleRate = 1.0
    """With ``verifyAll``, the share of turns judged (chosen by the turn's id, repeatably)."""
    deliver: Deliver = "last"
    """What an exhausted turn delivers: the last reply, the first, or the best (the last that
    passed every deterministic check)."""
    on_exhausted: OnExhausted = "deliver"
    """``"raise"``: an exhausted turn raises ``VerificationExhausted`` instead of delivering.
    An object chooses per FAIL category (the last FAIL's): ``{"grounding": "I could not
    complete that; a colleague will follow up.", "refusal": "raise", "*": "deliver"}``; a
    text other than ``deliver`` or ``raise`` is the operator's message, delivered instead of
    every attempt (status ``exhausted``, reason ``operator_message``); ``"*"`` is every other
    category (default ``deliver``). Verifier faults and budgets still fail open."""
    ledger_path: str | None = None
    """Append one JSON line per verified turn to this file (relative to the config file)."""
    on_suspected_injection: Literal["annotate", "fail"] = "annotate"
    """A reply that addresses the judge: ``"annotate"`` marks the verdict and the log event;
    ``"fail"`` makes the attempt a ``rule_violation`` FAIL without asking the judge."""
    side_effect_tools: tuple[str, ...] = Field(default=(), strict=False)
    """Tool-name patterns (shell-style globs, case-sensitive: ``send_*``, ``*_create``,
    ``deploy*``) of tools whose calls change the world; a tool call the agent marks
    ``side_effect=False`` is never one, whatever the patterns say."""
    on_side_effects: OnSideEffects = "notice"
    """A FAIL after the turn made successful side-effecting tool calls: ``"notice"`` retries
    with a list of what is already done (not to be repeated); ``"deliver"`` does not retry and
    delivers the reply as it is, status ``flagged``, reason ``side_effects``; ``"retry"``
    retries as after any FAIL."""
    hook_timeout_seconds: float = Field(default=2.0, gt=0, le=60)
    """How long a hook may run before it is abandoned (it never changes the outcome)."""
    agent_threads: int = Field(default=32, ge=1, le=1024)
    """Threads of the verifier's own pool for sync agent callables (asyncio's default executor
    stays free for checks and the host); more sync agents at once wait for a thread."""
    streaming: StreamingConfig = StreamingConfig.model_construct()
    """How ``Verifier.stream`` delivers a streamed reply: ``mode`` (``"buffer"`` or
    ``"release"``) and ``holdBackChars`` (docs/streaming.md). A run kind's ``streaming``
    replaces the whole object."""
    state: StateConfig | None = None
    """Share the circuit breaker and the spend limits with every instance using the same
    Redis (a fleet of backends); without it, each process keeps its own."""
    spend_limits: tuple[SpendLimit, ...] = Field(default=(), strict=False)
    """Ceilings on judge spend per UTC-aligned window (fleet-wide with ``state``): a judgement
    that would pass one is not made (``failed_open``, ``spend_limit``)."""
    serve: ServeConfig | None = None
    """``replyguard serve``: ``upstream`` (the agent's model endpoint), ``apiKeys`` (the
    clients' bearer keys), ``maxBodyBytes`` (docs/serve.md)."""
    panel: PanelConfig | None = None
    """Judge with a panel of models instead of ``model`` (usually a run kind's key, for high
    stakes): ``models`` (two or more, asked concurrently within the same deadline), ``rule``
    (``"any_fail"`` or ``"majority"``) and ``minAnswers`` (docs/panels.md)."""

    # -- derived values ------------------------------------------------------------------

    def for_run_kind(self, name: str | None) -> VerifierConfig:
        """This config with the named profile's keys applied (itself for None or no such).

        The merged config is validated like any other, so a profile cannot smuggle in a value
        the verifier itself would refuse.
        """
        profile = self.run_kinds.get(name) if name is not None else None
        if profile is None:
            return self
        merged = {
            **self.model_dump(exclude_unset=True, exclude={"run_kinds"}),
            **profile.overrides(),
        }
        return type(self).model_validate(merged)

    def model_post_init(self, context: Any, /) -> None:
        """Every run kind, merged over this config, must validate like the config itself."""
        problems: list[tuple[str, str]] = []
        for name in self.run_kinds:
            try:
                self.for_run_kind(name)
            except ValidationError as exc:
                for error in exc.errors(include_input=False, include_url=False):
                    path = ".".join(to_camel(str(part)) for part in error["loc"])
                    message = error["msg"].removeprefix("Value error, ")
                    problems.append((f"runKinds.{name}.{path}", message))
        if problems:
            raise RunKindsInvalid(problems)

    def operator_rubric(self) -> str:
        """The rubric file's text, read now ("" without ``rubricFile``); ``ConfigError`` (key
        ``rubricFile``) when it is outside ``workspaceDir``, missing, empty, or larger than a
        quarter of the smallest ``contextTokenBudget`` (the verifier's or a run kind's), or
        when with the custom ``categories`` it leaves too little of that budget for the review.
        """
        if self.rubric_file is None and not self.categories:
            return ""
        kinds = (self.for_run_kind(name) for name in self.run_kinds)
        budget = min(c.context_token_budget for c in (self, *kinds))
        criteria = (
            read_rubric(self.workspace_dir, self.rubric_file, budget)
            if self.rubric_file is not None
            else ""
        )
        check_fits(criteria, self.categories, budget)
        return criteria

    @property
    def judge_models(self) -> tuple[str, ...]:
        """The judge model, then each fallback, in the order they are tried; with a ``panel``,
        each member's model and fallbacks instead."""
        if self.panel is not None:
            return tuple(m for p in self.panel.members for m in (p.model, *p.fallback_models))
        return (self.model, *self.fallback_models)

    def member_config(self, member: PanelMember) -> VerifierConfig:
        """This config as a panel member judges with it: the member's model and fallbacks, no
        panel (not validated again: every part of it already was)."""
        update = {"model": member.model, "fallback_models": member.fallback_models, "panel": None}
        return self.model_copy(update=update)

    def judge_max_tokens_for(self, model: str) -> int:
        """``judgeMaxTokens``, or 4096 for a reasoning model when the key was not set."""
        from replyguard._families import is_reasoning_model

        reasoning = any(is_reasoning_model(m) for m in self.underlying_models(model))
        if "judge_max_tokens" not in self.model_fields_set and reasoning:
            return max(self.judge_max_tokens, REASONING_JUDGE_MAX_TOKENS)
        return self.judge_max_tokens

    @property
    def effective_judge_max_tokens(self) -> int:
        """``judgeMaxTokens`` as it applies to the primary judge model."""
        return self.judge_max_tokens_for(self.model)

    def resolve_api_key(self) -> str | None:
        """The API key to send, reading ``env:NAME`` now. Raises ``ConfigError`` if unset."""
        return resolved_key(self.api_key, "apiKey")

    def secrets(self) -> tuple[str, ...]:
        """Every secret value this config may send, for redaction (env values read now)."""
        router = self.router.secrets() if self.router is not None else ()
        state = self.state.secrets() if self.state is not None else ()
        serve = self.serve.secrets() if self.serve is not None else ()
        return (*key_values(self.api_key), *router, *state, *serve)

    def underlying_models(self, model: str) -> tuple[str, ...]:
        """The models behind a judge model name: a router group's deployments, or itself."""
        if self.router is not None:
            return self.router.groups.get(model, (model,))
        return (model,)

    @property
    def judge_deployment_models(self) -> tuple[str, ...]:
        """Every model the judge may really call (router groups expanded), in order."""
        return tuple(m for name in self.judge_models for m in self.underlying_models(name))

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON Schema of the config file (camelCase keys, ``$schema`` allowed)."""
        schema = cls.model_json_schema(
            by_alias=True, mode="validation", schema_generator=DocumentedSchema
        )
        schema["properties"] = {"$schema": {"type": "string"}, **schema["properties"]}
        schema["title"] = "replyguard verifier config"
        return schema

    # -- loading ---------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Any, *, source: str | None = None) -> Self:
        """Validate a parsed JSON object, raising ``ConfigError`` that names each bad key."""
        if not isinstance(data, dict):
            raise ConfigError(source, [("", "the verifier config must be a JSON object")])
        return validated(cls, data, source=source, schema=cls.json_schema)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Self:
        """Read a JSON config file: the bare verifier object or ``agents.defaults.verifier``.

        A relative ``workspaceDir`` is taken relative to the file's folder.
        """
        data, prefix, source = read_document(path)
        config = validated(cls, data, source=source, schema=cls.json_schema, prefix=prefix)
        config = beside_file(config, path)
        checked_now(config.operator_rubric, source, prefix)
        return config
