"""Finding the figures of a text, and the forms under which one counts as the same figure.

Six kinds, found in this order (a later kind never matches inside an earlier one's span):
``url``, ``email``, ``path``, ``date``, ``amount``, ``id``.

- **amount**: a number with a currency symbol, code or word (``$1,200.00``, ``1200 USD``,
  ``1.200,00 EUR``, ``€5``, ``12 euros``, ``$3.5k``). Its forms are ``CODE:value`` for every
  reading of the number (``1.200`` is 1200 or 1.2): two amounts are the same when a currency
  and a value agree. A bare number in a source counts for every currency named in that source
  (a tool's ``{"amount": 1200, "currency": "USD"}``).
- **date**: ISO (``2026-03-05``, with or without a time), ``2026/03/05``, day-month-year and
  month-day-year with ``/``, ``.`` or ``-`` (both readings kept when ambiguous), and month
  names in English (``March 5, 2026``, ``5 March 2026``, ``Mar 5``, ``March 2026``). Its forms:
  ``y-m-d``; a date without a year is matched on ``m-d``, one without a day on ``y-m``.
- **id**: ``#`` and three or more digits, a token of letters and at least three digits (with
  ``-`` or ``_`` inside: ``INV-2024-0042``, ``A-58812``, ``9f86d08``), or a bare run of six
  or more digits; not a number and a unit (``500ms``). Compared without case and separators.
- **url**, **email**: compared without case (a URL also without its scheme, ``www.`` and a
  trailing ``/``); a URL is also the same as a longer one it begins (the reply may shorten a
  link). A URL without a scheme counts when its host ends in a common top-level domain
  (``example.com/orders/7``, ``status.acme.io``).
- **path**: absolute (``/tmp/q3.pdf``, ``C:\\reports\\q3.pdf``), ``./``, ``../`` or ``~/``
  relative, a relative path with an extension (``reports/q3.pdf``), or a file name with a
  common extension (``q3.pdf``). Found in a source when it occurs there as written (``\\`` read
  as ``/``).

Fenced code blocks are not searched: code the reply writes is not a figure it reports.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

KINDS = ("amount", "date", "id", "url", "email", "path")
"""Every kind of figure, as the ``figures`` check's ``kinds`` option names them."""

