"""Running a verifier's checks on one reply, concurrently, and merging what they found.

Every check runs in one ``TaskGroup`` under its own deadline (a lone check is awaited without
one). A check may say up front that a reply is none of its business (an ``applies(turn,
reply)`` method returning False): it is then not run at all and passes, as it would have. A
check that crashes or hangs is reported as that check's ``error``: an ordinary check is then
ignored (it passes, and the crash is logged); a ``required`` one counts as a FAIL, so the agent
gets feedback and retries. Nothing a check does can lose the reply.

A ``CancelledError`` is the turn's own only when the task running the check is being
cancelled (``Task.cancelling()``): then it propagates. Otherwise a check raised it on its own,
say by awaiting an inner task that was cancelled, and it is that check's crash.
"""

from __future__ import annotations

import asyncio
import functools
import operator
from collections.abc import Sequence

from replyguard.checks.base import Check
from replyguard.telemetry._events import Events, describe_error
from replyguard.telemetry._tracing import NO_TRACING, Tracing
from replyguard.types import CheckResult, Reply, Turn, Verdict

# A check with its own timeout (a command) gets this much more before it counts as hung.
_GRACE_SECONDS = 5.0


def _crashed(check: Check, error: str) -> CheckResult:
    if check.required:
        return CheckResult(
            name=check.name,
            passed=False,
            feedback=f"The required check {check.name!r} could not verify the reply ({error}).",
            error=error,
            required=True,
        )
    return CheckResult(name=check.name, passed=True, error=error)


async def _run_one(
    check: Check, turn: Turn, reply: Reply, time_limit: float, events: Events, tracing: Tracing
) -> CheckResult:
    if not tracing.enabled:
        return await _run_bounded(check, turn, reply, time_limit, events)
    names = {"replyguard.check.name": check.name}
    with tracing.span(f"replyguard.check {check.name}", names) as span:
        result = await _run_bounded(check, turn, reply, time_limit, events)
        span.set(
            {
                "replyguard.check.passed": result.passed,
                "replyguard.check.category": result.category,
                "replyguard.check.decisive": result.decisive,
            }
        )
        if result.error is not None:  # a crash or a hang, described without secrets
            span.error("check_error", result.error)
        return result


async def _run_bounded(
    check: Check, turn: Turn, reply: Reply, time_limit: float, events: Events
) -> CheckResult:
    own = getattr(check, "timeout_seconds", None)
    limit = max(time_limit, own + _GRACE_SECONDS) if isinstance(own, int | float) else time_limit
    try:
        async with asyncio.timeout(limit):
            result = await check.check(turn, reply)
        if not isinstance(result, CheckResult):
            raise TypeError(f"returned {type(result).__name__}, not a CheckResult")
    except TimeoutError:
        error = f"did not finish within {limit:g} s"
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise
        error = describe_error(exc, events.secrets)
    except Exception as exc:
        error = describe_error(exc, events.secrets)
    else:
        return result.model_copy(update={"required": check.required})
    events.warning("check_crashed", check=check.name, required=check.required, error=error)
    return _crashed(check, error)


async def run_checks(
    checks: Sequence[Check],
    turn: Turn,
    reply: Reply,
    *,
    time_limit: float,
    events: Events,
    tracing: Tracing = NO_TRACING,
) -> tuple[CheckResult, ...]:
    """Run every check on ``reply`` at once; results in the order the checks were given.

    With ``tracing`` on, each check that runs gets a span of its own under the caller's.
    """
    if not checks:
        return ()
    results: list[CheckResult | None] = []
    due: list[int] = []  # the checks to run (the others said they do not apply)
    for index, check in enumerate(checks):
        applies = getattr(check, "applies", None)
        if applies is None or applies(turn, reply):
            results.append(None)
            due.append(index)
        else:  # no opinion on this reply: a plain pass
            results.append(_plain_pass(check.name, check.required))
    if len(due) == 1:  # one check: no task to start
        check = checks[due[0]]
        results[due[0]] = await _run_one(check, turn, reply, time_limit, events, tracing)
    elif due:
        async with asyncio.TaskGroup() as group:
            tasks = {
                i: group.create_task(_run_one(checks[i], turn, reply, time_limit, events, tracing))
                for i in due
            }
        for index, task in tasks.items():
            results[index] = task.result()
    return tuple(results)  # type: ignore[arg-type]  # every one set: a result each


@functools.lru_cache(maxsize=256)
def _plain_pass(name: str, required: bool) -> CheckResult:
    """What a check that does not apply returns: a plain pass."""
    return CheckResult(name=name, passed=True, required=required)  # frozen: safe to share


def merged_feedback(results: Sequence[CheckResult]) -> str:
    """Every failure's feedback in one message, each under its check's name."""
    return "\n".join(f"[{r.name}] {r.feedback or 'failed'}" for r in results if not r.passed)


_PASSED = operator.attrgetter("passed")
_DECISIVE = operator.attrgetter("decisive")


def checks_verdict(results: Sequence[CheckResult]) -> Verdict | None:
    """A FAIL verdict from the failed checks, or None when every check passed."""
    if all(map(_PASSED, results)):
        return None
    failures = [r for r in results if not r.passed]
    category = next((r.category for r in failures if r.category is not None), None)
    return Verdict(
        passed=False,
        category=category,
        feedback=merged_feedback(failures),
        reasoning="deterministic checks: " + ", ".join(r.name for r in failures),
        decisive=True,
    )


def decisive_pass(results: Sequence[CheckResult]) -> bool:
    """True when no check failed and one of them passed decisively."""
    return all(map(_PASSED, results)) and any(map(_DECISIVE, results))
