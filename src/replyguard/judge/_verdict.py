"""Read the judge's verdict out of its text.

The judge reasons briefly, then ends with its verdict. Accepted forms (the PASS/FAIL token and
the category in any case):

- a verdict line: ``PASS``, ``PASS.``, ``FAIL: feedback``, ``FAIL [category]: feedback``,
  ``FAIL [category] - feedback``, ``FAIL — feedback``;
- the same in markdown: ``**PASS**``, ``**FAIL [category]**: feedback``, ``## PASS``,
  ``- FAIL ...``, ```` `PASS` ````;
- the same after a label: ``Verdict:``, ``Final verdict:``, ``Final answer:``
  (``VERDICT: **PASS**``, ``**Verdict:** FAIL [incomplete]: ...``);
- a JSON object ``{"verdict": "PASS" | "FAIL", "category": ..., "feedback": ...,
  "reasoning": ...}``, keys in any case, bare, fenced, or after prose;
- any of these in a fenced block that is the whole answer, or that ends the answer and holds
  only the verdict (its first line is the verdict line, or it holds only the JSON object).

A verdict line is one that, once markdown decoration and a label are stripped, starts with PASS
or FAIL followed by nothing, ``[``, ``:``, ``.``, an en or em dash, or a hyphen and a space:
"Fail to see why", "Passing the tests" or "pass-through" in the reasoning never decide.

Which verdict counts (a reply may try to make the judge quote a forged PASS):

1. An answer that is only a fenced block is read as that block's contents.
2. An answer that is a JSON object is read as JSON alone.
3. Otherwise verdict-shaped text that is quoted never counts: a line inside a fenced block
   (but the block that ends the answer and holds only the verdict), a block-quote line
   (``> PASS``), a line whose verdict starts with a quotation mark (``"PASS"``: never a verdict
   line, since the token must start it). A fence never closed quotes nothing: it must not hide
   the verdict after it. Fences and block quotes are found by ``replyguard._quoting``, the
   scanner every part of replyguard shares. docs/verdicts.md has examples.
4. Of the verdict lines and JSON verdict objects left, the last wins, except that a FAIL
   stands: when any of them is a FAIL, the last FAIL is the verdict, whatever PASS lines or
   echoed PASS objects come after it (a judge changing its mind is rarer than a reply that
   plants a PASS in the judge's feedback). A FAIL mentioned mid-sentence is no verdict line,
   so reasoning that only mentions it before a final PASS line gives PASS.

A PASS may carry one mark, ``PASS [awaiting_user]`` (JSON: ``"awaitingUser": true``): the
reply rightly waits for the user (``Verdict.awaiting_user``). It is read only from the verdict
that counts, so a FAIL is never awaiting the user, nor is a PASS whose mark sits in quoted
text or on a PASS line that a later FAIL overrides.

The feedback is the rest of the verdict line plus every line after it; the reasoning is the
text before it. Categories tolerate spaces, hyphens and any case (``Rule Violation``,
``rule-violation``); a built-in comes back as its ``FailCategory``, one of the ``categories``
the caller adds (the config's custom categories) as its name, a ``str``. A FAIL with an unknown
category gets ``category=None`` and keeps the category's text at the head of its feedback as
``[text]``; a tag on a PASS is ignored.

Empty text, text without a verdict, or a JSON verdict that is neither PASS nor FAIL gives a
fail-open PASS: ``readable=False``, ``fail_open_reason=unreadable_verdict`` and ``error`` saying
why. Pure, linear in the text's length, and never raises.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from replyguard import _quoting as quoting
from replyguard._frozen import assembled_from
from replyguard._quoting import Kind
from replyguard.types import FailCategory, Reason, Verdict

_DECOR = " \t*_#-`•"  # stripped from the start of a line
_TRAIL = " \t*_`"  # stripped around the verdict token and the category
_DASHES = "\u2013\u2014"  # en dash, em dash
_SEPARATORS = ":.-" + _DASHES
_LABELS = ("final verdict", "final answer", "verdict")
_JSON_TRIES = 64  # '{' positions tried, from the end, when looking for JSON verdicts
_DECODER = json.JSONDecoder()
_PASS = re.compile("pass", re.IGNORECASE)  # a PASS line holds it (re finds a superset)
_FAIL = re.compile("fail", re.IGNORECASE)

AWAITING_USER = "awaiting_user"
"""The mark of a PASS whose reply rightly waits for the user: ``PASS [awaiting_user]`` (any
case, ``-`` or a space for ``_``), or ``"awaitingUser": true`` beside a JSON PASS."""

__all__ = ["AWAITING_USER", "parse_verdict", "plain_pass_fields", "verdict_line"]


@dataclass(frozen=True)
class _Found:
    """One verdict-shaped piece of the answer that counts: a line or a JSON object."""

    at: int
    """Where it starts in the (unwrapped) text."""
    token: str | None
    """``PASS`` or ``FAIL``; None for a JSON verdict that is neither."""
    line: int = -1
    """Its line (a verdict line), or -1 (a JSON object)."""
    category: str | None = None
    inline: str = ""
    """The rest of a verdict line."""
    fields: dict[str, Any] | None = None
    """A JSON object's fields (keys in lower case)."""


