"""Shared fixtures: configs, the loopback provider, respx switches, and client cleanup.

Every test also runs under the secrets guard (the autouse ``secrets_guard`` fixture): it sees
every log record of every logger, DEBUG included, and fails the test at teardown when one of
``KNOWN_KEYS`` shows in a record's message, arguments, extra attributes or exception text.
"""

from __future__ import annotations

import logging
import os
import random
import sys
import threading
import traceback
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

import replyguard  # noqa: F401 - sets the offline env defaults before litellm is imported
from replyguard import VerifierConfig
from replyguard.judge._answer_cap import close_every_session
from replyguard.runner._preload import wait_for_preload
from support.provider_server import ProviderServer

JUDGE_MODEL = "anthropic/claude-sonnet-4-5"
AGENT_MODEL = "openai/gpt-4o"
API_KEY = "sk-test-SECRETKEY-0123456789abcdef"

# Every credential value the tests hand to replyguard, litellm or the environment: none of them
# may ever show in a log record. A test that adds a key adds it here (tests/test_secrets_guard.py
# checks that every key-shaped constant in tests/ is listed).
KNOWN_KEYS: tuple[str, ...] = (
    API_KEY,
    "sk-live-SECRETKEY-0123456789abcdef",  # test_config.SECRET
    "sk-ant-api03-SECRET-abcdefghijklmnop",  # test_telemetry.API_KEY
    "sk-proj-ABCDEFGHIJKLMNOPQRST",  # test_telemetry, unconfigured key shapes
    "sk-ant-api03-ABCDEFGHIJKLMNOP",  # test_telemetry, unconfigured key shapes
    "rg-client-KEY-0123456789abcdef",  # support.serve_process.CLIENT_KEY
    "sk-upstream-KEY-0123456789abcdef",  # support.serve_process.UPSTREAM_KEY
    "sk-ant-judge-KEY-0123456789abcdef",  # support.serve_process.JUDGE_KEY
    "sk-literal-secret-123456",  # test_demo_cli, check-config masking
    "sk-test-cold-start-0000000000",  # test_cold_start, test_judge_prompt_cache, test_forking_host
    "3f9a1c7e5b2d4f608a1e9c3b7d5f2a64",  # PLAIN_KEY of test_e2e_loopback, test_judge_fallbacks
    "plainvalue-0123456789-credential",  # test_insights.PLAIN_KEY
    "plainvalue-without-key-shape-123",  # test_telemetry, an env: key's value
    "anthropic-own-key-0000",  # test_judge_http, ANTHROPIC_API_KEY of a fallback provider
    "first-value",  # test_config, an env: key's value
    "rotated-value",  # test_config, an env: key's value after rotation
    "AIzaSyD-shaped-0123456789abcdefghijklmno",  # test_judge_answer_secrets, a Google key shape
    "ghp_shaped0123456789abcdefghijklmnopqrstu",  # test_judge_answer_secrets, a GitHub token shape
    "router-deployment-value-0001",  # test_judge_answer_secrets, a router deployment's key
    "fleet-redis-password-0001",  # tests/state, the Redis password in state.redisUrl
    "fleet-wrong-password-0002",  # tests/state, a wrong Redis password
    "sk-example-placeholder",  # test_example_offline, both provider keys set
    "key-one",  # test_judge_handling, one call's literal key
    "key-two",  # test_judge_handling, the next call's literal key
    "sk-first-0123456789",  # test_judge_handling, an env: key's value
    "sk-second-0123456789",  # test_judge_handling, the same env: key after rotation
    "sk-from-the-vault-0123456789",  # test_judge_handling_hostile, a host config's own key
)


# -- the secrets guard ----------------------------------------------------------------------------

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_RECORD_ATTRIBUTES = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


def _render(render: Callable[[], str]) -> str:
    try:
        return render()
    except Exception:  # a record a handler could not print either (bad format, odd object)
        return ""


