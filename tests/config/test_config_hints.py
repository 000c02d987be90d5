"""Config errors help the person who wrote the file: a misspelt key gets the closest real one,
and no message shows an internal class name or echoes the value given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replyguard import ConfigError, VerifierConfig


def _problems(tmp_path: Path, config: object) -> dict[str, str]:
    path = tmp_path / "verifier.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        VerifierConfig.load(path)
    return dict(caught.value.problems)


@pytest.mark.parametrize(
    ("config", "key", "hint"),
    [
        ({"maxAtempts": 2}, "maxAtempts", "maxAttempts"),
        ({"runKinds": {"quick": {"maxCostUSD": 1}}}, "runKinds.quick.maxCostUSD", "maxCostUsd"),
        (
            {"checks": [{"type": "rules", "forbidenPhrases": ["x"]}]},
            "checks.0.forbidenPhrases",
            "forbiddenPhrases",
        ),
    ],
)
def test_a_misspelt_key_gets_the_closest_real_one(
    tmp_path: Path, config: dict[str, object], key: str, hint: str
) -> None:
    assert _problems(tmp_path, config) == {key: f"unknown key (did you mean `{hint}`?)"}


def test_a_key_like_no_other_gets_no_hint(tmp_path: Path) -> None:
    assert _problems(tmp_path, {"zzzqqq": 1}) == {"zzzqqq": "unknown key"}


def test_the_hint_comes_from_code_built_configs_too() -> None:
    with pytest.raises(ConfigError) as caught:
        VerifierConfig.from_dict({"verifyAl": True})
    assert caught.value.problems == [("verifyAl", "unknown key (did you mean `verifyAll`?)")]


def test_a_bad_regular_expression_is_not_echoed(tmp_path: Path) -> None:
    pattern = "order-number(unclosed"
    config = {"checks": [{"type": "rules", "mustNotMatch": [pattern]}]}
    problems = _problems(tmp_path, config)
    (message,) = problems.values()
    assert message.startswith("not a valid regular expression: missing ), unterminated")
    assert pattern not in message


@pytest.mark.parametrize("key", ["runKinds", "circuitBreaker", "router"])
def test_an_object_key_given_something_else_names_no_class(tmp_path: Path, key: str) -> None:
    assert _problems(tmp_path, {key: [1]}) == {key: "must be a JSON object"}


def test_a_hint_names_only_a_key_of_the_same_object(tmp_path: Path) -> None:
    """``fallbackModels`` is a top-level key, not one of the router's: no hint there."""
    router = {"deployments": [{"modelName": "judge", "model": "openai/gpt-4o"}], "fallbacks": []}
    problems = _problems(tmp_path, {"model": "judge", "router": router})
    assert problems == {"router.fallbacks": "unknown key"}


def test_a_check_hint_comes_from_its_own_type(tmp_path: Path) -> None:
    """``maxLength`` belongs to a rules check; a json check's misspelling is not sent there."""
    problems = _problems(tmp_path, {"checks": [{"type": "json", "maxLenght": 3}]})
    assert problems == {"checks.0.maxLenght": "unknown key"}
    problems = _problems(tmp_path, {"checks": [{"type": "rules", "maxLenght": 3}]})
    assert problems == {"checks.0.maxLenght": "unknown key (did you mean `maxLength`?)"}
