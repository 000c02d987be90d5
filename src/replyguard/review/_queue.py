"""The review queue: the ledger's turns worth a human look, in the order they are shown.

A turn is queued for each reason it has, shown under the first in ``REASONS`` order:

- ``outcome_disagrees``: a later outcome the host recorded (``--outcomes``) contradicts the
  turn's verdict: a PASS whose outcome was ``bad``, a FAIL (flagged in shadow mode, or
  exhausted) whose outcome was ``good``;
- ``panel_split``: a judge panel's members voted differently on one of its attempts;
- ``exhausted``: every attempt FAILed; ``flagged``: a FAIL delivered anyway (shadow mode, or
  after side effects); ``failed_open``: the judgement went wrong and the reply went out;
- ``sample``: a stratified random sample of passed turns, drawn with a seed (the same ledger,
  size and seed always draw the same turns), so the team also measures the judge's PASSes.

The sample is stratified by run kind (``default`` for none): each stratum gets its share of
the sample in proportion to its passed turns (largest remainders), and at least one turn when
the sample is as large as the number of strata.

Each turn is known by ``key``: a hash of its ledger line, stable when the file moves.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REASONS = (
    "outcome_disagrees",
    "panel_split",
    "exhausted",
    "flagged",
    "failed_open",
    "sample",
)
"""Why a turn is queued, most pressing first."""
DEFAULT_STRATUM = "default"
OUTCOMES = ("good", "bad")


class QueueError(ValueError):
    """A ledger or outcomes file cannot be used: names the file, the line and the key."""


@dataclass(frozen=True)
class Turn:
    """One ledger line, as the review page shows it."""

    key: str
    """A hash of the ledger line: the turn's name in the label file."""
    ledger: str
    line: int
    entry: dict[str, Any]
    reasons: tuple[str, ...] = ()
    outcome: str | None = None

    @property
    def status(self) -> str:
        """The turn's status in the ledger."""
        return str(self.entry.get("status"))

    @property
    def last_vote(self) -> str | None:
        """The vote of the turn's last judged attempt (None: no vote, a fail-open one)."""
        judged = self.entry.get("judged") or []
        last = judged[-1] if judged and isinstance(judged[-1], dict) else {}
        vote = last.get("vote")
        return vote if vote in ("PASS", "FAIL") else None


@dataclass
class Ledgers:
    """Every turn read from the ledgers, and the lines that were not turns."""

    turns: list[Turn] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def line_key(raw: bytes) -> str:
    """The name of a ledger line: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(raw.strip()).hexdigest()[:16]


def read_ledgers(paths: Iterable[Path]) -> Ledgers:
    """Each ledger's turns (a line that is not a JSON object with a ``status`` is skipped and
    counted as ``path:line``); an unreadable file raises ``QueueError``."""
    read = Ledgers()
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise QueueError(f"ledger {path}: cannot read: {type(exc).__name__}") from None
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                entry = None
            if not isinstance(entry, dict) or not isinstance(entry.get("status"), str):
                read.skipped.append(f"{path}:{number}")
                continue
            read.turns.append(Turn(line_key(raw), str(path), number, entry))
    return read


def read_outcomes(path: Path) -> dict[str, str]:
    """``{turnId: "good" | "bad"}`` from a JSONL file of ``{"turnId", "outcome"}`` lines (the
    last line of a turn wins); a bad line raises ``QueueError`` naming it and its key."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise QueueError(f"outcomes {path}: cannot read: {type(exc).__name__}") from None
    outcomes: dict[str, str] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"outcomes {path}:{number}"
        try:
            data = json.loads(line)
        except ValueError:
            raise QueueError(f"{where}: not valid JSON") from None
        if not isinstance(data, dict):
            raise QueueError(f"{where}: a line must be a JSON object")
        unknown = sorted(set(data) - {"turnId", "outcome", "ts", "source"})
        if unknown:
            raise QueueError(f"{where}: {unknown[0]}: unknown key (known: turnId, outcome)")
        turn_id, outcome = data.get("turnId"), data.get("outcome")
        if not isinstance(turn_id, str) or not turn_id:
            raise QueueError(f"{where}: turnId: required, a non-empty string")
        if outcome not in OUTCOMES:
            raise QueueError(f"{where}: outcome: must be 'good' or 'bad', not {outcome!r}")
        outcomes[turn_id] = outcome
    return outcomes