def record_texts(record: logging.LogRecord) -> Iterator[tuple[str, str]]:
    """``(where, text)`` for every part of ``record`` a handler or formatter could print."""
    yield "msg", _render(lambda: str(record.msg))
    if record.args:
        yield "args", _render(lambda: repr(record.args))
        yield "message", _render(record.getMessage)
    for name, value in vars(record).items():
        if name not in _RECORD_ATTRIBUTES:
            yield f"extra {name}", _render(lambda v=value: repr(v))
    error = record.exc_info[1] if record.exc_info else None
    if error is not None:
        yield "exc_info", _render(lambda: "".join(traceback.format_exception(error)))
    if record.exc_text:
        yield "exc_text", record.exc_text
    if record.stack_info:
        yield "stack_info", record.stack_info


@dataclass(frozen=True)
class Leak:
    """A log record that carried a known key: where, and an excerpt with the key replaced."""

    logger: str
    level: int
    where: str
    excerpt: str

    def __str__(self) -> str:
        return f"{self.logger} {logging.getLevelName(self.level)} {self.where}: {self.excerpt}"


class SecretsGuard:
    """Collects the log records that carry one of ``keys``; thread-safe. It keeps nothing of a
    clean record but its logger's name (``loggers``), so it can watch a long soak."""

    def __init__(self, keys: Iterable[str] = KNOWN_KEYS) -> None:
        self.keys = tuple(keys)
        self.leaks: list[Leak] = []
        self.loggers: set[str] = set()
        """The names of the loggers whose records were checked."""
        self._lock = threading.Lock()

    def check(self, record: logging.LogRecord) -> None:
        """Note ``record`` if any of its texts holds a key (the key itself is not repeated)."""
        self.loggers.add(record.name)
        for where, text in record_texts(record):
            for index, key in enumerate(self.keys):
                if key in text:
                    shown = text.replace(key, f"<KNOWN_KEYS[{index}]>")[:300]
                    with self._lock:
                        self.leaks.append(Leak(record.name, record.levelno, where, shown))
                    return

    def forgive(self) -> list[Leak]:
        """Take the leaks found so far, so they do not fail the test (for tests that expect
        one, such as the guard's own)."""
        with self._lock:
            leaks, self.leaks = self.leaks, []
        return leaks


@contextmanager
def watching_every_record(guard: SecretsGuard) -> Iterator[SecretsGuard]:
    """Show ``guard`` every record of every logger, DEBUG included, without changing what any
    handler sees.

    Loggers are made to create every record (``isEnabledFor`` says yes unless the logger is
    disabled). A record the logger's real level lets through is handled as before (filters,
    handlers, propagation, ``lastResort``), then checked as a DEBUG handler on the root logger
    would see it; any other record is checked as it was made and goes nowhere else. So caplog,
    pytest's report and litellm's own stream handler see exactly what they saw before.
    """
    logger_class = logging.Logger
    original_enabled = logger_class.isEnabledFor
    original_handle = logger_class.handle

    def is_enabled_for(self: logging.Logger, level: int) -> bool:
        return not self.disabled and level > self.manager.disable

    def handle(self: logging.Logger, record: logging.LogRecord) -> None:
        if record.levelno >= self.getEffectiveLevel():
            original_handle(self, record)
        guard.check(record)

    logger_class.isEnabledFor = is_enabled_for  # type: ignore[method-assign]
    logger_class.handle = handle  # type: ignore[method-assign]
    try:
        yield guard
    finally:
        logger_class.isEnabledFor = original_enabled  # type: ignore[method-assign]
        logger_class.handle = original_handle  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def secrets_guard() -> Iterator[SecretsGuard]:
    """Fail the test when a known key shows in any log record of any logger, at any level."""
    with watching_every_record(SecretsGuard()) as guard:
        yield guard
    if guard.leaks:
        listed = "\n  ".join(str(leak) for leak in guard.leaks[:10])
        pytest.fail(f"{len(guard.leaks)} log record(s) carry a known API key:\n  {listed}")


