"""Config errors help the person who wrote the file: a misspelt key gets the closest real one,
and no message shows an internal class name or echoes the value given."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from replyguard import ConfigError, VerifierConfig
from replyguard.config._field_docs import attribute_docs


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


def test_a_schema_that_cannot_be_made_still_gives_the_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hint is looked up in the documented schema; when that cannot be made, the problem
    is still reported as a ``ConfigError`` naming the key, without a hint."""

    def broken() -> dict[str, object]:
        raise SystemError("AST constructor recursion depth mismatch (before=420, after=458)")

    monkeypatch.setattr(VerifierConfig, "json_schema", broken)
    assert _problems(tmp_path, {"maxAtempts": 2}) == {"maxAtempts": "unknown key"}


def test_the_docstrings_survive_cpythons_spurious_parse_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CPython 3.11's AST builder keeps one depth count per interpreter, which a parse in
    another thread can overwrite (python/cpython#106905): the parse is made again."""
    real = ast.parse
    failures = iter([SystemError("AST constructor recursion depth mismatch")])

    def flaky(source: str) -> ast.Module:
        for failure in failures:
            raise failure
        return real(source)

    monkeypatch.setattr(ast, "parse", flaky)
    docs = attribute_docs.__wrapped__(VerifierConfig)
    assert docs["max_attempts"]
    assert next(failures, None) is None  # the failure was met, then the parse made again


def test_a_parse_that_keeps_failing_is_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(source: str) -> ast.Module:
        raise SystemError("AST constructor recursion depth mismatch")

    monkeypatch.setattr(ast, "parse", failing)
    with pytest.raises(SystemError):
        attribute_docs.__wrapped__(VerifierConfig)
