"""The suite-wide secrets guard (``conftest.secrets_guard``), and what third parties log.

The guard sees every record of every logger at every level, DEBUG included, without changing
what any handler sees, and fails a test at teardown when a record carries one of
``KNOWN_KEYS``. Its own tests below log a key on purpose and then ``forgive()`` it.

The last part runs real judge calls through litellm to the loopback provider, both wire
formats, both key shapes, with litellm's own (redacting) stream handler removed the way hosts
remove it to silence it: litellm and the OpenAI SDK log no key at any level, except litellm's
DEBUG "RAW RESPONSE" record, which holds a 200 response's body as it came, so a provider or
proxy that echoes the key in one puts it there (replyguard does not patch third-party loggers;
see the report). replyguard's own records never carry it.
"""

from __future__ import annotations

import ast
import logging
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import API_KEY, KNOWN_KEYS, SecretsGuard, watching_every_record
from replyguard import Outcome, Turn, Verifier, VerifierConfig
from replyguard.testing import ScriptedAgent
from support.provider_server import ANTHROPIC, OPENAI, ProviderServer, Step, Wire

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent
LIBRARY = "some.sdk"
"""A logger nobody configured: its effective level is WARNING."""
DEBUG_RECORD = {"name": LIBRARY, "levelno": logging.DEBUG, "levelname": "DEBUG"}


def _raise_with_key() -> None:
    raise RuntimeError(f"401 from upstream for key {API_KEY}")


def _log_exception(logger: logging.Logger) -> None:
    try:
        _raise_with_key()
    except RuntimeError:
        logger.debug("call failed", exc_info=True)


WAYS: dict[str, Callable[[logging.Logger], None]] = {
    "message": lambda log: log.debug(f"calling with key {API_KEY}"),
    "args": lambda log: log.debug("calling with %s", {"headers": {"x-api-key": API_KEY}}),
    "extra": lambda log: log.debug("calling", extra={"request": {"key": API_KEY}}),
    "exc_info": _log_exception,
    "exc_text": lambda log: log.handle(
        logging.makeLogRecord({**DEBUG_RECORD, "msg": "failed", "exc_text": API_KEY})
    ),
    "stack_info": lambda log: log.handle(
        logging.makeLogRecord({**DEBUG_RECORD, "msg": "here", "stack_info": API_KEY})
    ),
}


# -- the guard ------------------------------------------------------------------------------------


@pytest.mark.parametrize("way", WAYS.values(), ids=WAYS.keys())
def test_the_guard_catches_a_key_in_a_debug_record_nobody_enabled(
    secrets_guard: SecretsGuard, way: Callable[[logging.Logger], None]
) -> None:
    way(logging.getLogger(LIBRARY))
    assert [leak.logger for leak in secrets_guard.forgive()] == [LIBRARY]


def test_the_guard_catches_a_key_in_a_visible_record(secrets_guard: SecretsGuard) -> None:
    logging.getLogger(LIBRARY).error("bad key %s", API_KEY)
    assert [leak.level for leak in secrets_guard.forgive()] == [logging.ERROR]


@pytest.mark.parametrize("key", KNOWN_KEYS)
def test_the_guard_knows_every_test_key(secrets_guard: SecretsGuard, key: str) -> None:
    logging.getLogger(LIBRARY).debug("key: %s", key)
    assert len(secrets_guard.forgive()) == 1


def test_the_guard_never_repeats_the_key_it_found(secrets_guard: SecretsGuard) -> None:
    logging.getLogger(LIBRARY).debug("key: %s", API_KEY)
    (leak,) = secrets_guard.forgive()
    assert API_KEY not in str(leak) and "<KNOWN_KEYS[0]>" in str(leak)


def test_a_record_without_a_key_is_no_leak(secrets_guard: SecretsGuard) -> None:
    logging.getLogger(LIBRARY).debug("calling with %s", {"key": "[REDACTED]"})
    assert secrets_guard.forgive() == []


