"""The values of an insights report, and the thresholds its suggestions use."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from replyguard.types import Status

MIN_TURNS = 5  # a run kind with fewer verified turns gets no suggestion
MIN_EVENTS = 3  # nor does anything (exhausted turns, a reason, a check) seen fewer times
EXHAUSTED_RATE = 0.25  # share of a run kind's verified turns that exhausted their attempts
BUDGET_SHARE = 0.10  # share of a run kind's verified turns stopped by the cost/latency budget
TIMEOUT_SHARE = 0.30  # share of the fail-opens that were judge timeouts
STAGNANT_SHARE = 0.05  # share of all turns stopped as stagnant
CHECK_FAILURE_RATE = 0.20  # share of the turns a check ran in where it failed
THEME_MIN_FEEDBACKS = 5  # feedbacks a theme of two words or more must be in to suggest a rule
THEME_MIN_SHARE = 0.15  # and the share of all feedbacks it must be in
THEME_SUGGESTIONS = 3  # at most this many theme suggestions, on themes sharing no word
SNIPPET_CHARS = 100
SKIPPED_SHOWN = 5
UNVERIFIED = frozenset({Status.SKIPPED, Status.NOT_TRIGGERED, Status.DISABLED})
DEFAULT_KIND = "(default)"
NO_CATEGORY = "(none)"
PROPOSAL_MAX_TOKENS = 1500
PROPOSAL_TIMEOUT_SECONDS = 120.0
PROPOSAL_HEADER = "PROPOSAL by {model}, for a human to review (nothing was changed or applied)"
PROPOSAL_PROMPT = (
    "You review failure statistics of a chat agent whose replies a judge model verifies. "
    "From the JSON summary below, propose concrete edits: rules to add to AGENTS.md (quote "
    "them) and verifier config keys to change (camelCase, with values). Cite the numbers that "
    "justify each edit. A human will review your proposal; do not claim to have applied it."
)
_WORD = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*")
_STOP_WORDS = (
    "a about above after again all also am an and any are as at be because been before being "
    "both but by can can't could did didn't do does doesn't doing don't each either for from "
    "had has have having he her here his how i if in into is isn't it it's its just may me "
    "more most must my need needs no nor not of off on once one only or other our out over "
    "please same she should so some such than that the their them then there these they this "
    "those through to too under until up very was wasn't we were what when where which while "
    "who why will with won't would you your answer response reply user agent asked"
)
STOP_WORDS = frozenset(_STOP_WORDS.split())


class _Value(BaseModel):
    model_config = ConfigDict(
        frozen=True, alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True
    )


class PanelLine(_Value):
    """One judged attempt of a panel, as a ledger line records it."""

    model_config = ConfigDict(extra="ignore")
    attempt: int = 1
    decision: str | None = None
    votes: dict[str, str | None] = {}


class JudgedLine(_Value):
    """One judged attempt of a turn, as a ledger line records it: its reply's hash and vote."""

    model_config = ConfigDict(extra="ignore")
    attempt: int = 1
    reply_sha256: str | None = None
    vote: str | None = None
    category: str | None = None


class Entry(_Value):
    """One ledger line; unknown keys are ignored, missing ones take these defaults."""

    model_config = ConfigDict(extra="ignore")
    status: str
    run_kind: str | None = None
    reason: str | None = None
    attempts: int = 1
    cost_usd: float = 0.0
    judge_cost_usd: float = 0.0
    latency_ms: float | None = None
    judge_models: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    failed_checks: tuple[str, ...] = ()
    categories: tuple[str | None, ...] = ()
    feedback: tuple[str | None, ...] = ()
    ts: str | None = None
    rubric: str | None = None
    panel: tuple[PanelLine, ...] = ()
    litellm: str | None = None
    judged: tuple[JudgedLine, ...] = ()


class Totals(_Value):
    """The whole ledger; ``reasons`` counts why turns failed open or stopped early."""

    turns: int
    by_status: dict[str, int]
    reasons: dict[str, int]
    cost_usd: float
    judge_cost_usd: float
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    feedbacks: int


class RunKindStats(_Value):
    """One run kind; rates, means and p95s are over its verified (not skipped) turns."""

    name: str
    turns: int
    verified: int
    first_attempt_pass_rate: float
    exhausted: int
    exhausted_rate: float
    flagged: int
    """Turns judged FAIL in shadow mode (delivered unchanged)."""
    flagged_rate: float
    side_effects_delivered: int = 0
    """Turns judged FAIL after side effects and delivered unchanged (``onSideEffects:
    "deliver"``: status ``flagged``, reason ``side_effects``), not counted in ``flagged``."""
    side_effects_delivered_rate: float = 0.0
    mean_attempts: float
    max_attempts: int
    cost_per_turn_usd: float
    cost_p95_usd: float
    latency_p95_ms: float | None
    reasons: dict[str, int]
    categories: dict[str, int]


class CategoryStats(_Value):
    """Failed attempts of one category, and in which run kinds."""

    name: str
    count: int
    share: float
    run_kinds: dict[str, int]


