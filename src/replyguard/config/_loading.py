"""Loading a ``VerifierConfig``: the file read, its object validated, every problem a
``ConfigError`` naming the file and the key (the key as the file spells it, under
``agents.defaults.verifier.`` when the verifier object is nested there).

``VerifierConfig.load`` and ``VerifierConfig.from_dict`` are these steps in order; the JSON
itself is read and located by ``config/_json_file.py``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from replyguard.config._json_file import _locate, _non_json_value, _parse_json, _problems
from replyguard.config._rules import RunKindsInvalid
from replyguard.errors import ConfigError

M = TypeVar("M", bound=BaseModel)

_RELATIVE_TO_FILE = ("workspace_dir", "ledger_path")
"""The path keys a file gives relative to its own folder."""


def read_document(path: str | os.PathLike[str]) -> tuple[Any, str, str]:
    """The verifier object in the JSON file at ``path``, the key prefix it sits under (``""``
    or ``"agents.defaults.verifier."``) and the file's name for errors."""
    file = Path(path)
    source = str(file)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(source, [("", "file not found")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(source, [("", f"cannot read: {exc.__class__.__name__}")]) from None
    document, repeated = _parse_json(text, source)
    data, prefix = _locate(document, source)
    problem = _non_json_value(data, repeated)
    if problem is not None:
        raise ConfigError(source, [(prefix + problem[0], problem[1])])
    return data, prefix, source


def validated(
    model: type[M],
    data: Any,
    *,
    source: str | None,
    schema: Callable[[], dict[str, Any]],
    prefix: str = "",
) -> M:
    """``data`` validated as ``model`` (camelCase keys only); its problems as one
    ``ConfigError``, an unknown key hinted at from ``schema()``."""
    try:
        return model.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise ConfigError(source, _problems(exc, prefix, _hinting(schema))) from None
    except RunKindsInvalid as exc:
        problems = [(prefix + key, message) for key, message in exc.problems]
        raise ConfigError(source, problems) from None


def _hinting(schema: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
    """The schema an unknown key's hint is looked up in; None (no hint) when it cannot be
    made, so that the config's problems are still reported as a ``ConfigError``."""
    try:
        return schema()
    except Exception:  # a hint is a courtesy; the error must still be raised
        return None


def beside_file(config: M, path: str | os.PathLike[str]) -> M:
    """``config`` with its relative ``workspaceDir`` and ``ledgerPath`` taken relative to the
    folder of the file at ``path``."""
    folder = Path(path).parent
    relative = {
        key: str((folder / value).resolve())
        for key in _RELATIVE_TO_FILE
        if (value := getattr(config, key)) is not None and not Path(value).is_absolute()
    }
    return config.model_copy(update=relative) if relative else config


def checked_now(check: Callable[[], object], source: str, prefix: str) -> None:
    """Run a check that reads files (the rubric); its ``ConfigError`` again, naming ``source``
    and the keys under ``prefix``."""
    try:
        check()
    except ConfigError as exc:
        problems = [(prefix + key, message) for key, message in exc.problems]
        raise ConfigError(source, problems) from None