def test_a_record_below_its_logger_level_does_not_reach_caplog(
    secrets_guard: SecretsGuard, caplog: pytest.LogCaptureFixture
) -> None:
    logging.getLogger(LIBRARY).debug("hidden")
    logging.getLogger(LIBRARY).warning("shown")
    assert [r.getMessage() for r in caplog.records] == ["shown"]


def test_a_record_below_its_logger_level_reaches_no_handler(secrets_guard: SecretsGuard) -> None:
    seen: list[str] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger(LIBRARY)
    logger.addHandler(handler)
    try:
        logger.debug("hidden")
        logger.warning("shown")
    finally:
        logger.removeHandler(handler)
    assert seen == ["shown"]


def test_caplog_at_debug_still_gets_debug_records(
    secrets_guard: SecretsGuard, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LIBRARY)
    logging.getLogger(LIBRARY).debug("shown")
    assert [r.getMessage() for r in caplog.records] == ["shown"]


def test_watching_puts_logging_back_as_it_found_it() -> None:
    before = (logging.Logger.isEnabledFor, logging.Logger.handle)
    with watching_every_record(SecretsGuard()):
        pass
    assert (logging.Logger.isEnabledFor, logging.Logger.handle) == before


@pytest.mark.slow  # a pytester subprocess: `.ci/run` runs it in its slow step
def test_a_test_that_logs_a_known_key_fails_at_teardown(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((TESTS / "conftest.py").read_text(encoding="utf-8"))
    shutil.copytree(TESTS / "support", pytester.path / "support")
    pytester.makepyfile(
        test_leaky="""
        import logging
        from conftest import API_KEY

        def test_leaky():
            logging.getLogger("some.sdk").debug("sending %s", API_KEY)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-o", "asyncio_mode=auto")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*1 log record(s) carry a known API key*", "*some.sdk DEBUG*"])
    assert API_KEY not in result.stdout.str()


# -- every key the tests use is known --------------------------------------------------------------

_KEY_SHAPE = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}")
_KEY_NAME = re.compile(r"(?:^|_)(?:KEY|SECRET)$")
KEY_ARGUMENTS = ("apiKey", "api_key")
NOT_KEYS = {
    "sk-shaped-key": "a pytest id",
    "ana.secret@example.com": "a PII value for the redact hook, not a credential",
    "": "a key variable set but empty (test_check_config_credentials)",
    "unused": "a placeholder apiKey for a proxy that takes none (test_check_config_credentials)",
}


def _credentials(tree: ast.AST) -> set[str]:
    """Key-shaped strings, constants named ``*_KEY``/``*SECRET``, ``apiKey``/``api_key``
    values, and values of ``setenv("*KEY*", ...)`` in one test module."""
    found: set[str] = set()

    def text(node: ast.AST | None) -> str | None:
        return (
            node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
        )

    for node in ast.walk(tree):
        if (value := text(node)) is not None:
            found.update(_KEY_SHAPE.findall(value))
        elif isinstance(node, ast.Assign) and (value := text(node.value)) is not None:
            if any(isinstance(t, ast.Name) and _KEY_NAME.search(t.id) for t in node.targets):
                found.add(value)
        elif isinstance(node, ast.Dict):
            pairs = zip(node.keys, node.values, strict=True)
            found.update(v for k, i in pairs if text(k) in KEY_ARGUMENTS and (v := text(i)))
        elif isinstance(node, ast.keyword) and node.arg in KEY_ARGUMENTS:
            found.update(v for v in [text(node.value)] if v is not None)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "setenv":
            name, value = (text(arg) for arg in [*node.args, None, None][:2])
            if name is not None and "KEY" in name and value is not None:
                found.add(value)
    return {v for v in found if not v.startswith("env:") and v != "**********"}


def test_every_key_the_tests_use_is_a_known_key() -> None:
    used = set().union(
        *(
            _credentials(ast.parse(path.read_text(encoding="utf-8")))
            for path in TESTS.rglob("*.py")
            if "node_modules" not in path.parts  # the npm packages the Node tests drive
        )
    )
    assert used - set(NOT_KEYS) - set(KNOWN_KEYS) == set()


# -- what litellm and the OpenAI SDK log, at every level ------------------------------------------

PLAIN_KEY = KNOWN_KEYS[7]
"""No API-key shape: only redaction of the configured key could hide it."""
KEYS = [pytest.param(API_KEY, id="sk-shaped-key"), pytest.param(PLAIN_KEY, id="plain-key")]
WIRES = [pytest.param(ANTHROPIC, id="anthropic"), pytest.param(OPENAI, id="openai")]
FAULTS: dict[str, Callable[[Wire, str], Step]] = {
    "pass": lambda wire, key: Step(text="All there.\nPASS"),
    "401-echoing-the-key": lambda w, k: Step(status=401, body=w.error(401, f"Bad key: {k}.")),
    "429-echoing-the-key": lambda w, k: Step(status=429, body=w.error(429, f"Slow down {k}")),
    "500-echoing-the-key": lambda w, k: Step(status=500, body=w.error(500, f"Upstream: {k}")),
    "502-html-echoing-the-key": lambda w, k: Step(status=502, body=f"<p>key={k}</p>".encode()),
    "dropped-connection": lambda wire, key: Step(drop=True),
}


@pytest.fixture
def without_litellm_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm's own stream handler redacts key-shaped values (it mutates the record); hosts
    often remove it to silence litellm, and then nothing does."""
    monkeypatch.setattr(logging.getLogger("LiteLLM"), "handlers", [])


async def _turn(server: ProviderServer, wire: Wire, key: str, step: Step) -> Outcome:
    server.push(step)
    config = VerifierConfig.from_dict(
        {
            "enabled": True,
            "verifyAll": True,
            "maxAttempts": 1,
            "model": wire.judge_model,
            "agentModel": wire.agent_model,
            "apiKey": key,
            "apiBase": server.url,
        }
    )
    return await Verifier(config).run(ScriptedAgent(["Done."]), Turn(user_message="Hi"))


@pytest.mark.usefixtures("without_litellm_handler")
@pytest.mark.parametrize("fault", FAULTS.values(), ids=FAULTS.keys())
@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("wire", WIRES)
async def test_no_record_of_any_logger_carries_the_key(
    provider: ProviderServer,
    secrets_guard: SecretsGuard,
    wire: Wire,
    key: str,
    fault: Callable[[Wire, str], Step],
) -> None:
    await _turn(provider, wire, key, fault(wire, key))
    assert [str(leak) for leak in secrets_guard.forgive()] == []


@pytest.mark.parametrize("wire", WIRES)
async def test_the_guard_watched_litellm_at_debug(
    provider: ProviderServer, secrets_guard: SecretsGuard, wire: Wire
) -> None:
    """The test above is not vacuous: litellm's DEBUG records were made and checked."""
    await _turn(provider, wire, API_KEY, FAULTS["pass"](wire, API_KEY))
    assert "LiteLLM" in secrets_guard.loggers


async def test_the_guard_watched_the_openai_sdk_at_debug(
    provider: ProviderServer, secrets_guard: SecretsGuard
) -> None:
    await _turn(provider, OPENAI, API_KEY, FAULTS["pass"](OPENAI, API_KEY))
    assert "openai._base_client" in secrets_guard.loggers


@pytest.mark.usefixtures("without_litellm_handler")
@pytest.mark.parametrize("key", KEYS)
async def test_a_key_echoed_in_a_200_body_reaches_only_litellm_debug_records(
    provider: ProviderServer, secrets_guard: SecretsGuard, key: str
) -> None:
    """litellm logs a 200 response's raw body at DEBUG ("RAW RESPONSE"), before it is parsed:
    a proxy that echoes the key in a page it serves with 200 puts the key there. Nothing at
    INFO or above, and nothing of replyguard's, carries it."""
    page = Step(status=200, body=f"<html>proxy error for key {key}</html>".encode())
    await _turn(provider, ANTHROPIC, key, page)
    leaks = secrets_guard.forgive()
    assert {(leak.logger, leak.level) for leak in leaks} == {("LiteLLM", logging.DEBUG)}
