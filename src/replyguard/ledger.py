"""The ledger: one JSON line per verified turn, appended safely from many tasks and processes.

Each line is written with a single ``write`` on a file opened with ``O_APPEND`` under an
exclusive ``flock``, in a worker thread, so lines never interleave or tear, across processes
too. A failure to write is logged and never reaches the turn. Feedback texts are recorded only
with ``logContent``.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from replyguard.telemetry import Events, describe_error
from replyguard.types import Outcome, Turn


def ledger_record(
    turn: Turn,
    outcome: Outcome,
    *,
    run_kind: str | None,
    with_content: bool,
    configured_models: Sequence[str] = (),
) -> dict[str, Any]:
    """The ledger line of one turn (camelCase keys, like the config).

    ``judgeModels`` names the models that answered, or, when none did (a timeout, an outage),
    the configured ones, so a slow model can still be named.
    """
    answered = sorted({v.model for v in outcome.verdicts if v.model})
    failed = [a for a in outcome.attempts if a.verdict is not None and not a.verdict.passed]
    record: dict[str, Any] = {
        "ts": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "turnId": turn.id,
        "agentId": turn.agent_id,
        "runKind": run_kind,
        "status": outcome.status.value,
        "reason": outcome.reason.value if outcome.reason is not None else None,
        "attempts": len(outcome.attempts),
        "costUsd": round(outcome.cost_usd, 8),
        "judgeCostUsd": round(outcome.judge_cost_usd, 8),
        "latencyMs": round(outcome.latency_ms, 3),
        "judgeModels": answered or list(configured_models),
        "checks": sorted({r.name for a in outcome.attempts for r in a.checks}),
        "failedChecks": [r.name for a in outcome.attempts for r in a.checks if not r.passed],
        "categories": [
            a.verdict.category.value if a.verdict and a.verdict.category else None for a in failed
        ],
    }
    if with_content:
        record["feedback"] = [a.verdict.feedback for a in failed if a.verdict]
    return record


def _append(path: str, data: bytes) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view) :]
    finally:
        os.close(descriptor)  # closing releases the lock


class Ledger:
    """A JSONL file of verified turns."""

    def __init__(self, path: str, events: Events) -> None:
        self.path = path
        self._events = events

    async def append(self, record: dict[str, Any]) -> None:
        """Append one record as one line; log, never raise, on failure."""
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
        try:
            await asyncio.to_thread(_append, self.path, line.encode("utf-8"))
        except (OSError, ValueError) as exc:
            self._events.warning(
                "ledger_write_failed",
                path=self.path,
                error=describe_error(exc, self._events.secrets),
            )
