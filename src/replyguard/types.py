"""The values that flow through one verified turn.

``Turn`` goes in, the agent produces ``Reply`` values, the judge produces ``Verdict`` values,
and ``Outcome`` comes out. All of them are frozen pydantic models; the enums are ``str``
enums so they serialise as their plain values.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from replyguard._frozen import _FieldSignature, _Frozen
from replyguard._frozen import replaced as replaced  # the turn's cheap copy, from here too


class SkipReason(StrEnum):
    """Why a reply was delivered without being judged (deterministic pre-checks)."""

    TOOL_CALLS = "tool_calls"
    MESSAGING_TOOL_SENT = "messaging_tool_sent"
    BLOCK_STREAMING_SENT = "block_streaming_sent"
    EMPTY_RESPONSE = "empty_response"
    ERROR_RESPONSE = "error_response"


class FailCategory(StrEnum):
    """What kind of failure the judge found."""

    GOAL_MISSED = "goal_missed"
    INCOMPLETE = "incomplete"
    RULE_VIOLATION = "rule_violation"
    TONE_MISMATCH = "tone_mismatch"
    REFUSAL = "refusal"
    GROUNDING = "grounding"


class Status(StrEnum):
    """How a turn ended."""

    PASSED = "passed"
    SKIPPED = "skipped"
    NOT_TRIGGERED = "not_triggered"
    DISABLED = "disabled"
    FAILED_OPEN = "failed_open"
    EXHAUSTED = "exhausted"
    FLAGGED = "flagged"


class Reason(StrEnum):
    """Why a turn failed open (or stopped early)."""

    JUDGE_ERROR = "judge_error"
    JUDGE_TIMEOUT = "judge_timeout"
    UNREADABLE_VERDICT = "unreadable_verdict"
    COST_BUDGET = "cost_budget"
    SAME_FAMILY = "same_family"
    AGENT_ERROR = "agent_error"
    INTERNAL_ERROR = "internal_error"
    LATENCY_BUDGET = "latency_budget"
    CIRCUIT_OPEN = "circuit_open"
    SPEND_LIMIT = "spend_limit"
    STAGNANT = "stagnant"
    SAMPLED_OUT = "sampled_out"
    SIDE_EFFECTS = "side_effects"
    MISSING_CREDENTIALS = "missing_credentials"
    OPERATOR_MESSAGE = "operator_message"
    """An exhausted turn delivered the operator's fixed message for its last FAIL's category
    (``onExhausted``) instead of any attempt."""


class ToolCallRecord(_Frozen):
    """One entry of the turn's tool ledger."""

    name: str
    """The tool's name."""
    arguments: Any = None
    """The arguments it was called with (a dict, a JSON string, or anything the agent kept)."""
    succeeded: bool = True
    """Whether the call succeeded."""
    side_effect: bool | None = None
    """Whether the call changes the world (sends, creates, deploys): ``True`` or ``False``
    as the agent says, or ``None`` to let the config's ``sideEffectTools`` patterns decide
    (an explicit ``False`` wins over a matching pattern)."""
    result: Any = None
    """What the tool returned (text, or any JSON value), when the agent's runtime kept it;
    ``None`` when unknown. The judge sees it as evidence, and the ``figures`` check grounds
    the reply's figures in it. A value JSON cannot hold (an object, a date) is kept as its
    JSON-ready form (``str()`` of what JSON cannot write), so an ``Outcome`` always dumps."""

    @field_validator("result", mode="before")
    @classmethod
    def _json_ready(cls, value: Any) -> Any:
        if value is None or isinstance(value, str | int | float | bool):
            return value
        try:
            return json.loads(json.dumps(value, default=str))
        except (TypeError, ValueError, RecursionError):  # keys JSON cannot hold, cycles
            return repr(value)


