"""The jinja2 templates of ``prompts/``, loaded once and rendered with ``StrictUndefined``.

In a wheel the templates ship inside the package (``replyguard/prompts``); in an editable
install or a source checkout they are read from the repository's top-level ``prompts/``.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2

_PACKAGE_DIR = Path(__file__).resolve().parent


def prompts_dir() -> Path:
    """Where the templates are: inside the installed package, else the source checkout."""
    for candidate in (_PACKAGE_DIR / "prompts", _PACKAGE_DIR.parent.parent / "prompts"):
        if (candidate / "judge_system.j2").is_file():
            return candidate
    raise FileNotFoundError(f"replyguard's prompt templates were not found near {_PACKAGE_DIR}")


@functools.cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(prompts_dir()),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # plain-text prompts, not HTML
        keep_trailing_newline=False,
        auto_reload=False,
    )


@functools.cache
def template(name: str) -> jinja2.Template:
    """A compiled template, cached for the life of the process."""
    return _environment().get_template(name)


def render(name: str, **values: Any) -> str:
    """Render one template with keyword values; a missing value is an error."""
    return template(name).render(**values).strip()
