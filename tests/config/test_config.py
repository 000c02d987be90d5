"""``VerifierConfig``: defaults, camelCase keys, loading, validation and secrecy of the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic.alias_generators import to_camel

from replyguard import ConfigError, VerifierConfig

SECRET = "sk-live-SECRETKEY-0123456789abcdef"
NESTED = ("agents", "defaults", "verifier")

# The contract's defaults table: JSON key, Python attribute, default.
CONTRACT_DEFAULTS: list[tuple[str, str, Any]] = [
    ("enabled", "enabled", False),
    ("model", "model", "anthropic/claude-sonnet-4-5"),
    ("agentModel", "agent_model", None),
    ("requireCrossFamily", "require_cross_family", False),
    ("fallbackModels", "fallback_models", ()),
    ("apiBase", "api_base", None),
    ("apiKey", "api_key", None),
    ("verifyAll", "verify_all", False),
    ("verifyHeartbeat", "verify_heartbeat", False),
    ("maxAttempts", "max_attempts", 3),
    (
        "triggerKeywords",
        "trigger_keywords",
        ("done", "completed", "finished", "ready", "here you go"),
    ),
    ("timeoutSeconds", "timeout_seconds", 30),
    ("contextTokenBudget", "context_token_budget", 8000),
    ("responseTokenCap", "response_token_cap", 3000),
    ("rulesTokenCap", "rules_token_cap", 2000),
    ("historyTurns", "history_turns", 5),
    ("workspaceDir", "workspace_dir", None),
    ("rulesFiles", "rules_files", ("AGENTS.md", "SOUL.md")),
    ("heartbeatFile", "heartbeat_file", "HEARTBEAT.md"),
    ("maxCostUsd", "max_cost_usd", None),
    ("judgeMaxTokens", "judge_max_tokens", 512),
    ("judgeAnswer", "judge_answer", "reasoning_first"),
    ("logContent", "log_content", False),
]
# Keys added beyond the contract's table (checks before the judge).
CHECK_KEYS = {
    "checks": "checks",
    "judgeAfterChecks": "judge_after_checks",
    "maxLatencyMs": "max_latency_ms",
    "runKinds": "run_kinds",
    "circuitBreaker": "circuit_breaker",
    "maxConcurrentJudgeCalls": "max_concurrent_judge_calls",
    "sampleRate": "sample_rate",
    "deliver": "deliver",
    "onExhausted": "on_exhausted",
    "ledgerPath": "ledger_path",
    "hookTimeoutSeconds": "hook_timeout_seconds",
    "agentThreads": "agent_threads",
    "streaming": "streaming",
    "onSuspectedInjection": "on_suspected_injection",
    "sideEffectTools": "side_effect_tools",
    "onSideEffects": "on_side_effects",
    "mode": "mode",
    "router": "router",
    "tracing": "tracing",
    "state": "state",
    "spendLimits": "spend_limits",
    "rubricFile": "rubric_file",
    "categories": "categories",
    "panel": "panel",
    "serve": "serve",
}

# One non-default value per key, to prove the JSON key reaches the attribute.
NON_DEFAULTS: dict[str, Any] = {
    "enabled": True,
    "model": "gemini/gemini-2.5-pro",
    "agentModel": "openai/gpt-4o",
    "requireCrossFamily": True,
    "fallbackModels": ["openai/gpt-4o-mini"],
    "apiBase": "http://127.0.0.1:9999",
    "verifyAll": True,
    "verifyHeartbeat": True,
    "maxAttempts": 5,
    "triggerKeywords": ["shipped"],
    "timeoutSeconds": 12.5,
    "contextTokenBudget": 16000,
    "responseTokenCap": 4000,
    "rulesTokenCap": 1000,
    "historyTurns": 9,
    "workspaceDir": "/srv/agent",
    "rulesFiles": ["docs/RULES.md"],
    "heartbeatFile": "tasks/HEARTBEAT.md",
    "maxCostUsd": 0.25,
    "judgeMaxTokens": 1024,
    "judgeAnswer": "verdict_first",
    "logContent": True,
}


def _write(folder: Path, document: Any, name: str = "verifier.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _nest(verifier: Any) -> dict[str, Any]:
    return {"agents": {"defaults": {"verifier": verifier}}}


def _error(data: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        VerifierConfig.from_dict(data)
    return caught.value


# -- defaults and key names -------------------------------------------------------------------


@pytest.mark.parametrize(("json_key", "attribute", "default"), CONTRACT_DEFAULTS)
def test_default_matches_the_contract(json_key: str, attribute: str, default: Any) -> None:
    assert getattr(VerifierConfig(), attribute) == default


def test_contract_table_lists_every_key() -> None:
    expected = {attribute for _, attribute, _ in CONTRACT_DEFAULTS} | set(CHECK_KEYS.values())
    assert set(VerifierConfig.model_fields) == expected


def test_an_empty_object_gives_the_defaults() -> None:
    assert VerifierConfig.from_dict({}) == VerifierConfig()


@pytest.mark.parametrize(("json_key", "attribute"), [(k, a) for k, a, _ in CONTRACT_DEFAULTS])
def test_camel_case_json_key_sets_the_snake_case_attribute(json_key: str, attribute: str) -> None:
    if json_key == "apiKey":
        config = VerifierConfig.from_dict({"apiKey": SECRET})
        assert config.resolve_api_key() == SECRET
    else:
        config = VerifierConfig.from_dict({json_key: NON_DEFAULTS[json_key]})
        value = getattr(config, attribute)
        assert (list(value) if isinstance(value, tuple) else value) == NON_DEFAULTS[json_key]


def test_dump_by_alias_uses_camel_case_keys() -> None:
    dumped = VerifierConfig().model_dump(mode="json", by_alias=True)
    assert set(dumped) == {json_key for json_key, _, _ in CONTRACT_DEFAULTS} | set(CHECK_KEYS)


@pytest.mark.parametrize("snake_key", ["max_attempts", "api_key", "workspace_dir", "verify_all"])
def test_snake_case_json_key_is_an_unknown_key_with_its_camel_case_hint(snake_key: str) -> None:
    camel = to_camel(snake_key)
    expected = f"unknown key (did you mean `{camel}`?)"
    assert _error({snake_key: None}).problems == [(snake_key, expected)]


def test_config_is_frozen() -> None:
    config = VerifierConfig()
    with pytest.raises(ValueError, match="frozen"):
        config.max_attempts = 9  # type: ignore[misc]


# -- validation ---------------------------------------------------------------------------------


def test_unknown_key_is_named() -> None:
    assert _error({"maxAtempts": 3}).problems == [
        ("maxAtempts", "unknown key (did you mean `maxAttempts`?)")
    ]


def test_schema_key_is_ignored() -> None:
    config = VerifierConfig.from_dict({"$schema": "./verifier.schema.json", "enabled": True})
    assert config.enabled is True


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("maxAttempts", "3"),
        ("maxAttempts", 2.5),
        ("maxAttempts", True),
        ("enabled", "yes"),
        ("enabled", 1),
        ("contextTokenBudget", "8000"),
        ("timeoutSeconds", "30"),
        ("triggerKeywords", "done"),
        ("fallbackModels", "openai/gpt-4o"),
        ("model", None),
        ("apiKey", 12345678),
        ("rulesFiles", "AGENTS.md"),
    ],
    ids=repr,
)
def test_wrong_type_is_an_error_naming_the_key(key: str, value: Any) -> None:
    assert [name for name, _ in _error({key: value}).problems] == [key]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("maxAttempts", 0),
        ("maxAttempts", -1),
        ("timeoutSeconds", -1),
        ("timeoutSeconds", 0),
        ("contextTokenBudget", 999),
        ("contextTokenBudget", 0),
        ("historyTurns", -1),
        ("rulesTokenCap", -1),
        ("maxCostUsd", -0.01),
    ],
)
def test_out_of_range_value_is_an_error_naming_the_key(key: str, value: Any) -> None:
    assert [name for name, _ in _error({key: value}).problems] == [key]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("maxAttempts", 1),
        ("timeoutSeconds", 0.5),
        ("contextTokenBudget", 1000),
        ("historyTurns", 0),
        ("rulesTokenCap", 0),
        ("maxCostUsd", 0),
    ],
)
def test_boundary_value_is_accepted(key: str, value: Any) -> None:
    config = VerifierConfig.from_dict({key: value})
    assert config.model_dump(by_alias=True)[key] == value


@pytest.mark.parametrize("model", ["", "   "], ids=repr)
def test_blank_model_is_an_error(model: str) -> None:
    assert [name for name, _ in _error({"model": model}).problems] == ["model"]


def test_every_bad_key_is_reported_at_once() -> None:
    problems = _error({"maxAttempts": 0, "enabled": "yes", "colour": "blue"}).problems
    assert sorted(name for name, _ in problems) == ["colour", "enabled", "maxAttempts"]


@pytest.mark.parametrize("data", [[], "enabled", None, 3], ids=repr)
def test_a_non_object_is_an_error(data: Any) -> None:
    with pytest.raises(ConfigError, match="JSON object"):
        VerifierConfig.from_dict(data)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("rulesFiles", ["../AGENTS.md"]),
        ("rulesFiles", ["docs/../../AGENTS.md"]),
        ("rulesFiles", ["..\\AGENTS.md"]),
        ("rulesFiles", ["/etc/passwd"]),
        ("rulesFiles", ["C:\\Users\\me\\AGENTS.md"]),
        ("rulesFiles", ["\\\\server\\share\\AGENTS.md"]),
        ("rulesFiles", ["AGENTS.md", "/etc/passwd"]),
        ("rulesFiles", [""]),
        ("heartbeatFile", "../HEARTBEAT.md"),
        ("heartbeatFile", "/tmp/HEARTBEAT.md"),
    ],
    ids=repr,
)
def test_workspace_file_outside_the_workspace_is_rejected(key: str, value: Any) -> None:
    assert [name.split(".")[0] for name, _ in _error({key: value}).problems] == [key]


@pytest.mark.parametrize("name", ["docs/AGENTS.md", "./SOUL.md", "notes..md"])
def test_workspace_file_inside_the_workspace_is_accepted(name: str) -> None:
    assert VerifierConfig.from_dict({"rulesFiles": [name]}).rules_files == (name,)


# -- effective judge token limit -------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "judge_max_tokens", "expected"),
    [
        ("anthropic/claude-sonnet-4-5", None, 512),
        ("openai/o3-mini", None, 4096),
        ("gpt-5", None, 4096),
        ("openai/o3-mini", 1000, 1000),
        ("openai/o3-mini", 512, 512),
        ("anthropic/claude-sonnet-4-5", 2048, 2048),
    ],
)
def test_effective_judge_max_tokens(
    model: str, judge_max_tokens: int | None, expected: int
) -> None:
    data: dict[str, Any] = {"model": model}
    if judge_max_tokens is not None:
        data["judgeMaxTokens"] = judge_max_tokens
    assert VerifierConfig.from_dict(data).effective_judge_max_tokens == expected


# -- the API key ----------------------------------------------------------------------------


def test_literal_api_key_never_shows_in_repr_str_or_json_dump() -> None:
    config = VerifierConfig.from_dict({"apiKey": SECRET})
    shown = [
        repr(config),
        str(config),
        json.dumps(config.model_dump(mode="json")),
        json.dumps(config.model_dump(mode="json", by_alias=True)),
        config.model_dump_json(),
    ]
    assert [SECRET in text for text in shown] == [False] * len(shown)


@pytest.mark.parametrize(
    "data",
    [
        {"apiKey": SECRET, "maxAttempts": "three"},
        {"apiKey": SECRET, "colour": "blue"},
        {"apiKey": [SECRET]},
        {"apiKey": {"value": SECRET}},
    ],
    ids=["sibling-wrong-type", "sibling-unknown", "key-in-a-list", "key-in-an-object"],
)
def test_config_error_never_echoes_the_api_key(data: dict[str, Any]) -> None:
    error = _error(data)
    assert SECRET not in str(error)
    assert SECRET not in repr(error.problems)


def test_config_error_for_a_numeric_api_key_does_not_echo_it() -> None:
    assert "987654321" not in str(_error({"apiKey": 987654321}))


def test_literal_api_key_is_resolved_as_is() -> None:
    assert VerifierConfig.from_dict({"apiKey": SECRET}).resolve_api_key() == SECRET


def test_no_api_key_resolves_to_none() -> None:
    assert VerifierConfig().resolve_api_key() is None


def test_env_api_key_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RG_TEST_JUDGE_KEY", raising=False)
    config = VerifierConfig.from_dict({"apiKey": "env:RG_TEST_JUDGE_KEY"})
    monkeypatch.setenv("RG_TEST_JUDGE_KEY", "first-value")
    assert config.resolve_api_key() == "first-value"
    monkeypatch.setenv("RG_TEST_JUDGE_KEY", "rotated-value")
    assert config.resolve_api_key() == "rotated-value"


@pytest.mark.parametrize("value", [None, ""], ids=["unset", "empty"])
def test_env_api_key_without_a_value_is_a_config_error_naming_api_key(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("RG_TEST_JUDGE_KEY", raising=False)
    else:
        monkeypatch.setenv("RG_TEST_JUDGE_KEY", value)
    config = VerifierConfig.from_dict({"apiKey": "env:RG_TEST_JUDGE_KEY"})
    with pytest.raises(ConfigError) as caught:
        config.resolve_api_key()
    assert [name for name, _ in caught.value.problems] == ["apiKey"]
    assert "RG_TEST_JUDGE_KEY" in str(caught.value)


@pytest.mark.parametrize("value", ["env:", "env:   "], ids=repr)
def test_env_reference_without_a_name_is_rejected(value: str) -> None:
    assert [name for name, _ in _error({"apiKey": value}).problems] == ["apiKey"]


# -- load() ------------------------------------------------------------------------------------


def test_load_reads_a_bare_verifier_object(tmp_path: Path) -> None:
    path = _write(tmp_path, {"enabled": True, "maxAttempts": 2})
    config = VerifierConfig.load(path)
    assert (config.enabled, config.max_attempts) == (True, 2)


def test_load_reads_the_verifier_nested_at_agents_defaults_verifier(tmp_path: Path) -> None:
    document = _nest({"enabled": True, "maxAttempts": 2})
    document["agents"]["defaults"]["model"] = "openai/gpt-4o"  # the host's own keys are left alone
    document["gateway"] = {"port": 8080}
    config = VerifierConfig.load(_write(tmp_path, document))
    assert (config.enabled, config.max_attempts) == (True, 2)


@pytest.mark.parametrize("nested", [False, True], ids=["bare", "nested"])
def test_load_ignores_a_schema_key(tmp_path: Path, nested: bool) -> None:
    verifier = {"$schema": "https://example.com/verifier.schema.json", "enabled": True}
    document = _nest(verifier) if nested else verifier
    assert VerifierConfig.load(_write(tmp_path, document)).enabled is True


@pytest.mark.parametrize(
    "document",
    [{"agents": {}}, {"agents": {"defaults": {}}}, {"agents": {"defaults": {"model": "x"}}}],
    ids=["no-defaults", "no-verifier", "defaults-without-verifier"],
)
def test_load_of_agents_without_a_verifier_names_the_path(tmp_path: Path, document: Any) -> None:
    path = _write(tmp_path, document)
    with pytest.raises(ConfigError) as caught:
        VerifierConfig.load(path)
    assert "agents.defaults.verifier" in str(caught.value)
    assert str(path) in str(caught.value)


def test_load_of_a_verifier_that_is_not_an_object_names_the_path(tmp_path: Path) -> None:
    path = _write(tmp_path, _nest(True))
    with pytest.raises(ConfigError, match=r"agents\.defaults\.verifier"):
        VerifierConfig.load(path)


@pytest.mark.parametrize(
    ("document", "key"),
    [
        ({"maxAtempts": 3}, "maxAtempts"),
        (_nest({"maxAtempts": 3}), "agents.defaults.verifier.maxAtempts"),
        (_nest({"maxAttempts": 0}), "agents.defaults.verifier.maxAttempts"),
    ],
    ids=["bare", "nested-unknown", "nested-out-of-range"],
)
def test_load_error_names_the_file_and_the_dotted_key(
    tmp_path: Path, document: Any, key: str
) -> None:
    path = _write(tmp_path, document)
    with pytest.raises(ConfigError) as caught:
        VerifierConfig.load(path)
    assert caught.value.path == str(path)
    assert [name for name, _ in caught.value.problems] == [key]
    assert str(path) in str(caught.value)
    assert key in str(caught.value)


def test_load_of_broken_json_names_the_file_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "verifier.json"
    path.write_text('{\n  "enabled": true,\n  "maxAttempts": ,\n}\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        VerifierConfig.load(path)
    assert str(path) in str(caught.value)
    assert "line 3" in str(caught.value)


def test_load_of_broken_json_does_not_echo_the_api_key(tmp_path: Path) -> None:
    path = tmp_path / "verifier.json"
    path.write_text(f'{{"apiKey": "{SECRET}", "enabled": tru}}', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        VerifierConfig.load(path)
    assert SECRET not in str(caught.value)


def test_load_error_for_a_sibling_key_does_not_echo_the_api_key(tmp_path: Path) -> None:
    path = _write(tmp_path, _nest({"apiKey": SECRET, "maxAttempts": "3"}))
    with pytest.raises(ConfigError) as caught:
        VerifierConfig.load(path)
    assert SECRET not in str(caught.value)


def test_load_of_a_missing_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    with pytest.raises(ConfigError) as caught:
        VerifierConfig.load(path)
    assert str(path) in str(caught.value)
    assert "not found" in str(caught.value)


@pytest.mark.parametrize("document", [[], "text", 3, None], ids=repr)
def test_load_of_a_non_object_document_is_an_error(tmp_path: Path, document: Any) -> None:
    with pytest.raises(ConfigError, match="JSON object"):
        VerifierConfig.load(_write(tmp_path, document))


@pytest.mark.parametrize(
    ("workspace_dir", "expected"),
    [("ws", "conf/ws"), ("./ws/sub", "conf/ws/sub"), ("../ws", "ws"), (".", "conf")],
)
@pytest.mark.parametrize("nested", [False, True], ids=["bare", "nested"])
def test_load_resolves_a_relative_workspace_dir_against_the_config_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workspace_dir: str, expected: str, nested: bool
) -> None:
    monkeypatch.chdir(tmp_path)  # the working directory is not the config's folder
    verifier = {"workspaceDir": workspace_dir}
    path = _write(tmp_path / "conf", _nest(verifier) if nested else verifier)
    assert VerifierConfig.load(path).workspace_dir == str((tmp_path / expected).resolve())


def test_load_keeps_an_absolute_workspace_dir(tmp_path: Path) -> None:
    workspace = tmp_path / "elsewhere"
    path = _write(tmp_path / "conf", {"workspaceDir": str(workspace)})
    assert VerifierConfig.load(path).workspace_dir == str(workspace)


def test_load_accepts_a_str_path(tmp_path: Path) -> None:
    path = _write(tmp_path, {"enabled": True})
    assert VerifierConfig.load(str(path)).enabled is True


def test_list_settings_cannot_be_changed_after_construction() -> None:
    config = VerifierConfig.from_dict({"triggerKeywords": ["done"], "fallbackModels": ["x/y"]})
    assert isinstance(config.trigger_keywords, tuple)
    assert isinstance(config.fallback_models, tuple)
    assert isinstance(config.rules_files, tuple)


def test_workspace_dir_accepts_a_path_in_code(tmp_path: Path) -> None:
    assert VerifierConfig(workspace_dir=tmp_path).workspace_dir == str(tmp_path)


def test_a_masked_key_is_refused_rather_than_sent() -> None:
    dumped = VerifierConfig(api_key=SECRET).model_dump(mode="json", by_alias=True)
    assert dumped["apiKey"] == "**********"
    assert _error({"apiKey": dumped["apiKey"]}).problems[0][0] == "apiKey"