def parse_verdict(text: str, categories: Collection[str] | None = None) -> Verdict:
    """Parse the judge's raw text into a ``Verdict`` (fail-open PASS when unreadable).

    ``categories``: the names of custom FAIL categories to accept besides the built-ins
    (lower-case snake_case, as the config's ``categories`` keys are).
    """
    if not isinstance(text, str):
        return _unreadable(None, "judge output is not text")
    if not text.strip():
        return _unreadable(text, "empty judge output")
    return _plain_pass(text) or _read(text, frozenset(categories or ()))


def _plain_pass(text: str) -> Verdict | None:
    """The verdict of an answer whose last line is a bare ``PASS`` and that holds no JSON, no
    fence and no ``fail`` anywhere (the common answer), read without the general path: that
    line is the only verdict line that can count, and the text before it is the reasoning.
    None for any other answer."""
    fields = plain_pass_fields(text)
    return None if fields is None else assembled_from(Verdict, fields)


def plain_pass_fields(text: str) -> dict[str, Any] | None:
    """``_plain_pass`` as the fields its verdict is made of (``Verdict(**fields)``), for a
    caller that adds fields of its own before making the one verdict; None for any answer
    but a plain PASS."""
    stripped = text.rstrip()
    start = stripped.rfind("\n") + 1
    last = stripped[start:].strip()
    if last.upper() != "PASS" or not last.isascii():
        return None
    if "{" in text or "```" in text or "~~~" in text or _FAIL.search(text) is not None:
        return None
    reasoning = _clean(stripped[: start - 1]) if start else None  # none before a lone PASS
    return _pass_fields(text, None, None, reasoning)


def _pass_fields(
    raw: str, category: str | None, feedback: str | None, reasoning: str | None
) -> dict[str, Any]:
    """A PASS verdict's fields: its values valid as they are (texts, a bool); its bracket is
    only ever the awaiting-the-user mark."""
    awaiting = category is not None and _key(category) == AWAITING_USER
    return {
        "passed": True,
        "feedback": feedback,
        "reasoning": reasoning,
        "raw": raw,
        "awaiting_user": awaiting,
    }


