"""Text made safe to fence for the judge: the characters that hide, and the section code.

Pure functions, linear in the text's length:

``neutralise(text)``
    Every control, format, surrogate and line- or paragraph-separator character (Unicode
    categories Cc, Cf, Cs, Zl, Zp: bidi controls, zero-width characters, tag characters, the
    byte-order mark) but ``\\n`` and ``\\t`` becomes a visible marker such as ``[U+202E]``; a
    run of them becomes one marker, ``[40 characters: U+200B]`` or ``[7 characters: U+200B
    U+200C]``. So do Hangul fillers and runs of variation selectors (both can smuggle data),
    every character of the tag block U+E0000-U+E007F (assigned or not: a tag newline U+E000A
    is marked as surely as a tag letter), and every private-use character (U+E000-U+F8FF,
    U+F0000-U+FFFFD, U+100000-U+10FFFD: no font shows them the same way and a model may read
    them as anything). These sets are fixed ranges written here, never asked of the
    interpreter's ``unicodedata``, whose answers change between Python versions.
    ``\\r\\n`` becomes ``\\n``.
    The joiners and selectors inside an emoji (👩‍💻, ❤️) are kept. The judge sees that
    something was there, and nothing stays hidden or reorders the text it reads.

``without_code(text, code)``
    ``text`` with every copy of the review's section code replaced by a marker, look-alike copies
    (upper case, full-width or mathematical digits, Cyrillic look-alike letters) included.

``fenced(text, code)``
    Both: what goes inside a section of the judge prompt.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterator

__all__ = ["fenced", "neutralise", "without_code"]


@functools.cache
def _compiled(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, once, on first use: compiling every pattern of the
    screens at import would slow down importing replyguard (and a text of plain visible ASCII
    needs few of them)."""
    return re.compile(pattern, flags)


# -- hidden characters -----------------------------------------------------------------------

# Categories Cc, Cf, Cs, Zl, Zp (Unicode 15.1) but \n and \t, plus the Hangul fillers.
_HIDDEN_CLASS = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"
    "\u115f\u1160\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\u3164"
    "\ud800-\udfff\ufeff\uffa0\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e007f"  # the whole tag block, its unassigned code points included
)
# Private use: the BMP area (icon fonts use it), then planes 15 and 16 (no common use at all).
_PRIVATE_USE_BMP = "\ue000-\uf8ff"
_PRIVATE_USE_PLANES = "\U000f0000-\U000ffffd\U00100000-\U0010fffd"
_SELECTORS = "\ufe00-\ufe0f\U000e0100-\U000e01ef"  # variation selectors
_MARKED = f"{_HIDDEN_CLASS}{_SELECTORS}{_PRIVATE_USE_BMP}{_PRIVATE_USE_PLANES}"
_HIDDEN_RUN = f"[{_MARKED}]+"  # patterns are compiled on first use (``_compiled``)
_ZWJ = "\u200d"
_PRESENTATION = frozenset("\ufe0e\ufe0f")  # text or emoji style of the symbol before
_MARKER_CODES = 4  # distinct code points named in one marker
_BIDI_OR_TAGS = "[\u202a-\u202e\u2066-\u2069\U000e0000-\U000e007f]"
# Direction marks, a BOM, CR, and BMP private-use characters (icon fonts): common, so they do
# not count towards _HEAVY (they are marked all the same).
_SOFT = frozenset("\u200e\u200f\u061c\ufeff\r")
_SOFT_RANGE = f"[{_PRIVATE_USE_BMP}]"
_HEAVY = 3  # hidden characters (other than _SOFT) that make a reply suspicious


def _is_symbol(char: str) -> bool:
    return bool(char) and unicodedata.category(char) in ("So", "Sk")


def _emoji_glue(text: str, start: int, end: int) -> bool:
    """True for one presentation selector (❤️), or a joiner between two emoji (👩‍💻)."""
    run = text[start:end]
    if run in _PRESENTATION:
        return True
    if run == _ZWJ or (len(run) == 2 and run[0] in _PRESENTATION and run[1] == _ZWJ):
        before = text[start - 1] if start else ""
        after = text[end] if end < len(text) else ""
        return _is_symbol(before) and _is_symbol(after)
    return False


