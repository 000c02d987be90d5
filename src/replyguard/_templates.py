"""The jinja2 templates of ``prompts/``, loaded once and rendered with ``StrictUndefined``.

In a wheel the templates ship inside the package (``replyguard/prompts``); in an editable
install or a source checkout they are read from the repository's top-level ``prompts/``.

``fill`` renders a template whose values are printed verbatim (no filters on them) without
running jinja on every call: the template is rendered once per set of empty and non-empty
values, with a placeholder for each value, and the values are then put in the placeholders'
places. The values themselves are never searched, so no text inside them can act as a
placeholder.
"""

from __future__ import annotations

import functools
import operator
import re
import threading
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2

_PACKAGE_DIR = Path(__file__).resolve().parent


class TemplatesNotFound(FileNotFoundError):
    """replyguard's own templates are missing: a broken install, not a turn's fault. Its
    message names the places looked in (paths of the install, never a turn's text)."""


def prompts_dir() -> Path:
    """Where the templates are: inside the installed package, else the source checkout."""
    candidates = (_PACKAGE_DIR / "prompts", _PACKAGE_DIR.parent.parent / "prompts")
    for candidate in candidates:
        if (candidate / "judge_system.j2").is_file():
            return candidate
    looked = " or ".join(str(candidate) for candidate in candidates)
    raise TemplatesNotFound(
        f"replyguard's prompt templates were not found (looked in {looked}): reinstall"
        " replyguard; a source tree needs its top-level prompts/ beside src/"
    )


@functools.cache
def _environment() -> jinja2.Environment:
    import jinja2  # on first use: importing it takes longer than the rest of replyguard's own

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(prompts_dir()),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # plain-text prompts, not HTML
        keep_trailing_newline=False,
        auto_reload=False,
    )


# One thread compiles at a time: a turn and the background preload asking for the same
# template at once get one compile (jinja's own cache serves the second), not two.
_compiling = threading.Lock()


@functools.cache
def template(name: str) -> jinja2.Template:
    """A compiled template, cached for the life of the process."""
    with _compiling:
        return _environment().get_template(name)


def render(name: str, **values: Any) -> str:
    """Render one template with keyword values; a missing value is an error."""
    return template(name).render(**values).strip()


_SLOT = re.compile("\x00([a-z_]+)\x00")


@functools.cache
def _skeleton(name: str, filled: tuple[tuple[str, bool], ...]) -> tuple[str, ...]:
    """The template rendered with a placeholder for each non-empty value, split around them:
    literal text at even positions, value names at odd ones."""
    values = {key: f"\x00{key}\x00" if present else "" for key, present in filled}
    return tuple(_SLOT.split(render(name, **values)))


@functools.cache
def _filling(
    name: str, keys: tuple[str, ...], present: tuple[bool, ...]
) -> tuple[list[str], Callable[[dict[str, str]], Sequence[str]]]:
    """``_skeleton``'s parts as a list, and what picks the values for its odd places out of
    the values (``operator.itemgetter``: one C call for every place)."""
    parts = _skeleton(name, tuple(zip(keys, present, strict=True)))
    names = parts[1::2]
    if len(names) > 1:
        return list(parts), operator.itemgetter(*names)
    return list(parts), lambda values: [values[slot] for slot in names]


def fill(name: str, **values: str) -> str:
    """``render(name, **values)`` for a template that prints its values verbatim."""
    parts, pick = _filling(name, tuple(values), tuple(map(bool, values.values())))
    filled = parts.copy()
    filled[1::2] = pick(values)
    return "".join(filled)


class Filler:
    """``fill`` for one template whose values always come in the same order, given as a
    sequence: ``Filler(name, keys)(values)`` is ``fill(name, **dict(zip(keys, values)))``.

    A hot path fills the same template on every call: this keeps its skeletons per set of
    empty and non-empty values in a dict of its own (at most one per set, so at most
    ``2 ** len(keys)``), and reads no keyword arguments.
    """

    __slots__ = ("_keys", "_name", "_plans")

    def __init__(self, name: str, keys: Sequence[str]) -> None:
        self._name = name
        self._keys = tuple(keys)
        self._plans: dict[tuple[bool, ...], tuple[list[str], Callable[[Any], Sequence[str]]]]
        self._plans = {}

    def __call__(self, values: Sequence[str]) -> str:
        present = tuple(map(bool, values))
        plan = self._plans.get(present)
        if plan is None:  # two threads may both make it: the same plan, one kept
            plan = self._plans[present] = self._plan(present)
        parts, pick = plan
        filled = parts.copy()
        filled[1::2] = pick(values)
        return "".join(filled)

    def _plan(self, present: tuple[bool, ...]) -> tuple[list[str], Callable[[Any], Sequence[str]]]:
        parts = _skeleton(self._name, tuple(zip(self._keys, present, strict=True)))
        where = {key: index for index, key in enumerate(self._keys)}
        places = [where[slot] for slot in parts[1::2]]
        if len(places) > 1:
            return list(parts), operator.itemgetter(*places)
        return list(parts), lambda values: [values[place] for place in places]


def filled_parts(name: str, **values: str) -> list[tuple[str, str | None]]:
    """What ``fill`` joins, in order: (text, the value's name), the name None for the
    template's own text."""
    parts = _skeleton(name, tuple((key, bool(value)) for key, value in values.items()))
    return [(values[part], part) if index % 2 else (part, None) for index, part in enumerate(parts)]


def literal_text(name: str, shown: Collection[str], **values: str) -> str:
    """What ``fill`` would render with only the values named in ``shown`` put in (the others
    left out, their sections kept): the template's own text, e.g. to measure it."""
    parts = _skeleton(name, tuple((key, bool(value)) for key, value in values.items()))
    return "".join(
        (values[part] if part in shown else "") if index % 2 else part
        for index, part in enumerate(parts)
    )
