"""The label file: each label a line of the eval kit's dataset, appended as it is given.

A label is an eval record (``_records.EvalRecord``): the turn's user message and reply, the
human ``label`` (and ``labelCategory``), and the turn's recorded verdict as ``judgeOutput``,
so ``replyguard eval --replay LABELS`` measures the judge that ran on those turns at once. The
judge's raw answer is used when the ledger holds it (``logContent``); otherwise the recorded
vote is written as the verdict line it stands for (``PASS``, ``FAIL [category]``), and a turn
that failed open with no answer gets an empty ``judgeOutput`` (replayed as an unreadable
verdict: a fail-open PASS, as the turn was delivered). Text the ledger never held (written
without ``logContent``) is the ``NOT_LOGGED`` sentence, never made up, and
``metadata.review.contentLogged`` is false.

``metadata.review`` holds where the label came from: the turn's ``key`` (see ``_queue``), its
ledger, line, ``turnId``, ``runKind``, ``status``, ``reason``, why it was queued, the
reviewer, the note and the time. Each line is appended in one ``O_APPEND`` write under an
exclusive ``flock`` (the ledger's writer), so reviewers writing to one file at once never lose
or tear a label; a second label of the same turn is kept beside the first.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from replyguard.review._queue import Turn
from replyguard.telemetry._ledger import append_locked, ledger_line

NOT_LOGGED = (
    "[not logged: this ledger was written without logContent, so replyguard never saw "
    "this text again; the label was given on the verdict and evidence alone]"
)
LABELS = ("PASS", "FAIL")
EVIDENCE = (
    *("turnId", "agentId", "runKind", "status", "reason", "attempts", "categories"),
    *("failedChecks", "checks", "sideEffects", "panel", "judgeModels", "rubric"),
    *("awaitingUser", "ts"),
)
"""The ledger fields the page shows as evidence."""
EVIDENCE = (
    *("turnId", "agentId", "runKind", "status", "reason", "attempts", "categories"),
    *("failedChecks", "checks", "sideEffects", "panel", "judgeModels", "rubric"),
    *("awaitingUser", "ts"),
)
"""The ledger fields the page shows as evidence."""
LOCK_SECONDS = 10.0
"""How long an append waits for another reviewer's write to finish."""


class LabelError(ValueError):
    """A label cannot be written as given (the message says which field)."""


def _last(items: Any) -> dict[str, Any]:
    return items[-1] if isinstance(items, list) and items and isinstance(items[-1], dict) else {}


def _text(value: Any) -> str | None:
    """``value`` when it is text; anything else in a ledger field is treated as not logged."""
    return value if isinstance(value, str) else None


def recorded_output(turn: Turn) -> str:
    """The turn's recorded verdict as judge text: the raw answer when logged, else the verdict
    line its vote stands for (empty when it failed open without an answer)."""
    content = turn.entry.get("content")
    logged = _last(content.get("attempts")) if isinstance(content, dict) else {}
    if isinstance(logged.get("judgeOutput"), str):
        return str(logged["judgeOutput"])
    judged = _last(turn.entry.get("judged"))
    if judged.get("vote") == "PASS":
        return "PASS"
    if judged.get("vote") == "FAIL":
        category = _text(judged.get("category"))
        return f"FAIL [{category}]" if category and category.isidentifier() else "FAIL"
    return ""


def shown(turn: Turn) -> dict[str, Any]:
    """What the page shows of a turn: its text (``None`` where not logged), verdict and
    evidence."""
    entry = turn.entry
    content = entry.get("content") if isinstance(entry.get("content"), dict) else None
    logged = _last(content.get("attempts")) if content else {}
    judged = _last(entry.get("judged"))
    return {
        "key": turn.key,
        "reasons": list(turn.reasons),
        "outcome": turn.outcome,
        "contentLogged": content is not None,
        "userMessage": _text(content.get("userMessage")) if content else None,
        "reply": _text(logged.get("reply")),
        "reasoning": _text(logged.get("reasoning")),
        "feedback": _text(logged.get("feedback")),
        "judgeOutput": _text(logged.get("judgeOutput")),
        "verdict": judged.get("vote"),
        "category": judged.get("category"),
        "evidence": {name: entry.get(name) for name in EVIDENCE},
        "ledger": f"{turn.ledger}:{turn.line}",
    }


def eval_record(
    turn: Turn,
    label: str,
    *,
    category: str | None,
    note: str | None,
    reviewer: str,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The label as one eval record (camelCase keys); raises ``LabelError`` on a bad label."""
    if label not in LABELS:
        raise LabelError(f"label: must be PASS or FAIL, not {label!r}")
    if category is not None and label != "FAIL":
        raise LabelError("category: only given with a FAIL label")
    page = shown(turn)
    entry = turn.entry
    models = entry.get("judgeModels") or []
    record: dict[str, Any] = {
        "id": _text(entry.get("turnId")) or turn.key,
        "userMessage": page["userMessage"] if page["userMessage"] is not None else NOT_LOGGED,
        "reply": page["reply"] if page["reply"] is not None else NOT_LOGGED,
        "label": label,
        "judgeOutput": recorded_output(turn),
    }
    if category is not None:
        record["labelCategory"] = category
    if len(models) == 1 and isinstance(models[0], str):
        record["judgeOutputModel"] = models[0]
    when = (now or datetime.now(UTC)).astimezone(UTC).isoformat(timespec="seconds")
    record["metadata"] = {
        "review": {
            "key": turn.key,
            "ledger": turn.ledger,
            "line": turn.line,
            "turnId": entry.get("turnId"),
            "runKind": entry.get("runKind"),
            "status": entry.get("status"),
            "reason": entry.get("reason"),
            "queued": list(turn.reasons),
            "contentLogged": page["contentLogged"],
            "reviewer": reviewer,
            "note": note or None,
            "labelledAt": when.replace("+00:00", "Z"),
        }
    }
    return record


class LabelFile:
    """The JSONL file the labels go to (created on the first label)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def labelled(self) -> dict[str, list[str]]:
        """``{key: [reviewer, ...]}`` of every label in the file; a line that is not a
        review label (one added by hand) is left alone."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        found: dict[str, list[str]] = {}
        for raw in data.split(b"\n"):
            try:
                review = json.loads(raw.decode("utf-8"))["metadata"]["review"]
                found.setdefault(str(review["key"]), []).append(str(review.get("reviewer")))
            except (ValueError, UnicodeDecodeError, KeyError, TypeError):
                continue
        return found

    def append(self, record: dict[str, Any]) -> None:
        """Append one label as one line, under the file's lock; raises ``OSError``."""
        append_locked(str(self.path), ledger_line(record), time.monotonic() + LOCK_SECONDS)