_SYMBOLS = {"us$": "USD", "a$": "AUD", "c$": "CAD", "$": "USD", "€": "EUR", "£": "GBP"}
_SYMBOLS |= {"¥": "JPY", "₹": "INR", "₩": "KRW"}
_CODES = [
    "USD",
    "EUR",
    "GBP",
    "JPY",
    "CHF",
    "CAD",
    "AUD",
    "NZD",
    "INR",
    "CNY",
    "SEK",
    "NOK",
    "DKK",
    "PLN",
    "CZK",
    "HUF",
    "BRL",
    "MXN",
    "ZAR",
    "SGD",
    "HKD",
    "KRW",
]
_WORDS = {"dollars": "USD", "dollar": "USD", "euros": "EUR", "euro": "EUR", "pounds": "GBP"}
_WORDS |= {"yen": "JPY", "rupees": "INR", "francs": "CHF"}
_NUM = r"\d{1,3}(?:(?:[,.'\u00a0\u202f]|\s(?=\d{3}\b))\d{3})+(?:[.,]\d{1,2})?|\d+(?:[.,]\d+)?"
_SYM = r"US\$|A\$|C\$|\$|€|£|¥|₹|₩"
_CODE = "|".join(_CODES)
_WORD = "|".join(sorted(_WORDS, key=len, reverse=True))
_MULT = r"(?:\s?(?P<mult>k|K|m|M|bn|thousand|million|billion)\b)?"
_AMOUNT = re.compile(
    rf"(?<![\w.,])(?:(?P<sym>{_SYM})\s?(?P<n1>{_NUM}){_MULT}"
    rf"|(?P<code>\b(?:{_CODE}))\s?(?P<n2>{_NUM})"
    rf"|(?P<n3>{_NUM})\s?(?:(?P<sym2>€|£|\$|₹)|(?P<code2>(?:{_CODE}|{_WORD})\b)))",
    re.IGNORECASE,
)
_NUMBER = re.compile(rf"(?<![\w.])(?:{_NUM})(?![\w])")
_CURRENCY_MENTION = re.compile(rf"{_SYM}|\b(?:{_CODE}|{_WORD})\b", re.IGNORECASE)
_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ORD = r"(?:st|nd|rd|th)?"
_DATE = re.compile(
    r"(?<![\w./-])(?P<iy>\d{4})[-/](?P<im>\d{1,2})[-/](?P<id>\d{1,2})(?![\d/])"
    r"|(?<![\w./-])(?P<a>\d{1,2})(?P<sep>[/.-])(?P<b>\d{1,2})(?P=sep)(?P<y>\d{4}|\d{2})(?![\d/.]\d)"
    rf"|\b(?P<d1>\d{{1,2}}){_ORD}(?:\s+of)?\s+(?P<m1>{_MONTH})\.?(?:,?\s+(?P<y1>\d{{4}}))?\b"
    rf"|\b(?P<m2>{_MONTH})\.?\s+(?:(?P<d2>\d{{1,2}}){_ORD}\b(?:,?\s+(?P<y2>\d{{4}}))?"
    r"|(?P<y3>\d{4})\b)",
    re.IGNORECASE,
)
_TLD = "com|org|net|io|dev|app|ai|co|edu|gov|info|biz|me|us|uk|de|fr|eu|nl|ch|ca|au"
_URL = re.compile(
    r"\b(?:https?://|www\.)[^\s<>\"'`\]\[{}|\\^]+"
    rf"|(?<![@\w.-])(?-i:(?:[a-z0-9-]+\.)+(?:{_TLD}))\b(?![@.-]\w)(?:/[^\s<>\"'`\]\[{{}}|\\^]*)?",
    re.IGNORECASE,
)
_EMAIL = re.compile(  # starts only where its local part starts: linear in a long token
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"
)
_EXT = (
    "pdf|csv|xlsx?|docx?|pptx?|txt|md|json|ya?ml|py|js|ts|html?|png|jpe?g|gif|svg|zip|tar|gz"
    "|tgz|log|sql|xml|ini|toml|sh|cfg|conf|ipynb|parquet|mp3|mp4|wav"
)
_BARE_EXT = _EXT.replace("|js|ts", "")  # a bare "Node.js" is a name, not a file
_PATH = re.compile(
    r"(?<![\w/:.~-])(?:[A-Za-z]:\\[\w\\. -]*[\w]"
    r"|(?:~|\.{1,2})?/(?:[\w.@+-]+/)*[\w.@+-]*\w"
    rf"|[\w.-]+(?:/[\w.@+-]+)+\.(?:{_EXT})\b"
    rf"|[\w-]+(?:\.[\w-]+)*\.(?:{_BARE_EXT})\b)",
)
_ID = re.compile(
    r"(?<![\w#-])(?:#\d{3,}|(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*"
    r"|\d{6,})(?![\w-])"
)
_UNIT = re.compile(r"\d+(?:[a-z]{1,3}|[A-Z]{1,2}|[KMGT]i?B)")
_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)
_TRAILING = ".,;:!?)'\"\u00bb\u201d\u2019"


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure of a text: its kind, its text as written, where it starts, its forms."""

    kind: str
    text: str
    start: int
    forms: frozenset[str]

    @property
    def end(self) -> int:
        return self.start + len(self.text)


def _values(number: str) -> set[Decimal]:
    """Every value ``number`` may mean (``1.200``: 1200 or 1.2)."""
    plain = re.sub(r"[\s'\u00a0\u202f]", "", number)
    readings: list[str] = []
    if "," in plain and "." in plain:
        decimal = "," if plain.rfind(",") > plain.rfind(".") else "."
        readings.append(plain.replace("." if decimal == "," else ",", "").replace(",", "."))
    elif "," in plain or "." in plain:
        mark = "," if "," in plain else "."
        head, _, tail = plain.rpartition(mark)
        if plain.count(mark) > 1:
            readings.append(plain.replace(mark, ""))
        elif len(tail) == 3:  # a thousands mark, or three decimals
            readings += [plain.replace(mark, ""), f"{head}.{tail}"]
        else:
            readings.append(f"{head}.{tail}")
    else:
        readings.append(plain)
    values = set()
    for reading in readings:
        try:
            values.add(Decimal(reading))
        except InvalidOperation:
            continue
    return values


def _text(value: Decimal) -> str:
    """A value written one way: ``1200``, ``1200.5``, ``0.25``."""
    return format(value.normalize(), "f")


_SCALE = {"k": 1000, "thousand": 1000, "m": 10**6, "million": 10**6, "bn": 10**9}
_SCALE["billion"] = 10**9


def _amount_forms(match: re.Match[str]) -> frozenset[str]:
    symbol = match["sym"] or match["sym2"]
    currency = _SYMBOLS.get(symbol.lower()) if symbol else None
    word = match["code"] or match["code2"]
    if word:
        currency = _WORDS.get(word.lower()) or word.upper()
    number = match["n1"] or match["n2"] or match["n3"]
    scale = _SCALE.get((match["mult"] or "").lower(), 1)
    return frozenset(f"{currency}:{_text(value * scale)}" for value in _values(number))


def _date_forms(match: re.Match[str]) -> frozenset[str]:
    readings: list[tuple[int | None, int, int | None]] = []
    if match["iy"]:
        readings.append((int(match["iy"]), int(match["im"]), int(match["id"])))
    elif match["a"]:
        full = int(match["y"]) + (2000 if len(match["y"]) == 2 else 0)
        first, second = int(match["a"]), int(match["b"])
        readings += [(full, second, first), (full, first, second)]
    else:
        named = _MONTHS[(match["m1"] or match["m2"]).lower()]
        day_text = match["d1"] or match["d2"]
        year_text = match["y1"] or match["y2"] or match["y3"]
        readings.append(
            (int(year_text) if year_text else None, named, int(day_text) if day_text else None)
        )
    forms = set()
    for year, month, day in readings:
        if not 1 <= month <= 12 or (day is not None and not 1 <= day <= 31):
            continue
        if year is None:
            forms.add(f"{month}-{day}")
        elif day is None:
            forms.add(f"{year}-{month}")
        else:
            forms.add(f"{year}-{month}-{day}")
    return frozenset(forms)


def date_keys(figure: Figure) -> frozenset[str]:
    """Every form a source's date may be found by (a full date by its day and its month too)."""
    keys = set(figure.forms)
    for form in figure.forms:
        parts = form.split("-")
        if len(parts) == 3:
            keys |= {f"{parts[1]}-{parts[2]}", f"{parts[0]}-{parts[1]}"}
    return frozenset(keys)


