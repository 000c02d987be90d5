"""What is wrong with a config before any turn: one list of findings, read by ``Verifier`` when
it is built (it raises the refusals and logs the rest) and by ``replyguard check-config`` (which
prints them all), so the command passes exactly what the verifier accepts.

- **error**: the verifier refuses the config (a judge of the agent's family with
  ``requireCrossFamily``), or accepts it but then loses what it asks for on every turn: a
  ``workspaceDir`` that is not a folder (no rules, no heartbeat tasks), a ``ledgerPath`` in a
  folder that does not exist (every write fails), an ``env:NAME`` key whose variable is not set
  (every judge call fails open), a judge model litellm would call without a key (none in the
  config, none in its provider's environment variables: ``replyguard._credentials``); a
  ``state.redisUrl`` whose variable is not set, or without the
  ``redis`` extra installed (refused: the fleet's limits would not hold).
- **warning**: what it tolerates: a rules file or heartbeat file missing from the workspace, a
  judge of the agent's family without ``requireCrossFamily``, a model whose family is unknown.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import SecretStr

from replyguard._credentials import missing_credentials
from replyguard._families import model_family
from replyguard.config._keys import ENV_PREFIX
from replyguard.config._schema import VerifierConfig
from replyguard.errors import ConfigError, CrossFamilyError, ReplyguardError

Level = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    """One thing wrong with a config, with the log event the verifier records for it."""

    level: Level
    """``"error"``: refused, or lost on every turn; ``"warning"``: tolerated."""
    key: str
    """The config key it is about, as the file spells it (camelCase, dotted)."""
    message: str
    """What is wrong, for a person (never a secret value)."""
    event: str
    """The event ``Verifier`` logs for it when built."""
    fields: dict[str, Any] = field(default_factory=dict)
    """The event's fields."""
    log_level: int = logging.WARNING
    """The level of that event."""
    refusal: ReplyguardError | None = None
    """What ``Verifier`` raises for it, when it refuses the config."""


def same_family(config: VerifierConfig, agent_model: str) -> tuple[str | None, list[str]]:
    """The agent model's family (None when unknown) and the judge models that share it."""
    family = model_family(agent_model)
    if family is None:
        return None, []
    return family, [m for m in config.judge_deployment_models if model_family(m) == family]


def config_findings(config: VerifierConfig, *, credentials: bool = True) -> list[Finding]:
    """Everything the verifier finds wrong with ``config``, errors and warnings, in key order.

    ``credentials``: whether to look for judge models without a key (``_credentials``): not
    for a verifier with a judge of the host's own, nor for ``check-config --offline``."""
    found = [*_family_findings(config), *_workspace_findings(config), *_ledger_findings(config)]
    found += _key_findings(config)
    found += _credential_findings(config) if credentials else []
    found += state_findings(config)
    unique: dict[tuple[str, str, str], Finding] = {}
    for finding in found:
        unique.setdefault((finding.level, finding.key, finding.message), finding)
    return list(unique.values())


def _family_findings(config: VerifierConfig) -> list[Finding]:
    found: list[Finding] = []
    for name in (None, *config.run_kinds):
        profile = config.for_run_kind(name)
        overridden = name is not None and profile.judge_models != config.judge_models
        where = f"runKinds.{name}.model" if overridden else "model"
        if profile.panel is not None:
            where = f"runKinds.{name}.panel.models" if name is not None else "panel.models"
            found += _panel_findings(profile, where)
        agent = config.agent_model
        if agent is not None:
            family, same = same_family(profile, agent)
            if family is None:
                found.append(
                    Finding(
                        "warning",
                        "agentModel",
                        f"the family of {agent!r} is unknown: the cross-family check is skipped",
                        "agent_family_unknown",
                        {"model": agent},
                    )
                )
            elif same and config.require_cross_family:
                refusal = CrossFamilyError(same[0], agent, family)
                found.append(
                    Finding(
                        "error",
                        where,
                        str(refusal),
                        "judge_same_family",
                        {"judge": same[0], "agent": agent, "family": family},
                        refusal=refusal,
                    )
                )
            elif same:
                found.append(
                    Finding(
                        "warning",
                        where,
                        f"judge model {same[0]!r} is of the agent's family ({family}) and shares "
                        "its blind spots; choose another family (requireCrossFamily: true "
                        "refuses this)",
                        "judge_same_family",
                        {"judge": same[0], "agent": agent, "family": family},
                    )
                )
        for model in profile.judge_deployment_models:
            if model_family(model) is None:
                found.append(
                    Finding(
                        "warning",
                        where,
                        f"the family of judge model {model!r} is unknown: the cross-family "
                        "check cannot apply to it",
                        "judge_family_unknown",
                        {"model": model},
                    )
                )
    return found