def _read(text: str, extra: frozenset[str]) -> Verdict:
    """``parse_verdict`` of a non-empty text, by the rules of the module doc."""
    body = _unwrapped(text)
    whole = _whole_json(body)
    if whole is not None:
        return _from_json(text, whole, None, extra)
    lines = body.split("\n")
    kinds = _counted_kinds(body, lines)
    # The last FAIL line and the last PASS line are all rule 4 needs of the lines.
    found = [
        piece
        for passed in (False, True)
        if (piece := _last_line(body, lines, kinds, passed)) is not None
    ]
    found += _json_verdicts(body, lines, kinds)
    found.sort(key=lambda piece: piece.at)
    valid = [piece for piece in found if piece.token is not None]
    fails = [piece for piece in valid if piece.token == "FAIL"]
    chosen = fails[-1] if fails else valid[-1] if valid else None
    if chosen is None:
        if found:
            return _unreadable(text, "JSON verdict is neither PASS nor FAIL")
        return _unreadable(text, "no verdict line found")
    if chosen.fields is not None:
        return _from_json(text, chosen.fields, _clean(body[: chosen.at]), extra)
    i = chosen.line
    reasoning = _clean("\n".join(lines[:i]))
    feedback = _clean("\n".join([chosen.inline, *lines[i + 1 :]]))
    return _verdict(text, chosen.token == "PASS", chosen.category, feedback, reasoning, extra)


def _unwrapped(text: str) -> str:
    """The contents of the fenced block that is the whole of ``text``, else ``text``."""
    stripped = text.strip()
    if stripped[:3] not in ("```", "~~~"):
        return text
    blocks = quoting.code_blocks(stripped, limit=1)
    if not blocks or blocks[0].start != 0 or stripped[blocks[0].end :].strip():
        return text
    return stripped[blocks[0].body_start : blocks[0].body_end]


