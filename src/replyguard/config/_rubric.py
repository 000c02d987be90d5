"""The operator's additions to the judge's rubric: custom ``categories`` and the ``rubricFile``.

Both are checked when the config is made: a category's name is lower-case snake_case and not a
built-in (nor ``awaiting_user``, the PASS tag; ``grounding``, built in later, may still be named
to give it its own retry guidance), its guidance is text; the rubric file is read
inside ``workspaceDir`` only (no ``..``, no absolute path, no symlink out, a regular file),
and refused when empty or larger than a quarter of the judge's input budget.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from stat import S_ISREG

from replyguard.context import _tokens as tokens
from replyguard.context._prompt import BUILT_IN_CATEGORIES, Rubric
from replyguard.errors import ConfigError

LATER_BUILT_INS = frozenset({"grounding"})
"""Built-in categories added after custom ones existed: a config that already names one keeps
loading, and its guidance becomes the built-in's retry guidance (the judge sees it once)."""
RESERVED_CATEGORIES = frozenset((*BUILT_IN_CATEGORIES, "awaiting_user")) - LATER_BUILT_INS
"""Names a custom category may not take."""
_SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")
_NAME_CHARS = 64
# Read at most this much of a rubric file: more is over a quarter of any sensible budget.
_MAX_RUBRIC_BYTES = 1024 * 1024
REQUEST_ROOM = 400
"""Tokens the review request needs at the least (its template, the user request's and the
reply's floors): the system message may take no more of ``contextTokenBudget`` than the rest."""


def checked_categories(value: dict[str, str]) -> dict[str, str]:
    """``value`` with each guidance stripped; ``ValueError`` naming the first bad entry."""
    checked: dict[str, str] = {}
    for name, guidance in value.items():
        if not _SNAKE.fullmatch(name) or len(name) > _NAME_CHARS:
            raise ValueError(
                f"category name {name[:_NAME_CHARS]!r} must be lower-case snake_case "
                f"(a-z, 0-9 and single underscores, at most {_NAME_CHARS} characters)"
            )
        if name in RESERVED_CATEGORIES:
            raise ValueError(f"category name {name!r} is built in: choose another name")
        if not guidance.strip():
            raise ValueError(f"category {name!r} needs its retry guidance (a text)")
        checked[name] = guidance.strip()
    return checked


def read_rubric(workspace_dir: str | None, name: str, budget: int) -> str:
    """The text of the rubric file ``name`` inside ``workspace_dir``, stripped.

    Raises ``ConfigError`` (key ``rubricFile``, no file named: the caller adds it) when there
    is no workspace, the file is outside it (a symlink included), missing, not a regular file,
    not UTF-8, empty, or has more tokens than a quarter of ``budget``.
    """

    def refused(message: str) -> ConfigError:
        return ConfigError(None, [("rubricFile", message)])

    if workspace_dir is None:
        raise refused("needs workspaceDir (the rubric file is read inside it)")
    root = Path(workspace_dir).resolve()
    try:
        path = (root / name).resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a NUL byte
        raise refused(f"cannot be resolved: {type(exc).__name__}") from None
    if not path.is_relative_to(root):
        raise refused(f"{name!r} leads outside workspaceDir (a symlink?)")
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise refused(f"{name!r} not found in workspaceDir") from None
    except OSError as exc:
        raise refused(f"{name!r} cannot be read: {type(exc).__name__}") from None
    try:
        # Checked before ``fdopen``, which raises a bare IsADirectoryError for a directory.
        if not S_ISREG(os.fstat(descriptor).st_mode):
            raise refused(f"{name!r} is not a regular file (a directory?)")
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            data = handle.read(_MAX_RUBRIC_BYTES + 1)
    except OSError as exc:  # a read error (EIO, a file that vanished under a network mount)
        raise refused(f"{name!r} cannot be read: {type(exc).__name__}") from None
    finally:
        os.close(descriptor)
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise refused(f"{name!r} is not UTF-8 text") from None
    if not text:
        raise refused(f"{name!r} is empty")
    cap = budget // 4
    if len(data) > _MAX_RUBRIC_BYTES or not (
        tokens.surely_within(text, cap) or tokens.count(text) <= cap
    ):
        raise refused(
            f"{name!r} is larger than a quarter of contextTokenBudget ({cap} tokens): "
            "shorten it or raise the budget"
        )
    return text


def check_fits(criteria: str, categories: dict[str, str], budget: int) -> None:
    """``ConfigError`` (key ``rubricFile``, or ``categories`` without one) when the system
    message, with the operator's criteria and categories, leaves the review request less than
    ``REQUEST_ROOM`` tokens of ``budget`` (every judgement would otherwise fail open)."""
    rubric = Rubric(criteria, tuple(categories.items()))
    if rubric.tokens_at_most + REQUEST_ROOM <= budget:  # fits by its size: no need to count
        return
    system = rubric.tokens
    if system + REQUEST_ROOM > budget:
        key = "rubricFile" if criteria else "categories"
        raise ConfigError(
            None,
            [
                (
                    key,
                    f"with the built-in rubric the judge's system message takes {system} "
                    f"tokens, leaving less than {REQUEST_ROOM} of contextTokenBudget "
                    f"({budget}) for the review: shorten it or raise the budget",
                )
            ],
        )