def _hidden_runs(text: str) -> Iterator[re.Match[str]]:
    """Each run of hidden characters, but the selectors and joiners that build emoji."""
    for match in _compiled(_HIDDEN_RUN).finditer(text):
        if not _emoji_glue(text, match.start(), match.end()):
            yield match


def _describe(run: str) -> str:
    """What a run of hidden characters held: ``[U+200B]``, ``[7 characters: U+200B U+200C]``."""
    codes = list(dict.fromkeys(run))
    shown = " ".join(f"U+{ord(char):04X}" for char in codes[:_MARKER_CODES])
    more = " …" if len(codes) > _MARKER_CODES else ""
    return f"[{len(run):,} characters: {shown}{more}]" if len(run) > 1 else f"[{shown}]"


_describe_short = functools.lru_cache(maxsize=256)(_describe)


def _marker(match: re.Match[str]) -> str:
    run = match.group()
    if (run in _PRESENTATION or _ZWJ in run) and _emoji_glue(
        match.string, match.start(), match.end()
    ):
        return run
    return _describe_short(run) if len(run) <= 8 else _describe(run)


_ASCII_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f]")  # the hidden class's ASCII part
# Each byte to 0 when it is a hidden ASCII character (or not ASCII), else to itself in lower
# case: translating an ASCII text's bytes and looking for a 0 is about four times quicker than
# the regex search, and the same bytes show a copy of the section code in any case.
_ASCII_SHOWN = bytes(
    ord(chr(code).lower()) if code < 128 and not _ASCII_HIDDEN.match(chr(code)) else 0
    for code in range(256)
)


def _shown(text: str) -> bytes | None:
    """``text``'s bytes in lower case when it is ASCII without a hidden character; None for
    any other text."""
    if not text.isascii():
        return None
    shown = text.encode("ascii").translate(_ASCII_SHOWN)
    return None if b"\x00" in shown else shown


def _visible_ascii(text: str) -> bool:
    """True for ASCII text without a hidden character (so nothing to neutralise)."""
    return _shown(text) is not None


def _lowered_visible_ascii(text: str) -> str | None:
    """``text.lower()`` for ASCII text without a hidden character (``_visible_ascii``), read
    off the same translation; None for any other text."""
    shown = _shown(text)
    return None if shown is None else shown.decode("ascii")


# The hidden characters that ``str.isprintable`` accepts: Hangul fillers (letters), the
# Mongolian vowel separator and the variation selectors (marks).
# The fixed ranges are added too, so the answer never depends on the interpreter's Unicode
# version (today none of them is printable).
_PRINTABLE_HIDDEN = (
    f"[\u115f\u1160\u180e\u3164\uffa0{_SELECTORS}\U000e0000-\U000e007f"
    f"{_PRIVATE_USE_BMP}{_PRIVATE_USE_PLANES}]"
)


def _nothing_hidden(text: str) -> bool:
    """True when ``neutralise`` has nothing to change: quicker than searching the full class.

    ``isprintable`` is False for every character of categories C and Z but the space, so it
    covers the hidden class but for ``_PRINTABLE_HIDDEN`` (and \\n and \\t, kept visible).
    """
    if text.isascii():
        return _visible_ascii(text)
    return (
        text.replace("\n", " ").replace("\t", " ").isprintable()
        and _compiled(_PRINTABLE_HIDDEN).search(text) is None
    )


def neutralise(text: str) -> str:
    """``text`` with every hidden character run replaced by a visible marker (see module doc)."""
    if _nothing_hidden(text):
        return text  # the common case, several times faster than the full class
    return _compiled(_HIDDEN_RUN).sub(_marker, text.replace("\r\n", "\n"))


# -- the section code ------------------------------------------------------------------------