class RunMeta(_Frozen):
    """What the agent's runtime knows about how a reply was produced."""

    stop_reason: str | None = None
    """The model's finish reason (``stop``, ``length``, ``tool_calls``, ``error``, ...)."""
    pending_tool_calls: int = Field(default=0, ge=0)
    """Tool calls the reply asks for and that have not run yet (a list is counted)."""
    sent_via_messaging_tool: bool = False
    """The content already reached the user through a messaging tool."""
    streamed_block_keys: frozenset[str] = frozenset()
    """Keys of content blocks already streamed to the user."""
    duration_ms: float | None = None
    """How long the agent took for this reply."""
    tool_calls: tuple[ToolCallRecord, ...] = ()
    """The turn's tool ledger: what was called, with what, and whether it succeeded."""
    usage: dict[str, Any] | None = None
    """Token usage of the agent's own call, when known."""
    cost_usd: float | None = Field(default=None, ge=0)
    """Cost of the agent's own call, when known."""
    error: str | None = None
    """Set by the agent's runtime when the reply is an error report rather than an answer."""

    @field_validator("pending_tool_calls", mode="before")
    @classmethod
    def _count_list(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return len(value)
        return value


@functools.cache
def _no_meta() -> RunMeta:
    """The empty metadata that every reply given none shares (built on first use, not at
    import: building a model's validator takes milliseconds)."""
    return RunMeta()


class Reply(_Frozen):
    """One reply of the agent."""

    text: str
    """The reply's text, as it would be delivered."""
    meta: RunMeta = Field(default_factory=_no_meta)
    """How it was produced."""


class Turn(BaseModel):
    """One user turn to run or judge."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    __signature__ = _FieldSignature()  # as in _Frozen

    user_message: str
    """What the user asked."""
    history: list[dict[str, Any]] = Field(default_factory=list)
    """Earlier OpenAI-style messages, oldest first. Never mutated by replyguard."""
    rules: list[str] = Field(default_factory=list)
    """Extra rules given in code, on top of the workspace's rules files."""
    agent_instructions: str | None = None
    """The agent's own system prompt; lowest priority in the judge's context."""
    heartbeat: bool = False
    """This turn is a heartbeat run (a periodic wake-up working through HEARTBEAT.md)."""
    agent_model: str | None = None
    """The agent's model for this turn; overrides ``agentModel`` from the config."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Anything the caller wants to carry along (shown to the judge as run metadata)."""
    evidence: list[str] = Field(default_factory=list)
    """Retrieved context the reply may draw on (documents, search hits, database rows), one
    passage per entry, most relevant first; a passage may start with its source ("orders.db:
    ..."). Shown to the judge in its own evidence section, with the tool results, and read by
    the ``figures`` check."""
    id: str | None = None
    """An identifier of the turn, for logs, datasets, ``sampleRate`` and idempotency keys;
    ``run`` and ``stream`` give a turn without one (or with a blank one) a fresh id
    (``turn-…``)."""
    run_kind: str | None = None
    """The name of a ``runKinds`` profile whose budgets apply to this turn."""
    agent_id: str | None = None
    """Which agent produced the turn, for the ledger."""


class Verdict(_Frozen):
    """One judgement of one reply."""

    passed: bool
    """Whether the reply may be delivered as it is."""
    category: FailCategory | str | None = None
    """The failure's category, when the judge named a known one: a ``FailCategory`` for a
    built-in, the name (``str``) of a category the config's ``categories`` adds."""
    feedback: str | None = None
    """What the judge says must change (FAIL) or, rarely, a note on a PASS."""
    reasoning: str | None = None
    """The judge's reasoning before its verdict line."""
    raw: str | None = None
    """The judge's raw text."""
    readable: bool = True
    """False when no verdict could be read: the verdict is then a fail-open PASS."""
    fail_open_reason: Reason | None = None
    """Set when this verdict is a fail-open PASS because the judgement itself went wrong."""
    error: str | None = None
    """A short, redacted description of what went wrong, for fail-open verdicts."""
    model: str | None = None
    """The judge model that answered."""
    prompt_tokens: int = 0
    """Prompt tokens of the judge call(s)."""
    completion_tokens: int = 0
    """Completion tokens of the judge call(s)."""
    cost_usd: float = 0.0
    """What the judgement cost."""
    latency_ms: float = 0.0
    """How long the judgement took."""
    decisive: bool = False
    """The verdict was reached without a judge model (for example by a deterministic rule)."""
    suspected_injection: tuple[str, ...] = ()
    """Why the reply looks like it addresses the judge (reason codes; empty when clean)."""
    awaiting_user: bool = False
    """A PASS whose reply rightly waits for the user: one necessary clarifying question, or a
    justified refusal that says why (the judge marked it ``PASS [awaiting_user]``). Never set
    on a FAIL."""
    shared_state: Literal["degraded"] | None = None
    """``"degraded"`` when the judgement was decided on this instance's own state because the
    fleet's shared state (Redis) did not answer."""
    members: tuple[Verdict, ...] = ()
    """A judge panel's verdict: each member's own verdict, in the panel's order (its ``model``
    names the member as configured; a member that did not answer has a fail-open verdict).
    Empty for a single judge."""

    @model_validator(mode="after")
    def _awaiting_only_on_pass(self) -> Verdict:
        if self.awaiting_user and not self.passed:
            raise ValueError("a FAIL verdict is never awaiting_user")
        return self

    @field_validator("category", mode="before")
    @classmethod
    def _built_in_category(cls, value: Any) -> Any:
        """A built-in category's name is always its ``FailCategory``."""
        if isinstance(value, str) and not isinstance(value, FailCategory):
            try:
                return FailCategory(value)
            except ValueError:
                return value
        return value


class CheckResult(_Frozen):
    """What one deterministic check found about one reply."""

    name: str
    """The check's name (the feedback is shown under it)."""
    passed: bool
    """Whether the reply passed this check."""
    category: FailCategory | None = None
    """The failure's category (None on a pass)."""
    feedback: str | None = None
    """What must change, for the agent (None on a pass)."""
    decisive: bool = False
    """A pass that settles the turn without a judge call."""
    value: Any = None
    """A parsed value the check produced (for example the JSON object), if any."""
    deliver_text: str | None = None
    """Text to deliver instead of the reply's own (for example repaired JSON)."""
    error: str | None = None
    """Set when the check itself crashed or timed out (redacted, one line)."""
    required: bool = False
    """Whether the check was marked required (a crash then counts as a FAIL)."""


class Attempt(_Frozen):
    """One reply of the agent within a turn, and what was decided about it."""

    number: int
    """1 for the first reply, 2 for the first retry, and so on."""
    reply: Reply
    """The reply."""
    verdict: Verdict | None = None
    """The judge's verdict, when this reply was judged."""
    skip_reason: SkipReason | None = None
    """Why this reply was not judged, when a pre-check skipped it."""
    checks: tuple[CheckResult, ...] = ()
    """What each deterministic check found, in the order the checks were given."""


class TokenUsage(_Frozen):
    """The tokens one turn used, summed over every attempt: the agent's (from each reply's
    ``RunMeta.usage``, where the agent reports it) and the judge's (from each verdict)."""

    agent_prompt_tokens: int = 0
    """Prompt (input) tokens of the agent's calls that reported usage."""
    agent_completion_tokens: int = 0
    """Completion (output) tokens of the agent's calls that reported usage."""
    judge_prompt_tokens: int = 0
    """Prompt tokens of every judge call of the turn."""
    judge_completion_tokens: int = 0
    """Completion tokens of every judge call of the turn."""

    @property
    def agent_tokens(self) -> int:
        """The agent's prompt and completion tokens."""
        return self.agent_prompt_tokens + self.agent_completion_tokens

    @property
    def judge_tokens(self) -> int:
        """The judge's prompt and completion tokens."""
        return self.judge_prompt_tokens + self.judge_completion_tokens

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens, agent and judge."""
        return self.agent_prompt_tokens + self.judge_prompt_tokens

    @property
    def completion_tokens(self) -> int:
        """Completion tokens, agent and judge."""
        return self.agent_completion_tokens + self.judge_completion_tokens

    @property
    def total_tokens(self) -> int:
        """Every token of the turn, agent and judge."""
        return self.agent_tokens + self.judge_tokens


class Outcome(_Frozen):
    """The result of one verified turn."""

    response: str
    """The text to deliver."""
    status: Status
    """How the turn ended."""
    reason: Reason | None = None
    """Why it failed open or stopped early."""
    attempts: tuple[Attempt, ...] = ()
    """Every reply of the agent in this turn, in order, with its verdict."""
    skip_reason: SkipReason | None = None
    """Why the delivered reply was not judged, when skipped."""
    cost_usd: float = 0.0
    """Judge spend plus the agent's own spend where the agent reported it."""
    judge_cost_usd: float = 0.0
    """Judge spend alone."""
    usage: TokenUsage = Field(default_factory=TokenUsage)
    """Tokens of the whole turn, agent and judge, every attempt (``cost_usd``'s counterpart)."""
    latency_ms: float = 0.0
    """Wall time of the whole turn, agent calls included."""
    parsed: Any = None
    """A value a check parsed from the delivered reply (the JSON object of ``JsonCheck``)."""
    awaiting_user: bool = False
    """The delivered reply passed as one that rightly waits for the user (a clarifying
    question or a justified refusal); the status is then ``passed``."""

    @model_validator(mode="after")
    def _awaiting_only_when_passed(self) -> Outcome:
        if self.awaiting_user and self.status != Status.PASSED:
            raise ValueError("only a passed outcome is awaiting_user")
        return self

    @property
    def verdicts(self) -> tuple[Verdict, ...]:
        """The verdicts of the judged attempts, in order."""
        return tuple(a.verdict for a in self.attempts if a.verdict is not None)


# -- what ``Verifier.stream`` yields ------------------------------------------------------------
# Plain frozen dataclasses, not pydantic models: one is made per delta of a streamed reply, and
# building one must cost well under a microsecond.


@dataclass(frozen=True, slots=True)
class Delta:
    """Text for the user: append it to what is shown."""

    text: str
    """The next piece of the reply (never empty)."""


@dataclass(frozen=True, slots=True)
class Retract:
    """Text already shown must go: clear what this turn showed since the last ``Retract``.

    The deltas that follow replace it."""

    attempt: int
    """The attempt whose text is withdrawn (1 for the first reply)."""
    reason: str
    """Why, in a word or two: the failing check's name, the FAIL category, or the status that
    chose another reply to deliver (``exhausted``, ``failed_open``)."""


@dataclass(frozen=True, slots=True)
class Done:
    """The turn is over; nothing follows."""

    outcome: Outcome
    """The same ``Outcome`` as ``Verifier.run`` gives: its ``response`` is exactly the text of
    the deltas after the last ``Retract``."""


@dataclass(frozen=True, slots=True)
class Progress:
    """What the turn is doing now, for a UI to say while no text is shown (``"buffer"`` mode
    shows none until a reply passed). Only ``Verifier.stream(..., progress=True)`` yields it.

    It carries no text of the reply: the deltas alone spell the ``Outcome``'s response."""

    phase: Literal["writing", "checking", "revising"]
    """``"writing"``: the agent writes the first reply; ``"checking"``: a complete reply is
    being checked and judged; ``"revising"``: the agent writes a retry after the feedback."""
    attempt: int
    """The attempt the phase is about (1 for the first reply)."""


StreamEvent = Delta | Retract | Done
"""One event of ``Verifier.stream``."""
