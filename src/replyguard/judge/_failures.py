"""What a litellm judge makes of a model's failed call: logged with its secrets redacted,
counted against the model's circuit (unless the Router refused the call itself), raised at once
when it is a configuration error (a 4xx but 408, 409 and 429); and, when no model answered,
the error the judgement raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from replyguard.errors import CircuitOpenError, JudgeConfigError, JudgeError
from replyguard.judge._answer_cap import MAX_ANSWER_BYTES, is_too_large
from replyguard.judge._breaker import CircuitBreaker
from replyguard.judge._litellm import classify_failure
from replyguard.judge._protocol import JudgeReply
from replyguard.judge._settling import closing_pass
from replyguard.telemetry._events import Events, describe_error

if TYPE_CHECKING:  # loaded when a config names router groups
    from replyguard.judge._router import JudgeRouter


class Failures:
    """One litellm judge's record of its models' failures."""

    def __init__(
        self,
        events: Events,
        breaker: CircuitBreaker | None,
        router: JudgeRouter | None,
        routed: frozenset[str],
    ) -> None:
        self._events = events
        self._breaker = breaker
        self._router = router
        self._routed = routed

    def secrets(self, api_key: str | None) -> tuple[str, ...]:
        """What a failure's description must not show: the configured secrets and every key
        read since (this call's ``apiKey``, the keys the Router's builds read)."""
        routed = self._router.resolved_keys if self._router is not None else ()
        return (*self._events.secrets, *((api_key,) if api_key else ()), *routed)

    async def not_answered(
        self, model: str, exc: Exception, span: Any, too_large: bool, api_key: str | None
    ) -> JudgeReply | tuple[Exception, str]:
        """What a call that raised ``exc`` gave: an unreadable answer when the model answered
        past the byte cap, else its failure (logged, counted against its circuit) with what
        to say of it."""
        if too_large or is_too_large(exc):
            if isinstance(exc, TimeoutError):
                await closing_pass()
            # The model answered, at a length no verdict needs: unreadable.
            note = f"the answer passed {MAX_ANSWER_BYTES} bytes and was not read"
            return JudgeReply(text="", model=model, note=note)
        # Recorded before the closing pass: the caller's deadline, a hair after this model's
        # share, can land in that pass.
        secrets = self.secrets(api_key)
        span.fail(exc, secrets)
        self.failed(model, exc, secrets)
        if isinstance(exc, TimeoutError):  # this model's share ran out mid-call
            await closing_pass()
        return exc, describe_error(exc, secrets)

    def failed(self, model: str, exc: Exception, secrets: tuple[str, ...]) -> None:
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


def _over_router_limit(exc: Exception) -> bool:
    """Whether the Router refused the call itself: every deployment of the group at its rpm or
    tpm (a 429 that never reached a provider, so it does not count against the circuit)."""
    if getattr(exc, "status_code", None) != 429:
        return False
    text = str(exc)
    return "No deployments available" in text or "over defined rpm limit" in text


def no_answer(failures: Sequence[str], last: BaseException | None) -> Exception:
    """What to raise when no model answered: ``CircuitOpenError`` if every circuit was open,
    ``TimeoutError`` if the last failure was a timeout, else ``JudgeError``."""
    message = "; ".join(failures)
    if last is None:
        return CircuitOpenError(message)
    if classify_failure(last) == "timeout":
        return TimeoutError(message)
    return JudgeError(message, last_error_class=type(last).__name__)