def _panel_split(entry: dict[str, Any]) -> bool:
    for attempt in entry.get("panel") or ():
        votes = attempt.get("votes") if isinstance(attempt, dict) else None
        said = {v for v in (votes or {}).values() if v is not None}
        if len(said) > 1:
            return True
    return False


def reasons_of(turn: Turn) -> tuple[str, ...]:
    """Every reason ``turn`` is worth a look, in ``REASONS`` order (empty: none)."""
    found: list[str] = []
    vote = turn.last_vote
    if (turn.outcome == "bad" and vote == "PASS") or (turn.outcome == "good" and vote == "FAIL"):
        found.append("outcome_disagrees")
    if _panel_split(turn.entry):
        found.append("panel_split")
    if turn.status in ("exhausted", "flagged", "failed_open"):
        found.append(turn.status)
    return tuple(found)


def stratified_sample(turns: Sequence[Turn], size: int, seed: int) -> list[Turn]:
    """``size`` turns drawn without replacement, stratified by run kind (see the module)."""
    strata: dict[str, list[Turn]] = defaultdict(list)
    for turn in turns:
        strata[str(turn.entry.get("runKind") or DEFAULT_STRATUM)].append(turn)
    names = sorted(strata)
    total = len(turns)
    size = min(size, total)
    if not size:
        return []
    shares = {n: size * len(strata[n]) / total for n in names}
    quota = {n: int(shares[n]) for n in names}
    if size >= len(names):
        quota = {n: max(quota[n], 1) for n in names}
    by_remainder = sorted(names, key=lambda n: (-(shares[n] - int(shares[n])), n))
    for name in by_remainder:
        if sum(quota.values()) >= size:
            break
        if quota[name] < len(strata[name]):
            quota[name] += 1
    while sum(quota.values()) > size:  # the minimum of one overshot: trim the largest quota
        largest = max(names, key=lambda n: (quota[n], n))
        quota[largest] -= 1
    rng = random.Random(seed)
    drawn: list[Turn] = []
    for name in names:
        drawn += rng.sample(strata[name], min(quota[name], len(strata[name])))
    return drawn


def build_queue(
    ledgers: Ledgers, *, sample: int, seed: int, outcomes: dict[str, str] | None = None
) -> list[Turn]:
    """The turns to review, most pressing first, each once (the ledger's order within a
    reason; the sample after every other reason)."""
    outcomes = outcomes or {}
    queued: list[Turn] = []
    passes: list[Turn] = []
    for turn in ledgers.turns:
        turn_id = turn.entry.get("turnId")
        outcome = outcomes.get(turn_id) if isinstance(turn_id, str) else None
        turn = Turn(turn.key, turn.ledger, turn.line, turn.entry, outcome=outcome)
        reasons = reasons_of(turn)
        if reasons:
            queued.append(Turn(turn.key, turn.ledger, turn.line, turn.entry, reasons, outcome))
        elif turn.status == "passed":
            passes.append(turn)
    queued.sort(key=lambda t: REASONS.index(t.reasons[0]))
    sampled = [
        Turn(t.key, t.ledger, t.line, t.entry, ("sample",), t.outcome)
        for t in stratified_sample(passes, sample, seed)
    ]
    seen: set[str] = set()
    unique = []
    for turn in [*queued, *sampled]:
        if turn.key not in seen:  # a line copied into two ledgers is one turn
            seen.add(turn.key)
            unique.append(turn)
    return unique