def url_form(text: str) -> str:
    """A URL compared: without case, scheme, ``www.`` and a trailing ``/``."""
    lowered = re.sub(r"^(?:https?://)?(?:www\.)?", "", text.casefold())
    return lowered.rstrip("/")


def id_form(text: str) -> str:
    """An ID compared: without case, ``#`` and separators."""
    return re.sub(r"[-_#\s]", "", text.casefold())


def _trimmed(match: re.Match[str], text: str) -> tuple[str, int]:
    found = match.group()
    while found and found[-1] in _TRAILING:
        if found[-1] == ")" and found.count("(") >= found.count(")"):
            break
        found = found[:-1]
    return found, match.start()


def _blanked(text: str) -> str:
    """``text`` with its fenced code blocks blanked (same length: offsets hold)."""
    return _FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


def figures(text: str, kinds: frozenset[str] = frozenset(KINDS)) -> list[Figure]:
    """The figures of ``text`` of the given kinds, in the order they occur."""
    searched = _blanked(text) if "```" in text or "~~~" in text else text
    starts: list[int] = []  # the spans taken, sorted and never overlapping
    ends: list[int] = []
    found: list[Figure] = []

    def free(start: int, end: int) -> bool:
        at = bisect.bisect_right(starts, start)
        return (at == 0 or ends[at - 1] <= start) and (at == len(starts) or starts[at] >= end)

    for kind, pattern in (
        ("url", _URL),
        ("email", _EMAIL),
        ("path", _PATH),
        ("date", _DATE),
        ("amount", _AMOUNT),
        ("id", _ID),
    ):
        for match in pattern.finditer(searched):
            shown, start = (
                _trimmed(match, searched)
                if kind in ("url", "path")
                else (
                    match.group(),
                    match.start(),
                )
            )
            end = start + len(shown)
            if not shown or not free(start, end):
                continue
            forms = _forms(kind, match, shown)
            if forms is None:
                continue
            at = bisect.bisect_right(starts, start)
            starts.insert(at, start)
            ends.insert(at, end)
            if kind in kinds:
                found.append(Figure(kind, shown, start, forms))
    return sorted(found, key=lambda figure: figure.start)


def _forms(kind: str, match: re.Match[str], shown: str) -> frozenset[str] | None:
    """A figure's forms, or None when the match is not one after all."""
    if kind == "amount":
        return _amount_forms(match) or None
    if kind == "date":
        return _date_forms(match) or None
    if kind == "url":
        return frozenset({url_form(shown)})
    if kind == "email":
        return frozenset({shown.casefold()})
    if kind == "path":
        if shown.count("/") + shown.count("\\") + shown.count(".") == 0 or len(shown) < 3:
            return None
        return frozenset({shown.replace("\\", "/")})
    digits = sum(ch.isdigit() for ch in shown)
    if digits < 3 or len(shown) < 4 or _UNIT.fullmatch(shown):
        return None
    return frozenset({id_form(shown)})


def bare_amounts(text: str) -> frozenset[str]:
    """``CODE:value`` for every number of ``text`` and every currency it names."""
    currencies = set()
    for mention in _CURRENCY_MENTION.finditer(text):
        word = mention.group().lower()
        currencies.add(_SYMBOLS.get(word) or _WORDS.get(word) or word.upper())
    if not currencies:
        return frozenset()
    values = {value for number in _NUMBER.finditer(text) for value in _values(number.group())}
    return frozenset(f"{code}:{_text(value)}" for code in currencies for value in values)
