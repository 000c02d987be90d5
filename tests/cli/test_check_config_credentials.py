"""``replyguard check-config`` fails a config whose judge models litellm would call without a
key, naming the model and the variable (``--offline`` skips that), and counts a key or an
endpoint the config gives, a provider's environment variable, and a provider that needs none.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import API_KEY
from replyguard.cli import main

ROOT = Path(__file__).resolve().parents[2]
# Every variable the judge models of these tests could find a key in.
PROVIDER_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "AZURE_API_KEY",
    "AZURE_API_BASE",
    "MISTRAL_API_KEY",
)


@pytest.fixture(autouse=True)
def _no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROVIDER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: dict[str, Any], *options: str
) -> tuple[int, list[str]]:
    path = tmp_path / "verifier.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    code = main(["check-config", *options, str(path)])
    out, err = capsys.readouterr()
    assert err == ""
    return code, out.splitlines()


def _errors(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("error:")]


def test_the_example_config_without_a_key_fails_naming_model_and_variable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["check-config", str(ROOT / "config.example.json")])
    lines = capsys.readouterr().out.splitlines()
    assert code == 2
    assert _errors(lines) == [
        "error: model: judge model 'anthropic/claude-sonnet-4-5' has no credentials: set "
        "ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), or give it an apiKey in the config; "
        "every call to it would fail open"
    ]
    assert lines[-1].startswith("FAILED: 1 error")


def test_offline_skips_the_keys_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["check-config", "--offline", str(ROOT / "config.example.json")])
    assert code == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("OK: judge ")
    config = {"ledgerPath": str(tmp_path / "gone" / "ledger.jsonl")}
    code, lines = _check(tmp_path, capsys, config, "--offline")
    assert code == 2
    assert [line.split(":")[1] for line in _errors(lines)] == [" ledgerPath"]


def test_the_providers_variable_is_a_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    assert _check(tmp_path, capsys, {"enabled": True})[0] == 0
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")  # set but empty: litellm finds none either
    assert _check(tmp_path, capsys, {"enabled": True})[0] == 2


@pytest.mark.parametrize(
    "keys",
    [
        {"apiKey": API_KEY},
        {"apiKey": "env:REPLYGUARD_TEST_JUDGE_KEY"},
        {"model": "mistral/mistral-large-latest", "apiBase": "http://127.0.0.1:4000"},
        {"model": "ollama/llama3.1"},
        {"model": "vertex_ai/gemini-2.5-pro"},
        {"judgeAfterChecks": "never"},
    ],
    ids=[
        "literal-key",
        "env-key",
        "api-base",
        "keyless-provider",
        "cloud-credential-chain",
        "checks-decide-alone",
    ],
)
def test_a_key_or_endpoint_the_config_gives_counts(
    keys: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REPLYGUARD_TEST_JUDGE_KEY", API_KEY)
    code, lines = _check(tmp_path, capsys, {"enabled": True, **keys})
    assert (code, _errors(lines)) == (0, [])
    assert all(API_KEY not in line for line in lines)


def test_every_model_the_config_can_call_is_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    config = {
        "model": "anthropic/claude-sonnet-4-5",
        "apiKey": "env:ANTHROPIC_API_KEY",
        "fallbackModels": ["openai/gpt-4o-mini", "anthropic/claude-haiku-4-5"],
        "runKinds": {
            "deep": {"model": "gemini/gemini-2.5-pro"},
            "jury": {
                "panel": {"models": ["anthropic/claude-sonnet-4-5", "mistral/mistral-large-latest"]}
            },
        },
    }
    code, lines = _check(tmp_path, capsys, config)
    assert code == 2
    named = [(line.split(": ")[1], line.split("'")[1]) for line in _errors(lines)]
    assert named == [
        ("fallbackModels", "openai/gpt-4o-mini"),
        ("runKinds.deep.model", "gemini/gemini-2.5-pro"),
        ("runKinds.jury.panel.models", "mistral/mistral-large-latest"),
    ]
    variables = [line.split("set ")[1].split(" (or")[0].split(", or")[0] for line in lines[:-1]]
    assert variables == ["OPENAI_API_KEY", "GEMINI_API_KEY", "MISTRAL_API_KEY"]


def test_an_endpoint_counts_where_litellm_sends_without_a_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # litellm's OpenAI, Anthropic, Gemini and Azure clients refuse to send without a key, to
    # any endpoint: a proxy that takes none needs a placeholder apiKey there.
    config = {"apiBase": "http://127.0.0.1:4000"}
    code, lines = _check(tmp_path, capsys, config)
    assert (code, len(_errors(lines))) == (2, 1)
    assert "set ANTHROPIC_API_KEY" in lines[0]
    placeholder = {**config, "apiKey": "unused"}
    assert _check(tmp_path, capsys, placeholder)[0] == 0


def test_each_router_deployment_brings_its_own_key_or_endpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = "http://127.0.0.1:4000"
    deployments = [
        {"modelName": "judges", "model": "azure/gpt-4o"},
        {"modelName": "judges", "model": "azure/gpt-4o", "apiKey": API_KEY},
        {"modelName": "judges", "model": "openai/gpt-4o", "apiBase": base},
        {"modelName": "judges", "model": "mistral/mistral-large-latest", "apiBase": base},
        {"modelName": "judges", "model": "azure/gpt-4o-mini", "apiBase": base},
    ]
    config = {"model": "judges", "router": {"deployments": deployments}}
    code, lines = _check(tmp_path, capsys, config)
    assert code == 2
    assert [line.split(" has no")[0] for line in _errors(lines)] == [
        "error: router.deployments.0: judge model 'azure/gpt-4o'",
        "error: router.deployments.2: judge model 'openai/gpt-4o'",
        "error: router.deployments.4: judge model 'azure/gpt-4o-mini'",
    ]
    assert [line.split("set ")[1].split(",")[0] for line in _errors(lines)] == [
        "AZURE_API_KEY and AZURE_API_BASE",
        "OPENAI_API_KEY",
        "AZURE_API_KEY",
    ]


def test_the_config_key_goes_only_to_its_own_provider_unless_an_endpoint_serves_all(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {"apiKey": API_KEY, "fallbackModels": ["openai/gpt-4o"]}
    code, lines = _check(tmp_path, capsys, config)
    assert (code, [line.split("'")[1] for line in _errors(lines)]) == (2, ["openai/gpt-4o"])
    proxy = {**config, "apiBase": "http://127.0.0.1:4000"}
    assert _check(tmp_path, capsys, proxy)[0] == 0


def test_the_check_does_not_import_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check tells missing keys without litellm (nor the SDKs and tokenizer it brings):
    here none of them can be imported at all (``sys.modules`` holds None for each, so an
    ``import`` of it or of any of its modules raises), whether or not an earlier test of this
    process imported them. (A wall-clock bound stood for this; it failed on a busy machine.)"""
    import replyguard._credentials as credentials
    from replyguard import VerifierConfig

    config = VerifierConfig(fallback_models=("openai/gpt-4o",))
    for name in ("litellm", "openai", "anthropic", "tiktoken"):
        monkeypatch.setitem(sys.modules, name, None)
    found = credentials.missing_credentials(config)
    assert [m.model for m in found] == ["anthropic/claude-sonnet-4-5", "openai/gpt-4o"]
    assert "litellm" not in credentials.__dict__
