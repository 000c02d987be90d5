"""The ``state`` section: optional (nothing connects without it), its URL a secret, an unset
``env:`` variable refused when the verifier is built and by ``check-config``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from replyguard import Turn, Verifier, VerifierConfig
from replyguard.cli import main
from replyguard.errors import ConfigError
from replyguard.testing import ScriptedAgent, ScriptedJudge
from support.ports import listening_socket
from support.redis_server import REDIS_PASSWORD

URL = f"redis://:{REDIS_PASSWORD}@127.0.0.1:6390/0"


def test_the_dumped_config_masks_the_password_and_keeps_an_env_reference() -> None:
    dumped = VerifierConfig.from_dict({"state": {"redisUrl": URL}}).model_dump(
        mode="json", by_alias=True
    )
    assert dumped["state"] == {
        "redisUrl": "redis://:**********@127.0.0.1:6390/0",
        "keyPrefix": "replyguard:",
        "timeoutMs": 50,
    }
    env = VerifierConfig.from_dict({"state": {"redisUrl": "env:REDIS_URL"}})
    assert env.model_dump(mode="json", by_alias=True)["state"]["redisUrl"] == "env:REDIS_URL"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1:6379", "redis://"),
        ("127.0.0.1:6379", "redis://"),
        ("env:", "variable name"),
        ("redis://:**********@127.0.0.1:6379/0", "mask"),
    ],
)
def test_a_bad_url_is_refused_naming_the_key(url: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        VerifierConfig.from_dict({"state": {"redisUrl": url}})
    assert "state.redisUrl" in str(caught.value)
    assert message in str(caught.value)


def test_an_unset_env_variable_is_refused_when_the_verifier_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("REPLYGUARD_TEST_REDIS_URL", raising=False)
    config = VerifierConfig.from_dict({"state": {"redisUrl": "env:REPLYGUARD_TEST_REDIS_URL"}})
    with pytest.raises(ConfigError) as caught:
        Verifier(config, preload=False)
    assert "state.redisUrl" in str(caught.value)
    assert "REPLYGUARD_TEST_REDIS_URL is not set" in str(caught.value)


def test_check_config_refuses_an_unset_variable_and_never_shows_the_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("REPLYGUARD_TEST_REDIS_URL", raising=False)
    unset = tmp_path / "unset.json"
    unset.write_text(json.dumps({"state": {"redisUrl": "env:REPLYGUARD_TEST_REDIS_URL"}}))
    assert main(["check-config", str(unset)]) == 2
    assert "state.redisUrl: environment variable REPLYGUARD_TEST_REDIS_URL is not set" in (
        capsys.readouterr().out
    )
    literal = tmp_path / "literal.json"
    literal.write_text(json.dumps({"state": {"redisUrl": URL}}))
    # --offline: this config names no judge key, and the case is the password's mask.
    assert main(["check-config", "--offline", "--show", str(literal)]) == 0
    shown = capsys.readouterr()
    assert REDIS_PASSWORD not in shown.out + shown.err
    assert json.loads(shown.out)["state"]["redisUrl"].startswith("redis://:****")


async def test_without_state_the_ledger_says_nothing_of_shared_state(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    config = VerifierConfig.from_dict(
        {"enabled": True, "verifyAll": True, "ledgerPath": str(ledger)}
    )
    verifier = Verifier(config, judge=ScriptedJudge(["PASS"]), preload=False)
    outcome = await verifier.run(ScriptedAgent(["Done."]), Turn(user_message="hi"))
    assert outcome.verdicts[-1].shared_state is None
    assert "sharedState" not in json.loads(await asyncio.to_thread(ledger.read_text))


async def test_with_state_nothing_connects_before_the_first_judgement() -> None:
    with listening_socket() as listener:
        listener.setblocking(False)
        port = listener.getsockname()[1]
        config = VerifierConfig.from_dict({"state": {"redisUrl": f"redis://127.0.0.1:{port}"}})
        verifier = Verifier(config, preload=False)
        with pytest.raises(BlockingIOError):
            listener.accept()
        await verifier.aclose()


def test_litellms_log_records_never_show_a_password_with_escapes_or_percent_encoding() -> None:
    # A password holding a quote and a backslash (escaped in a repr) and %40 (an "@" that
    # redis-py decodes): litellm's records carry it in their arguments, in either spelling.
    import logging

    from replyguard.config._router import RouterConfig
    from replyguard.judge._router import JudgeRouter

    url = "redis://:s3cr%40t'p\\w@localhost:6379/0"
    decoded = "s3cr@t'p\\w"
    config = VerifierConfig.from_dict({"model": "openai/gpt-4o-mini", "state": {"redisUrl": url}})
    assert config.state is not None
    assert decoded in config.state.secrets()
    router = RouterConfig.model_validate({"deployments": [{"modelName": "j", "model": "openai/x"}]})
    redacting = JudgeRouter(router, redis_url=url)._redacting
    for args in (({"password": decoded},), (decoded,), ([url],)):
        record = logging.LogRecord("LiteLLM", logging.DEBUG, __file__, 1, "redis: %s", args, None)
        assert redacting.filter(record)
        assert decoded not in record.getMessage() and "s3cr%40t" not in record.getMessage()