def _panel_findings(profile: VerifierConfig, where: str) -> list[Finding]:
    """A warning for each family that more than one panel member belongs to."""
    assert profile.panel is not None
    by_family: dict[str, list[str]] = {}
    for member in profile.panel.members:
        family = model_family(member.model)
        if family is not None:
            by_family.setdefault(family, []).append(member.model)
    return [
        Finding(
            "warning",
            where,
            f"panel members {', '.join(models)} are all of the {family} family: members of "
            "different families share fewer blind spots",
            "panel_same_family",
            {"models": tuple(models), "family": family},
        )
        for family, models in by_family.items()
        if len(models) > 1
    ]


def _workspace_findings(config: VerifierConfig) -> list[Finding]:
    if config.workspace_dir is None:
        unread = [k for k in ("rules_files", "heartbeat_file") if k in config.model_fields_set]
        if not unread:
            return []
        return [
            Finding(
                "warning",
                "workspaceDir",
                "not set, so rulesFiles and heartbeatFile are not read",
                "workspace_not_set",
                log_level=logging.DEBUG,
            )
        ]
    root = Path(config.workspace_dir)
    if not root.is_dir():
        return [
            Finding(
                "error",
                "workspaceDir",
                f"{root} is not a folder: no rules or heartbeat tasks would be read",
                "workspace_missing",
                {"workspace": str(root)},
            )
        ]
    found = [
        Finding(
            "warning",
            "rulesFiles",
            f"{name} not found in {root}: judged without it",
            "rules_file_missing",
            {"file": name},
            log_level=logging.DEBUG,
        )
        for name in config.rules_files
        if not (root / name).is_file()
    ]
    if not (root / config.heartbeat_file).is_file():
        found.append(
            Finding(
                "warning",
                "heartbeatFile",
                f"{config.heartbeat_file} not found in {root}: heartbeat turns have no tasks",
                "heartbeat_file_missing",
                {"file": config.heartbeat_file},
                log_level=logging.DEBUG,
            )
        )
    return found


def _ledger_findings(config: VerifierConfig) -> list[Finding]:
    if config.ledger_path is None:
        return []
    path = Path(config.ledger_path)
    if path.is_dir():
        problem = f"{path} is a folder, not a file: no turn would be recorded"
    elif not path.parent.is_dir():
        problem = f"the folder {path.parent} does not exist: no turn would be recorded"
    else:
        return []
    return [Finding("error", "ledgerPath", problem, "ledger_unwritable", {"path": str(path)})]


def _key_findings(config: VerifierConfig) -> list[Finding]:
    keys: list[tuple[str, SecretStr | None]] = [("apiKey", config.api_key)]
    if config.router is not None:
        keys += [
            (f"router.deployments.{i}.apiKey", d.api_key)
            for i, d in enumerate(config.router.deployments)
        ]
    found = []
    for key, value in keys:
        raw = value.get_secret_value() if value is not None else ""
        name = raw[len(ENV_PREFIX) :].strip() if raw.startswith(ENV_PREFIX) else ""
        if name and not os.environ.get(name):
            found.append(
                Finding(
                    "error",
                    key,
                    f"environment variable {name} is not set: every judge call would fail open",
                    "api_key_env_unset",
                    {"key": key, "variable": name},
                )
            )
    return found


def _credential_findings(config: VerifierConfig) -> list[Finding]:
    """An error for each judge model litellm would call without a key (an unset ``env:`` key
    is ``_key_findings``'s)."""
    return [
        Finding(
            "error",
            missing.key,
            f"{missing.message}; every call to it would fail open",
            "judge_credentials_missing",
            {"model": missing.model, "variables": missing.variables, "key": missing.key},
        )
        for missing in missing_credentials(config)
        if not missing.from_api_key
    ]


def state_findings(config: VerifierConfig) -> list[Finding]:
    """``state``'s refusals: an ``env:`` URL whose variable is unset, no redis-py installed."""
    if config.state is None:
        return []
    raw = config.state.redis_url.get_secret_value()
    name = raw[len(ENV_PREFIX) :].strip() if raw.startswith(ENV_PREFIX) else ""
    if name and not os.environ.get(name):
        message = f"environment variable {name} is not set"
    elif importlib.util.find_spec("redis") is None:
        message = "needs the redis package: pip install 'replyguard[redis]'"
    else:
        return []
    key = "state.redisUrl"
    refusal = ConfigError(None, [(key, message)])
    return [Finding("error", key, message, "state_unusable", {"key": key}, refusal=refusal)]
