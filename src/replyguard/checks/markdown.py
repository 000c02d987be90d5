"""Markdown reading shared by the checks: prose lines outside code and comments, and lists."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from replyguard import _quoting as quoting

_COMMENT_OPEN, _COMMENT_CLOSE = "<!--", "-->"


def prose_lines(markdown: str) -> Iterator[str]:
    """The lines of ``markdown`` (``quoting.lines``) outside fenced code blocks, with HTML
    comments cut out.

    Fences are ``replyguard._quoting``'s, the one definition replyguard shares: three or more
    backticks or tildes (any indentation, an info string allowed, except a backtick in a
    backtick fence's, which makes it inline code); a fence ends at a line of the same character
    at least as long, or at the end of the text. A comment runs from
    ``<!--`` to ``-->``, across lines if need be; fences inside a comment are comment text.
    """
    fence: str | None = None
    in_comment = False
    for line in quoting.lines(markdown):
        if fence is not None:
            if quoting.closes(line, fence):
                fence = None
            continue
        if not in_comment and (opening := quoting.fence_opening(line)):
            fence = opening[0]
            continue
        line, in_comment = _cut_comments(line, in_comment)
        yield line


def _cut_comments(line: str, in_comment: bool) -> tuple[str, bool]:
    """``line`` without its HTML comments, and whether a comment is still open at its end."""
    kept: list[str] = []
    position = 0
    while True:
        if in_comment:
            end = line.find(_COMMENT_CLOSE, position)
            if end < 0:
                return "".join(kept), True
            position, in_comment = end + len(_COMMENT_CLOSE), False
        else:
            start = line.find(_COMMENT_OPEN, position)
            if start < 0:
                kept.append(line[position:])
                return "".join(kept), False
            kept.append(line[position:start])
            position, in_comment = start + len(_COMMENT_OPEN), True


def bulleted(items: Sequence[str], limit: int) -> str:
    """The first ``limit`` of ``items`` as a markdown list, then "… and N more" if any."""
    lines = [f"- {item}" for item in items[:limit]]
    if len(items) > limit:
        lines.append(f"- … and {len(items) - limit} more")
    return "\n".join(lines)
