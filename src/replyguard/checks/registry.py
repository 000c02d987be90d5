"""Building check instances from the JSON config's ``checks`` list.

A check without a ``name`` gets its type's (``rules``, ``command:<program>``); when an earlier
check already has that name, or a later one is given it explicitly, it becomes ``name#2``,
``name#3`` and so on, in the order of the list. Two checks given the same name explicitly
are refused by the ``Verifier``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import replyguard.checks
from replyguard.checks.base import Check
from replyguard.config._checks import (
    CheckSpec,
    CommandCheckSpec,
    HeartbeatCheckSpec,
    JsonCheckSpec,
)
from replyguard.config._schema import VerifierConfig
from replyguard.errors import ConfigError
from replyguard.telemetry._events import Events


def _command_cwd(spec: CommandCheckSpec, workspace_dir: str | None) -> str | None:
    if spec.cwd is None or workspace_dir is None:
        return spec.cwd or workspace_dir
    return str(Path(workspace_dir) / spec.cwd)


def _refuse_cwd_outside(spec: CommandCheckSpec, workspace_dir: str | None, key: str) -> None:
    """The spec refuses an absolute ``cwd`` and ``..``; a symbolic link out of the workspace
    is refused here, where the file system is known."""
    if spec.cwd is None or workspace_dir is None:
        return
    root = Path(workspace_dir).resolve()
    if not (root / spec.cwd).resolve().is_relative_to(root):
        message = f"{spec.cwd!r} leaves workspaceDir (through a symbolic link)"
        raise ConfigError(None, [(key, message)])


_BUILDERS = {
    "rules": "RuleCheck",
    "json": "JsonCheck",
    "http_request": "HttpRequestCheck",
    "command": "CommandCheck",
    "claims": "ClaimCheck",
    "figures": "FigureCheck",
    "heartbeat": "HeartbeatCheck",
}
"""Each type's check class in ``replyguard.checks``, loaded when a config first lists one. Each
spec's keys are its check's keyword arguments, but for the few mapped below."""


def build_check(spec: CheckSpec, config: VerifierConfig, events: Events) -> Check:
    """One configured check."""
    options: dict[str, Any] = {
        key: getattr(spec, key) for key in type(spec).model_fields if key != "type"
    }
    options["name"] = spec.name or spec.type
    if isinstance(spec, JsonCheckSpec):
        options["schema"] = options.pop("json_schema")
    elif isinstance(spec, CommandCheckSpec):
        options["name"] = spec.name  # None: "command:<program>"
        options["cwd"] = _command_cwd(spec, config.workspace_dir)
    elif isinstance(spec, HeartbeatCheckSpec):
        options.update(
            workspace_dir=config.workspace_dir, heartbeat_file=config.heartbeat_file, events=events
        )
    build: Callable[..., Check] = getattr(replyguard.checks, _BUILDERS[spec.type])
    return build(**options)


def build_checks(config: VerifierConfig, events: Events) -> list[Check]:
    """Every check the config lists, in order, default names made unique."""
    taken = {spec.name for spec in config.checks if spec.name is not None}
    checks: list[Check] = []
    for index, spec in enumerate(config.checks):
        if isinstance(spec, CommandCheckSpec):
            _refuse_cwd_outside(spec, config.workspace_dir, f"checks.{index}.cwd")
        check = build_check(spec, config, events)
        if spec.name is None:
            check.name = _unique(check.name, taken)
            taken.add(check.name)
        checks.append(check)
    return checks


def _unique(name: str, taken: set[str]) -> str:
    """``name``, or ``name#2``, ``name#3``… the first one not ``taken``."""
    candidate, number = name, 1
    while candidate in taken:
        number += 1
        candidate = f"{name}#{number}"
    return candidate
