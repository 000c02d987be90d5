"""Broken config files: each is exactly one ``ConfigError`` naming the file and the key.

Every file below is broken in one place and carries the API key beside it. Loading it must
raise one ``ConfigError`` with one problem, keyed by the camelCase dotted path of the broken
key as the file spells it (``""`` when the file as a whole is unreadable), whose message names
the file and the key and never echoes the key's secret value; ``replyguard check-config FILE``
prints that same message on stderr, nothing on stdout, and exits 2.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from conftest import API_KEY
from replyguard import ConfigError, VerifierConfig
from replyguard.cli import main
from replyguard.config import MASK, CircuitBreakerConfig, RunKind
from replyguard.config import _checks as specs


@dataclass(frozen=True)
class Broken:
    """One broken file: its content and the key its one problem must name."""

    id: str
    content: str | dict[str, Any]
    key: str
    says: str = ""
    """A fragment the message must hold, where the key alone does not say what is wrong."""

    def text(self) -> str:
        return self.content if isinstance(self.content, str) else json.dumps(self.content)


def _with_key(verifier: dict[str, Any]) -> dict[str, Any]:
    return {"apiKey": API_KEY, **verifier}


def _nested(verifier: dict[str, Any]) -> dict[str, Any]:
    return {"agents": {"defaults": {"verifier": _with_key(verifier)}}, "gateway": {"port": 1}}


# -- wrong types, for every key a user can write ------------------------------------------------

WRONG_TYPES: dict[str, Any] = {
    "enabled": "yes",
    "model": 5,
    "agentModel": ["openai/gpt-4o"],
    "requireCrossFamily": 1,
    "fallbackModels": "openai/gpt-4o-mini",
    "apiBase": 8080,
    "apiKey": 12345678,
    "verifyAll": "true",
    "verifyHeartbeat": "on",
    "maxAttempts": 2.5,
    "triggerKeywords": "done",
    "timeoutSeconds": "30",
    "contextTokenBudget": "8000",
    "responseTokenCap": 3000.5,
    "rulesTokenCap": True,
    "historyTurns": [5],
    "workspaceDir": 7,
    "rulesFiles": "AGENTS.md",
    "heartbeatFile": ["HEARTBEAT.md"],
    "maxCostUsd": "0.10",
    "judgeMaxTokens": {"max": 512},
    "judgeAnswer": "verdict_last",
    "logContent": "no",
    "checks": {"type": "rules"},
    "judgeAfterChecks": True,
    "maxLatencyMs": "500",
    "runKinds": ["fast"],
    "circuitBreaker": 5,
    "maxConcurrentJudgeCalls": 2.0,
    "sampleRate": "half",
    "deliver": 1,
    "onExhausted": False,
    "ledgerPath": 3,
    "onSuspectedInjection": None,
    "sideEffectTools": "send_*",
    "onSideEffects": "ask",
    "hookTimeoutSeconds": "2",
    "agentThreads": "4",
    "streaming": "release",
    "mode": True,
    "router": ["judge"],
    "state": "redis://127.0.0.1:6379",
    "spendLimits": {"scope": "global"},
    "tracing": "yes",
    "rubricFile": ["RUBRIC.md"],
    "categories": ["medical_advice"],
    "panel": ["openai/gpt-4o-mini", "gemini/gemini-2.0-flash"],
    "serve": ["--port", "8080"],
}
CIRCUIT_BREAKER_WRONG_TYPES: dict[str, Any] = {"failureThreshold": "5", "cooldownSeconds": [30]}
# A valid entry of each check type, and a wrong type for each of its keys.
CHECK_BASES: dict[str, dict[str, Any]] = {
    "rules": {"type": "rules"},
    "json": {"type": "json"},
    "http_request": {"type": "http_request"},
    "command": {"type": "command", "command": ["ruff", "check", "."]},
    "claims": {"type": "claims"},
    "figures": {"type": "figures"},
    "heartbeat": {"type": "heartbeat"},
}
COMMON_CHECK_WRONG_TYPES: dict[str, Any] = {"name": 1, "required": "yes"}
CHECK_WRONG_TYPES: dict[str, dict[str, Any]] = {
    "rules": {
        "maxLength": "100",
        "minLength": 1.5,
        "mustMatch": "^Dear",
        "mustNotMatch": 5,
        "forbiddenPhrases": "as an AI",
        "caseSensitive": "no",
        "matchWindowChars": "256",
        "category": 3,
    },
    "json": {
        "expect": "dict",
        "schema": "object",
        "fields": ["total"],
        "deliverRepaired": "yes",
        "category": None,
    },
    "http_request": {
        "allowedSchemes": "https",
        "allowedHosts": {"api.example.com": True},
        "allowedMethods": "GET",
        "requiredHeaders": "Authorization",
        "category": ["rule_violation"],
    },
    "command": {
        "command": 5,
        "shell": "false",
        "timeoutSeconds": "60",
        "cwd": 1,
        "env": ["CI=1"],
        "passReply": "argv",
        "tailChars": 400.5,
        "category": "wrong_answer",
    },
    "claims": {"claims": ["send"]},
    "figures": {"kinds": "amount"},
    "heartbeat": {},
}
FIELD_RULE_WRONG_TYPES: dict[str, Any] = {
    "required": "yes",
    "type": "str",
    "pattern": 1,
    "minimum": "0",
    "maximum": [10],
    "minLength": 1.5,
    "maxLength": "9",
    "enum": "a,b",
}


def _wrong_types() -> list[Broken]:
    cases = [Broken(f"wrong-type-{k}", _with_key({k: v}), k) for k, v in WRONG_TYPES.items()]
    cases += [
        Broken(
            f"wrong-type-runKinds-{k}",
            _with_key({"runKinds": {"fast": {k: v}}}),
            f"runKinds.fast.{k}",
        )
        for k, v in WRONG_TYPES.items()
        if k in _aliases(RunKind)
    ]
    cases += [
        Broken(
            f"wrong-type-circuitBreaker-{k}",
            _with_key({"circuitBreaker": {k: v}}),
            f"circuitBreaker.{k}",
        )
        for k, v in CIRCUIT_BREAKER_WRONG_TYPES.items()
    ]
    for kind, wrong in CHECK_WRONG_TYPES.items():
        for k, v in {**COMMON_CHECK_WRONG_TYPES, **wrong}.items():
            entry = {**CHECK_BASES[kind], k: v}
            cases.append(
                Broken(f"wrong-type-{kind}-{k}", _with_key({"checks": [entry]}), f"checks.0.{k}")
            )
    for k, v in FIELD_RULE_WRONG_TYPES.items():
        entry = {"type": "json", "fields": {"total": {k: v}}}
        key = f"checks.0.fields.total.{k}"
        cases.append(Broken(f"wrong-type-fieldRule-{k}", _with_key({"checks": [entry]}), key))
    return cases


def _aliases(model: type[BaseModel]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()}


# -- every other kind of breakage ---------------------------------------------------------------

OTHER_CASES: list[Broken] = [
    # The file as a whole.
    Broken("bad-json", f'{{"apiKey": "{API_KEY}", "enabled": tru}}', "", "not valid JSON"),
    Broken("trailing-comma", f'{{"apiKey": "{API_KEY}",}}', "", "line 1 column"),
    Broken("empty-file", "", "", "not valid JSON"),
    Broken("top-level-array", f'["{API_KEY}"]', "", "must be a JSON object"),
    Broken("nested-too-deeply", "[" * 100_000, "", "nested too deeply"),
    # JSON that Python's parser takes but JSON does not allow.
    Broken("nan", f'{{"apiKey": "{API_KEY}", "timeoutSeconds": NaN}}', "timeoutSeconds"),
    Broken("infinity", f'{{"apiKey": "{API_KEY}", "maxCostUsd": Infinity}}', "maxCostUsd"),
    Broken("huge-number", f'{{"apiKey": "{API_KEY}", "maxCostUsd": 1e400}}', "maxCostUsd"),
    Broken(
        "nan-in-a-check",
        f'{{"apiKey": "{API_KEY}", "checks": '
        '[{"type": "json", "fields": {"total": {"minimum": NaN}}}]}',
        "checks.0.fields.total.minimum",
    ),
    Broken(
        "repeated-key",
        f'{{"apiKey": "{API_KEY}", "maxAttempts": 2, "maxAttempts": 5}}',
        "maxAttempts",
        "more than once",
    ),
    Broken(
        "repeated-key-in-a-run-kind",
        f'{{"apiKey": "{API_KEY}", '
        '"runKinds": {"fast": {"maxAttempts": 1, "maxAttempts": 2}}}',
        "runKinds.fast.maxAttempts",
    ),
    # Unknown keys, at every level.
    Broken("unknown-key", _with_key({"colour": "blue"}), "colour", "unknown key"),
    Broken("misspelt-key", _with_key({"maxAtempts": 2}), "maxAtempts", "unknown key"),
    Broken("snake-case-key", _with_key({"max_attempts": 2}), "max_attempts", "unknown key"),
    Broken(
        "unknown-key-in-run-kind",
        _with_key({"runKinds": {"fast": {"colour": 1}}}),
        "runKinds.fast.colour",
        "unknown key",
    ),
    Broken(
        "api-key-in-a-run-kind",
        _with_key({"runKinds": {"fast": {"apiKey": API_KEY}}}),
        "runKinds.fast.apiKey",
        "unknown key",
    ),
    Broken(
        "unknown-key-in-check",
        _with_key({"checks": [{"type": "rules", "maxLen": 5}]}),
        "checks.0.maxLen",
        "unknown key",
    ),
    Broken(
        "unknown-key-in-second-check",
        _with_key({"checks": [{"type": "heartbeat"}, {"type": "claims", "verbs": {}}]}),
        "checks.1.verbs",
        "unknown key",
    ),
    Broken(
        "unknown-key-in-field-rule",
        _with_key({"checks": [{"type": "json", "fields": {"total": {"min": 0}}}]}),
        "checks.0.fields.total.min",
        "unknown key",
    ),
    Broken(
        "unknown-key-in-circuit-breaker",
        _with_key({"circuitBreaker": {"threshold": 3}}),
        "circuitBreaker.threshold",
        "unknown key",
    ),
    Broken(
        "unknown-key-nested",
        _nested({"colour": "blue"}),
        "agents.defaults.verifier.colour",
        "unknown key",
    ),
    # Out of range.
    Broken("max-attempts-0", _with_key({"maxAttempts": 0}), "maxAttempts"),
    Broken("max-attempts-51", _with_key({"maxAttempts": 51}), "maxAttempts"),
    Broken("timeout-0", _with_key({"timeoutSeconds": 0}), "timeoutSeconds"),
    Broken("timeout-over-an-hour", _with_key({"timeoutSeconds": 3601}), "timeoutSeconds"),
    Broken("budget-999", _with_key({"contextTokenBudget": 999}), "contextTokenBudget"),
    Broken("response-cap-49", _with_key({"responseTokenCap": 49}), "responseTokenCap"),
    Broken("rules-cap-negative", _with_key({"rulesTokenCap": -1}), "rulesTokenCap"),
    Broken("history-negative", _with_key({"historyTurns": -1}), "historyTurns"),
    Broken("cost-negative", _with_key({"maxCostUsd": -0.01}), "maxCostUsd"),
    Broken("judge-tokens-15", _with_key({"judgeMaxTokens": 15}), "judgeMaxTokens"),
    Broken("judge-tokens-huge", _with_key({"judgeMaxTokens": 65537}), "judgeMaxTokens"),
    Broken("latency-0", _with_key({"maxLatencyMs": 0}), "maxLatencyMs"),
    Broken("sample-rate-over-1", _with_key({"sampleRate": 1.5}), "sampleRate"),
    Broken("sample-rate-negative", _with_key({"sampleRate": -0.1}), "sampleRate"),
    Broken("concurrency-0", _with_key({"maxConcurrentJudgeCalls": 0}), "maxConcurrentJudgeCalls"),
    Broken("agent-threads-0", _with_key({"agentThreads": 0}), "agentThreads"),
    Broken("hook-timeout-0", _with_key({"hookTimeoutSeconds": 0}), "hookTimeoutSeconds"),
    Broken("deliver-unknown", _with_key({"deliver": "middle"}), "deliver"),
    Broken("on-exhausted-unknown", _with_key({"onExhausted": "explode"}), "onExhausted"),
    Broken(
        "on-exhausted-unknown-category",
        _with_key({"onExhausted": {"grounding": "Sorry.", "medical": "x"}}),
        "onExhausted.medical",
    ),
    Broken(
        "judge-after-checks-unknown",
        _with_key({"judgeAfterChecks": "sometimes"}),
        "judgeAfterChecks",
    ),
    Broken(
        "breaker-threshold-0",
        _with_key({"circuitBreaker": {"failureThreshold": 0}}),
        "circuitBreaker.failureThreshold",
    ),
    Broken(
        "breaker-cooldown-over-a-day",
        _with_key({"circuitBreaker": {"cooldownSeconds": 86401}}),
        "circuitBreaker.cooldownSeconds",
    ),
    Broken(
        "run-kind-attempts-0",
        _with_key({"runKinds": {"fast": {"maxAttempts": 0}}}),
        "runKinds.fast.maxAttempts",
    ),
    Broken(
        "run-kind-budget-999",
        _with_key({"runKinds": {"fast": {"contextTokenBudget": 999}}}),
        "runKinds.fast.contextTokenBudget",
    ),
    Broken(
        "rules-max-length-0",
        _with_key({"checks": [{"type": "rules", "maxLength": 0}]}),
        "checks.0.maxLength",
    ),
    Broken(
        "command-tail-99",
        _with_key({"checks": [{**CHECK_BASES["command"], "tailChars": 99}]}),
        "checks.0.tailChars",
    ),
    Broken(
        "command-cwd-dot-dot",
        _with_key({"checks": [{**CHECK_BASES["command"], "cwd": "../.."}]}),
        "checks.0.cwd",
        "..",
    ),
    Broken(
        "command-cwd-dot-dot-inside",
        _with_key({"checks": [{**CHECK_BASES["command"], "cwd": "src/../../x"}]}),
        "checks.0.cwd",
        "..",
    ),
    Broken(
        "command-cwd-absolute",
        _with_key({"checks": [{**CHECK_BASES["command"], "cwd": "/etc"}]}),
        "checks.0.cwd",
        "relative to workspaceDir",
    ),
    Broken(
        "command-cwd-windows-drive",
        _with_key({"checks": [{**CHECK_BASES["command"], "cwd": "C:\\build"}]}),
        "checks.0.cwd",
    ),
    Broken(
        "command-cwd-empty",
        _with_key({"checks": [{**CHECK_BASES["command"], "cwd": ""}]}),
        "checks.0.cwd",
    ),
    Broken("empty-model", _with_key({"model": "  "}), "model", "must name a model"),
    Broken("empty-keyword", _with_key({"triggerKeywords": ["done", " "]}), "triggerKeywords"),
    Broken("empty-fallback", _with_key({"fallbackModels": [""]}), "fallbackModels"),
    # Values a run kind may not set, though its own model lets them through.
    Broken(
        "run-kind-null-model",
        _with_key({"runKinds": {"fast": {"model": None}}}),
        "runKinds.fast.model",
    ),
    Broken(
        "run-kind-empty-keyword",
        _with_key({"runKinds": {"fast": {"triggerKeywords": [""]}}}),
        "runKinds.fast.triggerKeywords",
    ),
    # Where the verifier object should be.
    Broken(
        "nested-no-defaults",
        {"agents": {}, "apiKey": API_KEY},
        "agents.defaults.verifier",
        "missing",
    ),
    Broken(
        "nested-no-verifier",
        {"agents": {"defaults": {"model": API_KEY}}},
        "agents.defaults.verifier",
        "missing",
    ),
    Broken("nested-agents-not-an-object", {"agents": [API_KEY]}, "agents.defaults.verifier"),
    Broken(
        "nested-verifier-not-an-object",
        {"agents": {"defaults": {"verifier": [API_KEY]}}},
        "agents.defaults.verifier",
        "must be a JSON object",
    ),
    Broken(
        "nested-wrong-type", _nested({"maxAttempts": "3"}), "agents.defaults.verifier.maxAttempts"
    ),
    # The API key itself.
    Broken("masked-api-key", {"apiKey": MASK}, "apiKey", "mask"),
    Broken(
        "masked-api-key-nested",
        {"agents": {"defaults": {"verifier": {"apiKey": MASK}}}},
        "agents.defaults.verifier.apiKey",
        "mask",
    ),
    Broken("env-without-a-name", {"apiKey": "env:"}, "apiKey", "variable name"),
    Broken("env-with-a-blank-name", {"apiKey": "env:   "}, "apiKey", "variable name"),
    Broken("api-key-in-a-list", {"apiKey": [API_KEY]}, "apiKey"),
    Broken("api-key-in-an-object", {"apiKey": {"value": API_KEY}}, "apiKey"),
    # Files outside the workspace.
    Broken("rules-file-dot-dot", _with_key({"rulesFiles": ["../AGENTS.md"]}), "rulesFiles", ".."),
    Broken(
        "rules-file-dot-dot-inside",
        _with_key({"rulesFiles": ["docs/../../x.md"]}),
        "rulesFiles",
        "..",
    ),
    Broken("rules-file-absolute", _with_key({"rulesFiles": ["/etc/passwd"]}), "rulesFiles"),
    Broken("rules-file-windows-drive", _with_key({"rulesFiles": ["C:\\rules.md"]}), "rulesFiles"),
    Broken("rules-file-empty", _with_key({"rulesFiles": [""]}), "rulesFiles"),
    Broken(
        "heartbeat-file-dot-dot",
        _with_key({"heartbeatFile": "../HEARTBEAT.md"}),
        "heartbeatFile",
        "..",
    ),
    # Checks.
    Broken(
        "check-type-unknown",
        _with_key({"checks": [{"type": "spellcheck"}]}),
        "checks.0.type",
        "unknown check type",
    ),
    Broken(
        "check-type-missing",
        _with_key({"checks": [{"name": "lint"}]}),
        "checks.0.type",
        "missing check type",
    ),
    Broken("check-type-not-a-string", _with_key({"checks": [{"type": 3}]}), "checks.0.type"),
    Broken(
        "command-string-without-shell",
        _with_key({"checks": [{"type": "command", "command": "ruff check ."}]}),
        "checks.0",
        "command must be a list of arguments unless shell is true",
    ),
    Broken(
        "command-empty",
        _with_key({"checks": [{"type": "command", "command": []}]}),
        "checks.0",
        "command must not be empty",
    ),
    Broken(
        "command-list-of-numbers",
        _with_key({"checks": [{"type": "command", "command": [1, 2]}]}),
        "checks.0.command",
    ),
    Broken(
        "rules-bad-regex",
        _with_key({"checks": [{"type": "rules", "mustMatch": ["("]}]}),
        "checks.0.mustMatch",
        "regular expression",
    ),
    Broken(
        "field-rule-bad-regex",
        _with_key({"checks": [{"type": "json", "fields": {"total": {"pattern": "["}}}]}),
        "checks.0.fields.total.pattern",
        "regular expression",
    ),
]
CASES = _wrong_types() + OTHER_CASES


def _error(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        VerifierConfig.load(path)
    return caught.value


@pytest.fixture(params=CASES, ids=[case.id for case in CASES])
def broken(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Broken, Path]:
    case: Broken = request.param
    path = tmp_path / "verifier.json"
    path.write_text(case.text(), encoding="utf-8")
    return case, path


def test_a_broken_file_is_one_config_error_with_one_problem(broken: tuple[Broken, Path]) -> None:
    _, path = broken
    assert len(_error(path).problems) == 1


def test_the_problem_is_keyed_by_the_dotted_path_the_file_uses(
    broken: tuple[Broken, Path],
) -> None:
    case, path = broken
    assert [key for key, _ in _error(path).problems] == [case.key]


def test_the_message_names_the_file_and_the_key(broken: tuple[Broken, Path]) -> None:
    case, path = broken
    message = str(_error(path))
    assert message.startswith(f"{path}: invalid verifier config: {case.key}")


def test_the_message_says_what_is_wrong(broken: tuple[Broken, Path]) -> None:
    case, path = broken
    assert case.says in str(_error(path))


def test_the_message_never_echoes_the_secret(broken: tuple[Broken, Path]) -> None:
    _, path = broken
    error = _error(path)
    assert API_KEY not in f"{error} {error.problems!r}"


def test_check_config_prints_the_message_on_stderr_and_exits_2(
    broken: tuple[Broken, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = broken
    expected = f"replyguard check-config: {_error(path)}\n"
    assert main(["check-config", str(path)]) == 2
    assert capsys.readouterr() == ("", expected)


# -- the tables cover every key --------------------------------------------------------------------


def test_every_verifier_key_has_a_wrong_type_case() -> None:
    assert set(WRONG_TYPES) == _aliases(VerifierConfig)


def test_every_circuit_breaker_key_has_a_wrong_type_case() -> None:
    assert set(CIRCUIT_BREAKER_WRONG_TYPES) == _aliases(CircuitBreakerConfig)


@pytest.mark.parametrize("spec", specs.CheckSpec.__args__[0].__args__, ids=lambda s: s.__name__)
def test_every_check_key_has_a_wrong_type_case(spec: type[BaseModel]) -> None:
    kind = spec.model_fields["type"].annotation.__args__[0]  # type: ignore[union-attr]
    covered = {"type", *COMMON_CHECK_WRONG_TYPES, *CHECK_WRONG_TYPES[kind]}
    assert covered == _aliases(spec)


def test_every_field_rule_key_has_a_wrong_type_case() -> None:
    assert set(FIELD_RULE_WRONG_TYPES) == _aliases(specs.FieldRule)


def test_each_valid_check_base_loads() -> None:
    """The wrong-type cases break one key of a valid entry, not an entry broken already."""
    config = VerifierConfig.from_dict({"checks": list(CHECK_BASES.values())})
    assert len(config.checks) == len(CHECK_BASES)
