"""Building check instances from the JSON config's ``checks`` list.

A check without a ``name`` gets its type's (``rules``, ``command:<program>``); when an earlier
check already has that name, or a later one is given it explicitly, it becomes ``name#2``,
``name#3`` and so on, in the order of the list. Two checks given the same name explicitly
are refused by the ``Verifier``.
"""

from __future__ import annotations

from pathlib import Path

from replyguard.checks.base import Check
from replyguard.checks.claims import ClaimCheck
from replyguard.checks.command import CommandCheck
from replyguard.checks.heartbeat import HeartbeatCheck
from replyguard.checks.http_request import HttpRequestCheck
from replyguard.checks.json_check import JsonCheck
from replyguard.checks.rules import RuleCheck
from replyguard.checks.specs import (
    CheckSpec,
    ClaimCheckSpec,
    CommandCheckSpec,
    HeartbeatCheckSpec,
    HttpRequestCheckSpec,
    JsonCheckSpec,
    RulesCheckSpec,
)
from replyguard.config import VerifierConfig
from replyguard.telemetry import Events


def _command_cwd(spec: CommandCheckSpec, workspace_dir: str | None) -> str | None:
    if spec.cwd is None:
        return workspace_dir
    if workspace_dir is None or Path(spec.cwd).is_absolute():
        return spec.cwd
    return str(Path(workspace_dir) / spec.cwd)


def build_check(spec: CheckSpec, config: VerifierConfig, events: Events) -> Check:
    """One configured check."""
    name = spec.name or spec.type
    if isinstance(spec, RulesCheckSpec):
        return RuleCheck(
            max_length=spec.max_length,
            min_length=spec.min_length,
            must_match=spec.must_match,
            must_not_match=spec.must_not_match,
            forbidden_phrases=spec.forbidden_phrases,
            case_sensitive=spec.case_sensitive,
            name=name,
            required=spec.required,
            category=spec.category,
        )
    if isinstance(spec, JsonCheckSpec):
        return JsonCheck(
            schema=spec.json_schema,
            expect=spec.expect,
            fields=spec.fields,
            deliver_repaired=spec.deliver_repaired,
            name=name,
            required=spec.required,
            category=spec.category,
        )
    if isinstance(spec, HttpRequestCheckSpec):
        return HttpRequestCheck(
            allowed_schemes=spec.allowed_schemes,
            allowed_hosts=spec.allowed_hosts,
            allowed_methods=spec.allowed_methods,
            required_headers=spec.required_headers,
            name=name,
            required=spec.required,
            category=spec.category,
        )
    if isinstance(spec, CommandCheckSpec):
        return CommandCheck(
            spec.command,
            shell=spec.shell,
            timeout_seconds=spec.timeout_seconds,
            cwd=_command_cwd(spec, config.workspace_dir),
            env=spec.env,
            pass_reply=spec.pass_reply,
            tail_chars=spec.tail_chars,
            name=spec.name,  # None: "command:<program>"
            required=spec.required,
            category=spec.category,
        )
    if isinstance(spec, ClaimCheckSpec):
        return ClaimCheck(claims=spec.claims, name=name, required=spec.required)
    if isinstance(spec, HeartbeatCheckSpec):
        return HeartbeatCheck(
            workspace_dir=config.workspace_dir,
            heartbeat_file=config.heartbeat_file,
            name=name,
            required=spec.required,
            events=events,
        )
    raise TypeError(f"unknown check spec {type(spec).__name__}")


def build_checks(config: VerifierConfig, events: Events) -> list[Check]:
    """Every check the config lists, in order, default names made unique."""
    taken = {spec.name for spec in config.checks if spec.name is not None}
    checks: list[Check] = []
    for spec in config.checks:
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
