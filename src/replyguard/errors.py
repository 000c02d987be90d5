"""replyguard's exceptions.

::

    ReplyguardError                 base of everything replyguard raises on purpose
    ├── ConfigError (ValueError)    a config file or value is wrong; names the file and the key
    ├── CrossFamilyError            the judge is of the agent's model family and
    │                               ``requireCrossFamily`` is on
    ├── JudgeError                  no judge model answered (raised by a ``Judge``, caught by the
    │   │                           runner, which fails open; its text is already redacted)
    │   ├── JudgeConfigError        the provider refused the call as misconfigured (any 4xx but
    │   │                           408, 409, 429): no fallback is tried; logged at ERROR
    │   └── CircuitOpenError        every judge model's circuit breaker is open
    └── VerificationExhausted       every attempt failed and ``onExhausted`` is ``"raise"``;
                                    carries the outcome, never model text in its message

Faults inside a verification never raise: they fail open and are reported on the
``Outcome``. Only an agent's own exception on the first attempt propagates, unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replyguard.types import Attempt, Outcome, Reply


class ReplyguardError(Exception):
    """Base class of replyguard's exceptions."""


class ConfigError(ReplyguardError, ValueError):
    """A configuration file or value is invalid.

    ``path`` is the file (or None for a config built in code); ``problems`` lists
    ``(key, message)`` pairs, the key in the file's own camelCase dotted form.
    """

    def __init__(self, path: str | None, problems: list[tuple[str, str]]) -> None:
        self.path = path
        self.problems = problems
        where = f"{path}: " if path else ""
        lines = [f"{key}: {message}" if key else message for key, message in problems]
        if len(lines) == 1:
            text = f"{where}invalid verifier config: {lines[0]}"
        else:
            text = f"{where}invalid verifier config:\n  " + "\n  ".join(lines)
        super().__init__(text)


class CrossFamilyError(ReplyguardError):
    """The judge model is of the same family as the agent's model."""

    def __init__(self, judge_model: str, agent_model: str, family: str) -> None:
        self.judge_model = judge_model
        self.agent_model = agent_model
        self.family = family
        super().__init__(
            f"judge model {judge_model!r} and agent model {agent_model!r} are both of the "
            f"{family} family; requireCrossFamily forbids this: choose a judge of another family"
        )


class JudgeError(ReplyguardError):
    """No judge model answered. The message lists each model's (redacted) error."""

    def __init__(self, message: str, *, last_error_class: str | None = None) -> None:
        self.last_error_class = last_error_class
        super().__init__(message)


class JudgeConfigError(JudgeError):
    """The provider refused the judge call as misconfigured (bad key, bad request, no model)."""


class CircuitOpenError(JudgeError):
    """Every judge model is cooling down after repeated failures."""


class VerificationExhausted(ReplyguardError):
    """Every attempt failed and ``onExhausted`` is ``"raise"``.

    Carries the whole ``outcome`` (attempts, verdicts, cost, the last reply). The message
    holds only counts, categories and cost: never the judge's or the agent's text.

    Attributes:
        outcome: the turn's ``Outcome`` (status ``exhausted``), as ``run`` would have returned.
        attempts: ``outcome.attempts``, every reply with its verdict.
        categories: each verdict's category value (``str``), None for an uncategorised FAIL.
        cost_usd: ``outcome.cost_usd``.
        last_reply: the ``Reply`` (``.text`` and ``.meta``, not a ``str``) that the
            ``deliver`` policy chose, the one ``run`` would have delivered; None only for an
            outcome without attempts.
    """

    outcome: Outcome
    attempts: tuple[Attempt, ...]
    categories: tuple[str | None, ...]
    cost_usd: float
    last_reply: Reply | None

    def __init__(self, outcome: Outcome, last_reply: Reply | None = None) -> None:
        self.outcome = outcome
        self.attempts = outcome.attempts
        self.categories = tuple(
            str(v.category) if v.category is not None else None for v in outcome.verdicts
        )
        self.cost_usd = outcome.cost_usd
        fallback = outcome.attempts[-1].reply if outcome.attempts else None
        self.last_reply = last_reply if last_reply is not None else fallback
        reason = f", {outcome.reason.value}" if outcome.reason is not None else ""
        named = ", ".join(c or "uncategorised" for c in self.categories) or "none"
        super().__init__(
            f"verification exhausted after {len(outcome.attempts)} attempt(s){reason}; "
            f"categories: {named}; cost ${outcome.cost_usd:.6f}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.outcome, self.last_reply))
