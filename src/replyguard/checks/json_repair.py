"""``repair_json``: the free repair tier that runs before the JSON check, and its helpers.

``repair_json`` finds the JSON a model meant in the text it wrote. It takes the first of:

1. the whole reply, if it parses (the C parser, so large valid replies stay cheap);
2. the contents of a markdown fence for JSON (```json, ```jsonc, or no language: ```, ~~~)
   that parse; a fence closes only on a line of its own, so a string value containing
   ``````` does not end it. A fence tagged with another language (```bash, ```python) is code,
   never the answer: ``curl -d '{"a": 1}'`` or ``print([1, 2])`` are not mined for JSON;
3. a span from a ``{`` or ``[`` to its matching bracket, inside the JSON fences if any hold a
   bracket, else in the text outside every fence: in order of start, but a span with more
   prose after it on its line (a footnote marker, as ``[1]`` in "Note [1]: see below.") comes
   after every span that ends its line (the answer itself). An ``re`` scan over
   strings and brackets finds the match, so strings and escapes are respected. A span that
   does not parse even without its trailing commas is skipped with all it encloses. A bracket
   that never closes is skipped, unless the JSON from it is merely cut short: then neither
   what it encloses nor any span before it is taken ("See [1]. {"a": [1, 2" gives nothing:
   the answer was the JSON that was cut). At most 64 scans, checks or parses per stretch of
   text, each linear; replies over ``max_chars`` skip this step.

Repair only cuts text away and drops trailing commas outside strings: string values never
change and no bracket is invented, so truncated JSON is not recovered. ``NaN``, ``Infinity``
and ``-Infinity`` are not JSON (Python's ``json`` accepts them): a value holding one is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, NamedTuple

from replyguard import _quoting as quoting
from replyguard.config._checks import JsonType

MAX_CHARS = 2_000_000
_MAX_TRIES = 64
_MAX_FENCES = 8
MAX_PROBLEMS = 10
_ECHO = 20  # the most characters of one reply value quoted back to the agent

_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*'
_TOKEN = re.compile(_STRING + r'"?|[{}\[\]]', re.DOTALL)  # an unclosed string runs to the end
_STRING_OR_TRAILING_COMMA = re.compile(f'({_STRING}")|,(?=[ \\t\\r\\n]*[}}\\]])', re.DOTALL)
_OPENER = re.compile(r"[{\[]")
_JSON_LANGUAGES = frozenset({"", "json", "jsonc"})
_CLOSER = {"{": "}", "[": "]"}
_CUT = re.compile(r"[\w.+\\-]*\s*")  # the start of a literal, number or escape, then the end
_PROSE_AFTER = re.compile(r"[^\n\w]*\w")  # a word before the line ends
_PROSE_REACH = 1000  # how far after a span that word is looked for
_DECODER = json.JSONDecoder()

_Parsed = tuple[str, Any]


class _Fence(NamedTuple):
    language: str
    """The first word of the info string, lowercase ("" for none)."""
    body: str
    start: int
    """Where the opening line starts."""
    end: int
    """Where the closing line ends (the end of the text when the fence never closes)."""


JSON_TYPES: dict[type, JsonType] = {
    type(None): "null",
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
}


def repair_json(text: str, *, max_chars: int = MAX_CHARS) -> str | None:
    """The JSON in ``text`` as an exact substring (minus trailing commas), or None."""
    first = next(_parsed_candidates(text, max_chars), None)
    return first[0] if first is not None else None


def read_json(text: str, shape: type = object) -> _Parsed:
    """The first repaired ``(text, value)`` whose value is a ``shape``, else the first at all.

    Raises ValueError with a sentence for the agent when ``text`` holds no JSON.
    """
    first: _Parsed | None = None
    for parsed in _parsed_candidates(text, MAX_CHARS):
        if isinstance(parsed[1], shape):
            return parsed
        first = first or parsed
    if first is not None:
        return first
    raise ValueError(_why_not_json(text))


def parse_json(text: str) -> Any:
    """``json.loads``, refusing ``NaN``, ``Infinity`` and ``-Infinity`` with a ValueError."""
    return json.loads(text, parse_constant=_refuse_constant)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON; use a number or null")


def json_type(value: Any) -> JsonType:
    """The JSON type name of a value ``json.loads`` made (a bool is a boolean, not an integer)."""
    return JSON_TYPES[type(value)]


def clip(text: str, limit: int = _ECHO) -> str:
    """``text`` cut to ``limit`` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def decode_error(exc: ValueError | RecursionError) -> str:
    """A short description of why ``json.loads`` refused a text."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    if isinstance(exc, RecursionError):
        return "it is nested too deeply"
    return clip(str(exc), 100)


def problems_feedback(lead: str, problems: Iterable[str]) -> str:
    """``lead`` and the first ten problems: inline when there is one, else as a list."""
    shown = list(islice(problems, MAX_PROBLEMS + 1))
    if len(shown) == 1:
        return f"{lead} {shown[0]}"
    lines = [f"- {problem}" for problem in shown[:MAX_PROBLEMS]]
    if len(shown) > MAX_PROBLEMS:
        lines.append("- (more problems not shown)")
    return "\n".join([lead, *lines])


def _parsed_candidates(text: str, max_chars: int) -> Iterator[_Parsed]:
    stripped = text.strip()
    whole = _loads(stripped)
    if whole is not None:
        yield whole
        return
    fences = _fences(stripped)
    json_bodies = _json_bodies(fences)
    scan = len(text) <= max_chars
    for body in json_bodies:
        parsed = _loads(body.strip())
        if parsed is not None:
            yield parsed
        elif scan:
            yield from _bracketed([body])
    if not json_bodies and scan:
        yield from _bracketed(_outside(stripped, fences))


def _loads(text: str) -> _Parsed | None:
    try:
        return text, parse_json(text)
    except (ValueError, RecursionError):
        return None


def _fences(text: str) -> list[_Fence]:
    """The markdown fences in ``text``, in order (``replyguard._quoting``); an unclosed fence
    runs to the end."""
    return [
        _Fence(block.language, text[block.body_start : block.body_end], block.start, block.end)
        for block in quoting.code_blocks(text, limit=_MAX_FENCES)
    ]


def _json_bodies(fences: Sequence[_Fence]) -> list[str]:
    """The contents of the JSON fences that hold a bracket (where the JSON must be)."""
    return [f.body for f in fences if f.language in _JSON_LANGUAGES and _OPENER.search(f.body)]


def _outside(text: str, fences: Sequence[_Fence]) -> list[str]:
    """The stretches of ``text`` before, between and after ``fences``."""
    starts = [fence.start for fence in fences] + [len(text)]
    ends = [0] + [fence.end for fence in fences]
    return [text[end:start] for end, start in zip(ends, starts, strict=True)]


def _bracketed(stretches: Iterable[str]) -> list[_Parsed]:
    """The spans that parse in each stretch of text, those that end their line first, each
    kind in order; none at all when some JSON is cut short, since the JSON that was cut, not
    what came before it, was the answer."""
    ending: list[_Parsed] = []
    inline: list[_Parsed] = []
    for stretch in stretches:
        spans = _spans(stretch)
        if spans is None:
            return []
        for parsed, in_prose in spans:
            (inline if in_prose else ending).append(parsed)
    return ending + inline


def _spans(text: str) -> list[tuple[_Parsed, bool]] | None:
    """Spans from an opening bracket to its match that parse, in order of their start, each
    with whether prose follows it on its line; None when the text ends in JSON cut short."""
    found: list[tuple[_Parsed, bool]] = []
    ends: dict[int, int] = {}
    skip_to = tries = 0
    for opener in _OPENER.finditer(text):
        start = opener.start()
        if start < skip_to:
            continue
        if tries == _MAX_TRIES:
            break
        tries += 1
        if start not in ends:
            _match_brackets(text, start, ends)
        end = ends[start]
        if end < 0:  # never closes: prose, or JSON cut short that must not be mined for parts
            if tries == _MAX_TRIES:
                break
            tries += 1
            if _cut_short(text, start):
                return None
            continue
        span = text[start:end]
        without_commas = _STRING_OR_TRAILING_COMMA.sub(lambda m: m.group(1) or "", span)
        parsed = _loads(span) or (_loads(without_commas) if without_commas != span else None)
        if parsed is not None:
            in_prose = _PROSE_AFTER.match(text, end, end + _PROSE_REACH) is not None
            found.append((parsed, in_prose))
        skip_to = end
    return found


def _match_brackets(text: str, start: int, ends: dict[int, int]) -> None:
    """Record where each bracket from ``start`` until its match closes (-1: never).

    Brackets opened inside this span close at the same place whichever of them a scan starts
    from, so one scan settles all of them.
    """
    stack: list[int] = []
    for token in _TOKEN.finditer(text, start):
        first = token.group()[0]
        if first == '"':
            continue
        if first in _CLOSER:
            stack.append(token.start())
        elif _CLOSER[text[stack[-1]]] != first:
            break  # a mismatched bracket: every open one fails
        else:
            ends[stack.pop()] = token.end()
            if not stack:
                return
    for opened in stack:
        ends[opened] = -1


def _cut_short(text: str, start: int) -> bool:
    """Whether the text from ``start`` is JSON cut short: valid until the text ends."""
    try:
        _DECODER.raw_decode(text, start)
    except json.JSONDecodeError as exc:
        return exc.msg.startswith("Unterminated string") or bool(_CUT.fullmatch(text, exc.pos))
    except (ValueError, RecursionError):
        pass
    return False


def _why_not_json(text: str) -> str:
    body = next(iter(_json_bodies(_fences(text.strip()))), text)
    start = _OPENER.search(body)
    if start is None:
        return "It contains no JSON object or array."
    # Blank out the prose before the JSON so that lines and columns are the reply's own.
    blanked = re.sub(r"[^\n]", " ", body[: start.start()]) + body[start.start() :]
    try:
        parse_json(blanked)
    except (ValueError, RecursionError) as exc:
        return f"It is not valid JSON: {decode_error(exc)}."
    return "It could not be read as JSON."