@pytest.fixture(autouse=True)
async def _close_litellm_clients() -> AsyncIterator[None]:
    """litellm caches HTTP clients per loop; close them so no socket outlives its test.

    First, a verifier's preload thread that the test started finishes here (it runs once per
    process, so this waits at most once in a run): its import of litellm and the OpenAI SDK
    must not go on under the next test's warnings filters, log guard or ``sys.modules``
    snapshot, whatever test comes next."""
    yield
    assert wait_for_preload(timeout=120), "a preload thread still runs after 120 s"
    litellm = sys.modules.get("litellm")
    # Still being imported (a verifier's preload thread): no client of it exists yet.
    importing = getattr(getattr(litellm, "__spec__", None), "_initializing", False)
    if litellm is not None and not importing:
        await litellm.close_litellm_async_clients()
    await close_every_session()  # the byte-capped sessions of verifiers a test did not close


@pytest.fixture
def _preload_finished() -> None:
    """Wait for the preload threads of the verifiers earlier tests built (see ``pytester``)."""
    assert wait_for_preload(timeout=120), "a preload thread still runs after 120 s"


@pytest.fixture
def pytester(_preload_finished: None, pytester: pytest.Pytester) -> pytest.Pytester:
    """pytest's ``pytester``, taken once no preload thread is importing.

    ``pytester`` snapshots ``sys.modules`` and puts the snapshot back at teardown, dropping
    every module imported in between. A verifier's preload thread importing litellm in that
    window would see the modules it had imported so far dropped, and every later import of
    litellm or the OpenAI SDK in this process would start over from the middle of their
    circular imports ("cannot import name ... from partially initialized module").
    """
    return pytester


@pytest.fixture
def make_config() -> Callable[..., VerifierConfig]:
    """Build a config from camelCase keys on top of an enabled, cross-family default."""

    def build(**keys: Any) -> VerifierConfig:
        data: dict[str, Any] = {"enabled": True, "model": JUDGE_MODEL, "agentModel": AGENT_MODEL}
        data.update(keys)
        return VerifierConfig.from_dict(data)

    return build


@pytest.fixture
def provider() -> Iterator[ProviderServer]:
    """A loopback server playing the provider; push ``Step`` values to script it."""
    with ProviderServer() as server:
        yield server


async def _reset_litellm_clients() -> None:
    import litellm

    await litellm.close_litellm_async_clients()
    litellm.in_memory_llm_clients_cache.flush_cache()


@pytest.fixture
async def respx_litellm() -> AsyncIterator[None]:
    """Route litellm through httpx so respx can see its requests (clients made anew)."""
    import litellm

    before = litellm.disable_aiohttp_transport
    await _reset_litellm_clients()
    litellm.disable_aiohttp_transport = True
    try:
        yield
    finally:
        await _reset_litellm_clients()
        litellm.disable_aiohttp_transport = before


@pytest.fixture
def replyguard_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Every record of the ``replyguard`` logger, DEBUG included."""
    caplog.set_level(logging.DEBUG, logger="replyguard")
    return caplog


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """In CI (``CI`` set, as ``.ci/run`` runs), a skipped test is a failure: a test skips only
    where a system server, browser or platform is missing, and ``.ci/run`` installs what the
    suite needs before it runs, so a skip there would hide a test that never ran."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and os.environ.get("CI"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where nothing may skip: {reason}"


# -- a shuffled order -------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--shuffle",
        metavar="SEED",
        default=None,
        help="run the test files, and the tests within each, in an order shuffled by SEED "
        "(a test must not depend on what an earlier one imported or started)",
    )


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = config.getoption("--shuffle")
    return None if seed is None else f"shuffled order, seed {seed} (--shuffle {seed} repeats it)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With ``--shuffle SEED``: files in a shuffled order, and the tests of each file in a
    shuffled order of their own (a file's tests stay together, so its module-scoped fixtures
    are still set up once)."""
    seed = config.getoption("--shuffle")
    if seed is None:
        return
    shuffler = random.Random(str(seed))
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(str(item.path), []).append(item)
    groups = list(files.values())
    shuffler.shuffle(groups)
    for group in groups:
        shuffler.shuffle(group)
    items[:] = [item for group in groups for item in group]
