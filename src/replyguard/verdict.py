"""Read the judge's verdict out of its text.

The judge reasons briefly, then ends with its verdict. Accepted forms (the PASS/FAIL token and
the category in any case):

- a verdict line: ``PASS``, ``PASS.``, ``FAIL: feedback``, ``FAIL [category]: feedback``,
  ``FAIL [category] - feedback``, ``FAIL — feedback``;
- the same in markdown: ``**PASS**``, ``**FAIL [category]**: feedback``, ``## PASS``,
  ``- FAIL ...``, ``> PASS``, ```` `PASS` ````, or inside a fenced code block;
- the same after a label: ``Verdict:``, ``Final verdict:``, ``Final answer:``
  (``VERDICT: **PASS**``, ``**Verdict:** FAIL [incomplete]: ...``);
- a JSON object ``{"verdict": "PASS" | "FAIL", "category": ..., "feedback": ...,
  "reasoning": ...}``, keys in any case, bare, fenced, or after prose.

A verdict line is one that, once markdown decoration and a label are stripped, starts with PASS
or FAIL followed by nothing, ``[``, ``:``, ``.``, an en or em dash, or a hyphen and a space:
"Fail to see why", "Passing the tests" or "pass-through" in the reasoning never decide.

The last verdict wins, be it a line or a JSON object. The feedback is the rest of the verdict
line plus every line after it; the reasoning is the text before it. Categories tolerate spaces
and hyphens (``Rule Violation``, ``rule-violation``); a FAIL with an unknown category gets
``category=None`` and keeps the category's text at the head of its feedback as ``[text]``.

Empty text, text without a verdict, or a JSON verdict that is neither PASS nor FAIL gives a
fail-open PASS: ``readable=False``, ``fail_open_reason=unreadable_verdict`` and ``error`` saying
why. Pure, linear in the text's length, and never raises.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from replyguard.types import FailCategory, Reason, Verdict

_DECOR = " \t*_#>-`•"  # stripped from the start of a line
_TRAIL = " \t*_`"  # stripped around the verdict token and the category
_DASHES = "\u2013\u2014"  # en dash, em dash
_SEPARATORS = ":.-" + _DASHES
_LABELS = ("final verdict", "final answer", "verdict")
_JSON_TRIES = 64  # '{' positions tried, from the end, when looking for a JSON verdict
_DECODER = json.JSONDecoder()

__all__ = ["parse_verdict"]


def parse_verdict(text: str) -> Verdict:
    """Parse the judge's raw text into a ``Verdict`` (fail-open PASS when unreadable)."""
    if not isinstance(text, str):
        return _unreadable(None, "judge output is not text")
    if not text.strip():
        return _unreadable(text, "empty judge output")
    found = _last_json(text) if '"verdict"' in text.lower() else None
    offset = found[2] if found else 0
    lines = text[offset:].splitlines()
    for i in range(len(lines) - 1, -1, -1):
        read = _read_line(lines[i])
        if read is not None:
            passed, category, inline = read
            reasoning = _clean(text[:offset] + "\n".join(lines[:i]))
            feedback = _clean("\n".join([inline, *lines[i + 1 :]]))
            return _verdict(text, passed, category, feedback, reasoning)
    if found is None:
        return _unreadable(text, "no verdict line found")
    fields, start, _ = found
    value = fields["verdict"]
    token = value.strip().upper() if isinstance(value, str) else None
    if token not in ("PASS", "FAIL"):
        return _unreadable(text, "JSON verdict is neither PASS nor FAIL")
    reasoning = _as_text(fields.get("reasoning")) or _clean(text[:start])
    category = _as_text(fields.get("category"))
    return _verdict(text, token == "PASS", category, _as_text(fields.get("feedback")), reasoning)


def _read_line(line: str) -> tuple[bool, str | None, str] | None:
    """``(passed, category text, rest of the line)`` when ``line`` is a verdict line."""
    line = line.strip()
    s = _drop_label(line.lstrip(_DECOR))
    opening = line[: len(line) - len(s)]  # decoration and label before the token
    closing = "* \t" + "".join(c for c in "_`" if c in opening)
    token = s[:4]
    if not token.isascii() or token.upper() not in ("PASS", "FAIL"):
        return None
    rest = s[4:].lstrip(_TRAIL)
    hyphen = rest == "-" or rest.startswith(("- ", "-\t"))
    symbol = bool(rest) and unicodedata.category(rest[0]) == "So"  # "PASS ✅"
    if rest and rest[0] not in "[(:." + _DASHES and not hyphen and not symbol:
        return None
    category = None
    rest = _skip_separator(rest)
    if rest[:1] in ("[", "("):
        close = rest.find("]" if rest[0] == "[" else ")")
        if close > 0:
            category = rest[1:close].strip(_TRAIL) or None
            rest = _skip_separator(rest[close + 1 :])
    return token.upper() == "PASS", category, rest.rstrip(closing)


def _drop_label(s: str) -> str:
    for label in _LABELS:
        if s[: len(label)].lower() == label:
            rest = s[len(label) :].lstrip(_DECOR)
            return (rest[1:] if rest.startswith(":") else rest).lstrip(_DECOR)
    return s


def _skip_separator(s: str) -> str:
    s = s.lstrip(_TRAIL)
    return (s[1:] if s[:1] and s[0] in _SEPARATORS else s).lstrip()


def _last_json(text: str) -> tuple[dict[str, Any], int, int] | None:
    """The last JSON object with a ``verdict`` key: its fields (keys lowercased), start, end."""
    starts: list[int] = []
    pos = len(text)
    while len(starts) < _JSON_TRIES and (pos := text.rfind("{", 0, pos)) >= 0:
        starts.append(pos)
    first = text.find("{")
    if first >= 0 and first not in starts:
        starts.append(first)
    for start in starts:
        try:
            obj, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            fields = {str(key).lower(): value for key, value in obj.items()}
            if "verdict" in fields:
                return fields, start, end
    return None


def _is_fence(line: str) -> bool:
    s = line.strip()
    info = s.lstrip("`~").strip()
    return s[:3] in ("```", "~~~") and " " not in info and "`" not in info


def _clean(text: str) -> str | None:
    """``text`` without code-fence lines and surrounding blank space; None when empty."""
    kept = [line.rstrip() for line in text.splitlines() if not _is_fence(line)]
    return "\n".join(kept).strip() or None


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    try:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    except (ValueError, RecursionError):  # nested too deep to write back
        return None
    return text.strip() or None


def _category(text: str) -> FailCategory | None:
    key = "_".join(text.replace("-", " ").replace("_", " ").split()).lower()
    try:
        return FailCategory(key)
    except ValueError:
        return None


def _verdict(
    raw: str, passed: bool, category: str | None, feedback: str | None, reasoning: str | None
) -> Verdict:
    known = _category(category) if category and not passed else None
    if category and not passed and known is None:
        feedback = f"[{category}] {feedback or ''}".strip()
    return Verdict(passed=passed, category=known, feedback=feedback, reasoning=reasoning, raw=raw)


def _unreadable(raw: str | None, error: str) -> Verdict:
    return Verdict(
        passed=True,
        readable=False,
        raw=raw,
        error=error,
        fail_open_reason=Reason.UNREADABLE_VERDICT,
    )