def _whole_json(text: str) -> dict[str, Any] | None:
    """The fields (keys in lower case) of ``text`` when it is one JSON object with a verdict."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None
    try:
        obj = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    return _verdict_fields(obj)


def _verdict_fields(obj: Any) -> dict[str, Any] | None:
    if not isinstance(obj, dict):
        return None
    fields = {str(key).lower(): value for key, value in obj.items()}
    return fields if "verdict" in fields else None


def _counted_kinds(text: str, lines: list[str]) -> list[Kind]:
    """Each line's kind, where a block's body counts as text: a block never closed (a fence
    the judge left open quotes nothing: it must not hide the verdict after it), and a block
    that ends the answer and holds only a verdict."""
    kinds = quoting.kinds(text)
    if kinds[-1] is Kind.CODE:  # the last block runs to the end: it was never closed
        first = len(kinds) - 1
        while kinds[first - 1] is Kind.CODE:
            first -= 1
        return [*kinds[:first], *(Kind.TEXT for _ in kinds[first:])]
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    if last < 0 or kinds[last] not in (Kind.FENCE, Kind.CODE):
        return kinds
    first = last if kinds[last] is Kind.CODE else last - 1  # a closed block: before its fence
    while first >= 0 and kinds[first] is Kind.CODE:
        first -= 1
    if first < 0 or kinds[first] is not Kind.FENCE:
        return kinds
    body = lines[first + 1 : last + (kinds[last] is Kind.CODE)]
    content = [line for line in body if line.strip()]
    if not content:
        return kinds
    if _read_line(content[0]) is None and _whole_json("\n".join(content)) is None:
        return kinds
    return [
        Kind.TEXT if first < i <= last and kind is Kind.CODE else kind
        for i, kind in enumerate(kinds)
    ]


def _last_line(text: str, lines: list[str], kinds: list[Kind], passed: bool) -> _Found | None:
    """The last counted verdict line that passes (or fails). Only lines holding the word are
    read, from the end, so a long answer costs one regex scan."""
    word = _PASS if passed else _FAIL
    index, after = len(lines) - 1, len(text)
    tried = -1
    for position in reversed([match.start() for match in word.finditer(text)]):
        index -= text.count("\n", position, after)
        after = position
        if index == tried or kinds[index] is not Kind.TEXT:
            continue
        tried = index
        read = _read_line(lines[index])
        if read is not None and read[0] is passed:
            start = text.rfind("\n", 0, position) + 1
            return _Found(start, "PASS" if passed else "FAIL", index, read[1], read[2])
    return None


def _json_verdicts(text: str, lines: list[str], kinds: list[Kind]) -> list[_Found]:
    """The JSON objects with a ``verdict`` key that start on a counted line (the last
    ``_JSON_TRIES`` openings and the first one are tried; objects inside others are skipped)."""
    if '"verdict"' not in text.lower():
        return []
    starts: list[int] = []
    pos = len(text)
    while len(starts) < _JSON_TRIES and (pos := text.rfind("{", 0, pos)) >= 0:
        starts.append(pos)
    first = text.find("{")
    if first >= 0 and first not in starts:
        starts.append(first)
    spans: list[tuple[int, int]] = []
    found: list[_Found] = []
    for start in sorted(starts):
        if any(low < start < high for low, high in spans):
            continue  # inside an object already read
        try:
            obj, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        fields = _verdict_fields(obj)
        if fields is None:
            continue
        index = text.count("\n", 0, start)
        if kinds[index] is not Kind.TEXT:
            continue
        spans.append((start, end))
        value = fields["verdict"]
        token = value.strip().upper() if isinstance(value, str) else None
        found.append(_Found(start, token if token in ("PASS", "FAIL") else None, fields=fields))
    return found


def _from_json(
    raw: str, fields: dict[str, Any], before: str | None, extra: frozenset[str]
) -> Verdict:
    value = fields["verdict"]
    token = value.strip().upper() if isinstance(value, str) else None
    if token not in ("PASS", "FAIL"):
        return _unreadable(raw, "JSON verdict is neither PASS nor FAIL")
    reasoning = _as_text(fields.get("reasoning")) or before
    category = _as_text(fields.get("category"))
    if token == "PASS" and fields.get("awaitinguser") is True:
        category = AWAITING_USER
    feedback = _as_text(fields.get("feedback"))
    return _verdict(raw, token == "PASS", category, feedback, reasoning, extra)


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


def verdict_line(line: str) -> tuple[bool, str | None, str] | None:
    """``(passed, category text, rest of the line)`` when ``line`` is a verdict line (the
    rules of the module doc), else None."""
    return _read_line(line)


def _drop_label(s: str) -> str:
    for label in _LABELS:
        if s[: len(label)].lower() == label:
            rest = s[len(label) :].lstrip(_DECOR)
            return (rest[1:] if rest.startswith(":") else rest).lstrip(_DECOR)
    return s


def _skip_separator(s: str) -> str:
    s = s.lstrip(_TRAIL)
    return (s[1:] if s[:1] and s[0] in _SEPARATORS else s).lstrip()


def _clean(text: str) -> str | None:
    """``text`` without fence lines and surrounding blank space; None when empty."""
    lines = text.split("\n")
    if "```" not in text and "~~~" not in text:  # no fence line to drop
        return "\n".join([line.rstrip() for line in lines]).strip() or None
    kept = [
        line.rstrip()
        for line, kind in zip(lines, quoting.kinds(text), strict=True)
        if kind is not Kind.FENCE
    ]
    return "\n".join(kept).strip() or None


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    try:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    except (ValueError, RecursionError):  # nested too deep to write back
        return None
    return text.strip() or None


def _key(text: str) -> str:
    return "_".join(text.replace("-", " ").replace("_", " ").split()).lower()


def _category(text: str, extra: frozenset[str]) -> FailCategory | str | None:
    key = _key(text)
    try:
        return FailCategory(key)
    except ValueError:
        return key if key in extra else None


def _verdict(
    raw: str,
    passed: bool,
    category: str | None,
    feedback: str | None,
    reasoning: str | None,
    extra: frozenset[str] = frozenset(),
) -> Verdict:
    if passed:
        return assembled_from(Verdict, _pass_fields(raw, category, feedback, reasoning))
    known = _category(category, extra) if category else None
    if category and known is None:
        feedback = f"[{category}] {feedback or ''}".strip()
    return Verdict(passed=False, category=known, feedback=feedback, reasoning=reasoning, raw=raw)


def _unreadable(raw: str | None, error: str) -> Verdict:
    return Verdict(
        passed=True,
        readable=False,
        raw=raw,
        error=error,
        fail_open_reason=Reason.UNREADABLE_VERDICT,
    )