class CheckStats(_Value):
    """One check: failures (per attempt), and the turns it failed in of those it ran in."""

    name: str
    failures: int
    turns_failed: int
    turns_run: int
    failure_rate: float


class ModelStats(_Value):
    """One judge model: the turns that used it, and how many of those failed open."""

    name: str
    turns: int
    failed_open: int
    fail_open_rate: float
    timeouts: int


class RubricStats(_Value):
    """One rubric (the short hash a ledger line records): when it was in force, and how the
    turns judged under it went; rates over its verified turns."""

    name: str
    turns: int
    verified: int
    first_seen: str | None
    last_seen: str | None
    first_attempt_pass_rate: float
    exhausted_rate: float


class PanelMemberStats(_Value):
    """One judge panel member: the panel attempts it sat on, how often it answered, and how
    often its vote was the panel's decision."""

    name: str
    attempts: int
    answered: int
    left_out: int
    agreed: int
    agreement_rate: float
    """``agreed`` over the attempts it answered where the panel decided."""


class Theme(_Value):
    """A normalised word n-gram, the feedbacks it is in, and the first such feedback."""

    text: str
    feedbacks: int
    share: float
    example: str


class Suggestion(_Value):
    """What to change, citing the numbers that triggered ``rule``."""

    rule: str
    text: str


class JudgeSetup(_Value):
    """What judged a turn: the models whose verdict counted, the rubric, litellm's version."""

    judge_models: tuple[str, ...]
    rubric: str | None
    litellm: str | None


class DriftStats(_Value):
    """Verdicts on byte-identical replies before and after one change of judge setup.

    ``compared`` replies were judged on both sides (the last vote before against the first
    after), ``flipped`` of them got the other verdict; ``low``/``high`` bound the flip rate's
    95 % Wilson interval. ``sameSetupCompared``/``sameSetupFlipped``: replies judged twice in a
    row by the *before* setup, the judge's own noise to read the flips against."""

    before: JudgeSetup
    after: JudgeSetup
    changed: list[str]
    since: str | None
    compared: int
    flipped: int
    flip_rate: float | None
    low: float | None
    high: float | None
    same_setup_compared: int
    same_setup_flipped: int
    flips: list[str]
    """``PASS->FAIL`` or ``FAIL->PASS`` with the reply hash's first 12 digits (at most 10)."""


class Report(_Value):
    """Everything ``insights`` says about its ledgers (``--json`` prints it as it is)."""

    ledger: str
    """The ledger file, or the files merged (comma-separated)."""
    skipped_lines: int
    skipped_line_numbers: list[int | str]
    """The first lines that were not entries: numbers, or ``file:number`` with several files."""
    totals: Totals
    run_kinds: list[RunKindStats]
    categories: list[CategoryStats]
    checks: list[CheckStats]
    judge_models: list[ModelStats]
    rubrics: list[RubricStats]
    """Each rubric in the order it first came into force (lines without one left out)."""
    rubric_changes: int
    """How often the rubric changed from one ledger line (that records one) to the next."""
    panel_members: list[PanelMemberStats]
    """Each judge panel member's agreement with the panel's decisions, by name."""
    themes: list[Theme]
    suggestions: list[Suggestion]
    drift: list[DriftStats] = []
    """Each change of judge (models, rubric, litellm version) with verdicts on byte-identical
    replies on both sides: how many flipped."""


# -- small pure helpers shared by the report and the suggestions --------------------------


def rate(part: float, whole: int, digits: int = 4) -> float:
    return round(part / whole, digits) if whole else 0.0


def kind_of(entry: Entry) -> str:
    return entry.run_kind or DEFAULT_KIND


def themes(feedbacks: Sequence[str]) -> list[Theme]:
    """Word 1-3-grams (stop words removed) in two feedbacks or more, the most frequent first.

    A gram in exactly as many feedbacks as a longer gram holding it is left out for that one.
    """
    counts: Counter[tuple[str, ...]] = Counter()
    example: dict[tuple[str, ...], str] = {}
    for text in feedbacks:
        words = [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS and len(w) > 1]
        for gram in {tuple(words[i : i + n]) for n in (1, 2, 3) for i in range(len(words) - n + 1)}:
            counts[gram] += 1
            example.setdefault(gram, " ".join(text.split()))
    inner = {
        gram[i:j]
        for gram, count in counts.items()
        for i in range(len(gram))
        for j in range(i + 1, len(gram) + 1)
        if j - i < len(gram) and counts[gram[i:j]] == count
    }
    ranked = [g for g, c in counts.items() if c >= 2 and g not in inner]
    ranked.sort(key=lambda g: (-counts[g], -len(g), g))
    return [
        Theme(
            text=" ".join(g),
            feedbacks=counts[g],
            share=rate(counts[g], len(feedbacks)),
            example=snippet(example[g]),
        )
        for g in ranked
    ]


def snippet(text: str) -> str:
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…"