# Cyrillic and Greek letters drawn like Latin ones (a hand-picked subset of Unicode's
# confusables), mapped to those Latin letters.
_CONFUSABLES = str.maketrans(
    "асԁеһіјӏорԛѕухԝѵүɑıАВСЕНІЈКМОРЅТХУҮԚԜӀαικνορυχϲϳΑΒΕΖΗΙΚΜΝΟΡΤΥΧϹ",
    "acdehijlopqsuxwvyaiABCEHIJKMOPSTXYYQWIaiknopuxcjABEZHIKMNOPTYXC",
)
_CONFUSABLE = "[" + "".join(chr(code) for code in _CONFUSABLES) + "]"


def _latin(text: str) -> str:
    """Cyrillic and Greek look-alikes as Latin letters (same length)."""
    return text.translate(_CONFUSABLES) if _compiled(_CONFUSABLE).search(text) else text


@functools.cache
def _hex_table() -> dict[int, str]:
    """Characters that read as one hex digit, mapped to it in lower case (ASCII included)."""
    table: dict[int, str] = {ord(c): c.lower() for c in "ABCDEF"}
    blocks = [(0x80, 0x100), (0x1D00, 0x1E00), (0x2000, 0x2500), (0xA700, 0xA800)]
    blocks += [(0xFF00, 0x10000), (0x1D400, 0x1D800), (0x1F100, 0x1F200), (0x1FB00, 0x1FC00)]
    for start, end in blocks:
        for code in range(start, end):
            folded = unicodedata.normalize("NFKC", chr(code)).lower()
            if len(folded) == 1 and folded in "0123456789abcdef":
                table[code] = folded
    for code, latin in _CONFUSABLES.items():
        if isinstance(latin, int) and chr(latin).lower() in "abcdef":
            table[code] = chr(latin).lower()
    return table


@functools.cache
def _hexish_runs(length: int) -> re.Pattern[str]:
    """Runs of at least ``length`` characters that may each read as a hex digit.

    The class is a few ranges wide (a superset of the look-alikes) so the scan stays fast.
    """
    codes = sorted(code for code in _hex_table() if code > 0x7F)
    ranges: list[list[int]] = []
    for code in codes:
        if ranges and code - ranges[-1][1] <= 64:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    wide = "".join(f"{chr(low)}-{chr(high)}" for low, high in ranges)
    return re.compile(f"[0-9a-fA-F{wide}]{{{length},}}")


@functools.lru_cache(maxsize=64)
def _is_hex(code: str) -> bool:
    return all(char in "0123456789abcdefABCDEF" for char in code)


def without_code(text: str, code: str, marker: str = "[code removed]") -> str:
    """``text`` with each copy of ``code`` replaced by ``marker``, look-alike copies included.

    For a hex ``code`` (the review's section code) a copy in upper case, in full-width or
    mathematical digits, or with Cyrillic and Greek look-alike letters counts too: a model reads
    them as the code. The result never contains ``code``.
    """
    if not code:
        return text
    if not _is_hex(code):
        return text.replace(code, marker)
    wanted = code.lower()
    if text.isascii() and wanted not in text.lower():
        return text  # in ASCII the only look-alikes are the other case
    pieces: list[str] = []
    last = 0
    for run in _hexish_runs(len(code)).finditer(text):
        folded = run.group().translate(_hex_table())
        at = folded.find(wanted)
        while at >= 0:
            pieces += (text[last : run.start() + at], marker)
            last = run.start() + at + len(code)
            at = folded.find(wanted, at + len(code))
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


def nothing_to_fence(text: str, code: str) -> bool:
    """True when ``fenced(text, code)`` is ``text`` by a quick look: plain ASCII holding no
    hidden character and no copy of the code (then so is any part of it)."""
    shown = _shown(text)
    wanted = code.lower()
    return shown is not None and (not wanted.isascii() or wanted.encode() not in shown)


def fenced(text: str, code: str) -> str:
    """``without_code(neutralise(text), code)``: ``text`` made safe to put inside the review's
    fences. Plain ASCII text holding no copy of the code comes back at once."""
    if nothing_to_fence(text, code):
        return text
    return without_code(neutralise(text), code)
