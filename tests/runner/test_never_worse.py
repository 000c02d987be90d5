"""Nothing the judge, the disk, the host or an operator's pattern does can stall a turn.

Each test drives the public API into one hostile condition and asserts the turn is delivered,
in time (generous bounds, in seconds), and with the event loop free (a ticker task that is
never late by much): a huge or oddly shaped judge answer, a ledger that is a FIFO or locked, a
10 MB reply, run_sync mixed with await, slow sync agents, a catastrophic regex.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import gc
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from conftest import API_KEY
from replyguard import Reason, Status, Turn, Verifier, VerifierConfig
from replyguard._workspace import Workspace
from replyguard.judge._answer_cap import MAX_ANSWER_BYTES
from replyguard.telemetry import Events
from replyguard.testing import ScriptedAgent, ScriptedJudge
from support.provider_server import ANTHROPIC, OPENAI, ProviderServer, Step, Wire, provider_process
from support.timing import Ticker, Timed, ticking

pytestmark = pytest.mark.timing  # scripts/under_load.sh runs these beside CPU-bound work

WIRES = [pytest.param(OPENAI, id="openai"), pytest.param(ANTHROPIC, id="anthropic")]
REPLY = "Done: here is the checklist."


@pytest.fixture
async def ticker() -> AsyncIterator[Ticker]:
    async with ticking() as running:
        yield running


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The garbage collector off (as it was before, after): with litellm loaded, a full pass
    holds the loop for 0.2-0.3 s wherever it lands, and is not the stall under test."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


async def stopped(ticker: Ticker) -> float:
    """The loop's longest hold (CPU time of its thread, which the machine's load does not add
    to), counting the stretch up to now."""
    return await ticker.stopped()


def loopback_config(wire: Wire, url: str, **keys: Any) -> VerifierConfig:
    data = {
        "enabled": True,
        "verifyAll": True,
        "model": wire.judge_model,
        "agentModel": wire.agent_model,
        "apiKey": API_KEY,
        "apiBase": url,
        "timeoutSeconds": 1,
        "maxLatencyMs": 1500,
        **keys,
    }
    return VerifierConfig.from_dict(data)


async def warm(verifier: Verifier) -> None:
    """litellm's first call to a provider pays for its set-up; not the case under test."""
    await verifier.warmup()
    await verifier.verify(Turn(user_message="warm up"), REPLY)


# -- 1. a judge answer of any size or shape -----------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
async def test_an_answer_over_the_byte_cap_is_not_read_and_fails_open_unreadable(
    wire: Wire, ticker: Ticker
) -> None:
    # 50 MB of short lines, the costliest shape to parse, from a provider in another process
    # (a server thread here would hold the GIL while it writes, and show as this loop's lag).
    with provider_process("x\n", times=25 * 1024 * 1024) as url:
        # A deadline far off: on a busy machine the provider's process may take more than a
        # second to write up to the cap, and a timeout is not the case under test.
        verifier = Verifier(loopback_config(wire, url, timeoutSeconds=20, maxLatencyMs=30000))
        await warm(verifier)
        # litellm's error path loads what it needs on its first error (0.1-0.2 s here, for an
        # error of any size): that first one is a cold start, and not the case under test.
        await verifier.run(ScriptedAgent([REPLY]), Turn(user_message="cold"))
        with collector_paused():
            ticker.reset()
            outcome = await verifier.run(ScriptedAgent([REPLY]), Turn(user_message="q"))
            worst = await stopped(ticker)
        await verifier.aclose()
    assert outcome.response == REPLY
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, Reason.UNREADABLE_VERDICT)
    verdict = outcome.attempts[-1].verdict
    assert verdict is not None
    assert f"passed {MAX_ANSWER_BYTES} bytes" in (verdict.error or "")
    # Read whole, this answer held the loop for 0.6-0.65 s; capped, its longest hold is a few
    # milliseconds of the loop thread's CPU time (which the machine's load does not add to).
    # The bound fails at a third of the regression.
    assert worst < 0.2, worst


@pytest.mark.parametrize("wire", WIRES)
async def test_an_answer_under_the_byte_cap_is_read_whole(wire: Wire) -> None:
    filler = "The checklist covers every step asked for. " * 12_000  # about 500 KB
    with ProviderServer(default=Step(text="PASS")) as server:
        verifier = Verifier(loopback_config(wire, server.url))
        await warm(verifier)
        server.push(wire.encoded_answer(filler + "\nPASS"))
        outcome = await verifier.run(ScriptedAgent([REPLY]), Turn(user_message="q"))
        await verifier.aclose()
    assert outcome.status == Status.PASSED


async def test_a_long_answer_from_any_judge_is_parsed_off_the_loop(
    make_config: Callable[..., VerifierConfig], ticker: Ticker
) -> None:
    """A custom judge bypasses the HTTP cap: its text is still parsed in a thread, and a text
    past the cap is unreadable without being parsed."""
    config = make_config(verifyAll=True, maxLatencyMs=2000)
    ticker.reset()
    for text in ("x\n" * 400_000, "x\n" * MAX_ANSWER_BYTES):
        verifier = Verifier(config, judge=ScriptedJudge([text]))
        async with Timed(2.0) as timed:
            outcome = await verifier.run(ScriptedAgent([REPLY]), Turn(user_message="q"))
        assert timed.within(0.5), timed.seconds
        assert outcome.status == Status.FAILED_OPEN
        assert outcome.reason in (Reason.UNREADABLE_VERDICT, Reason.LATENCY_BUDGET)
    assert await stopped(ticker) < 0.25


# -- 2. the ledger ------------------------------------------------------------------------------


async def ledger_turn(
    config: VerifierConfig, turn: Turn | None = None, deadline: float = 1.0
) -> tuple[Any, Timed]:
    """The turn, timed against ``deadline`` (a witness timer on the loop, see ``Timed``)."""
    verifier = Verifier(config, judge=ScriptedJudge(["PASS"]))
    async with Timed(deadline) as timed:
        outcome = await verifier.run(ScriptedAgent([REPLY]), turn or Turn(user_message="q"))
    return outcome, timed


def failed_writes(logs: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in logs.records if "ledger_write_failed" in r.getMessage()]


async def test_a_ledger_that_is_a_fifo_without_reader_is_refused_at_once(
    make_config: Callable[..., VerifierConfig],
    tmp_path: Path,
    replyguard_logs: pytest.LogCaptureFixture,
) -> None:
    fifo = tmp_path / "ledger.fifo"
    os.mkfifo(fifo)
    config = make_config(verifyAll=True, ledgerPath=str(fifo), maxLatencyMs=1000)
    outcome, timed = await asyncio.wait_for(ledger_turn(config), timeout=10)
    assert outcome.status == Status.PASSED
    assert timed.within(0.5), timed.seconds
    assert failed_writes(replyguard_logs)


async def test_a_ledger_that_is_a_fifo_with_a_reader_is_refused_as_not_a_regular_file(
    make_config: Callable[..., VerifierConfig],
    tmp_path: Path,
    replyguard_logs: pytest.LogCaptureFixture,
) -> None:
    fifo = tmp_path / "ledger.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        config = make_config(verifyAll=True, ledgerPath=str(fifo))
        outcome, _ = await asyncio.wait_for(ledger_turn(config), timeout=10)
    finally:
        os.close(reader)
    assert outcome.status == Status.PASSED
    assert any("not a regular file" in message for message in failed_writes(replyguard_logs))


@pytest.mark.parametrize("deadline", [None, 1000])
async def test_a_ledger_locked_by_another_writer_never_holds_the_turn(
    make_config: Callable[..., VerifierConfig],
    tmp_path: Path,
    replyguard_logs: pytest.LogCaptureFixture,
    deadline: int | None,
) -> None:
    path = tmp_path / "ledger.jsonl"
    holder = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another open file: flock conflicts even in-process
    try:
        config = make_config(verifyAll=True, ledgerPath=str(path), maxLatencyMs=deadline)
        outcome, timed = await asyncio.wait_for(ledger_turn(config), timeout=10)
        # Nothing was forced through the other writer's lock. (Once it is released, a write
        # that gave up waiting on a busy machine may still land: the record is not lost.)
        written = path.read_text()
    finally:
        os.close(holder)
    assert outcome.status == Status.PASSED
    assert timed.within(0.5), timed.seconds
    assert any("locked" in message for message in failed_writes(replyguard_logs))
    assert written == ""


async def test_lone_surrogates_give_one_valid_line_with_replacement_characters(
    make_config: Callable[..., VerifierConfig], tmp_path: Path
) -> None:
    path = tmp_path / "ledger.jsonl"
    config = make_config(verifyAll=True, ledgerPath=str(path), logContent=True)
    verifier = Verifier(config, judge=ScriptedJudge(["FAIL [incomplete]: add \udc80 it", "PASS"]))
    turn = Turn(user_message="q", id="turn-\ud800", agent_id="agent-\udfff")
    outcome = await verifier.run(ScriptedAgent([REPLY, REPLY + " And more."]), turn)
    assert outcome.status == Status.PASSED
    raw = path.read_bytes()
    assert raw.count(b"\n") == 1
    record = json.loads(raw.decode("utf-8"))  # strict UTF-8: no surrogate survived
    assert record["turnId"] == "turn-\ufffd"
    assert record["agentId"] == "agent-\ufffd"
    assert record["feedback"] == ["add \ufffd it"]


def test_replyguard_imports_and_writes_its_ledger_where_fcntl_does_not_exist(
    tmp_path: Path,
) -> None:
    script = textwrap.dedent(
        f"""
        import asyncio, json, sys
        sys.modules["fcntl"] = None  # as on Windows: importing it raises ImportError
        import replyguard
        from replyguard import Turn, Verifier, VerifierConfig
        from replyguard.testing import ScriptedAgent, ScriptedJudge

        config = VerifierConfig.from_dict({{
            "enabled": True, "verifyAll": True, "agentModel": "openai/gpt-4o",
            "ledgerPath": {str(tmp_path / "ledger.jsonl")!r},
        }})
        verifier = Verifier(config, judge=ScriptedJudge(["PASS"]))
        outcome = asyncio.run(verifier.run(ScriptedAgent(["Done"]), Turn(user_message="q")))
        print(outcome.status.value)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "passed"
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    assert [json.loads(line)["status"] for line in lines] == ["passed"]


# -- 3. a huge reply ----------------------------------------------------------------------------


async def test_a_ten_megabyte_reply_of_short_lines_keeps_the_turn_deadline(
    make_config: Callable[..., VerifierConfig], ticker: Ticker
) -> None:
    reply = "a short line of the reply\n" * (10 * 1024 * 1024 // 26)
    config = make_config(verifyAll=True, maxLatencyMs=100)
    verifier = Verifier(config, judge=ScriptedJudge(["PASS"]))
    await verifier.warmup()
    async with Timed(0.1) as timed:
        outcome = await verifier.run(ScriptedAgent([reply]), Turn(user_message="q"))
    # Judged in a few milliseconds now that every step reads only what the judge is shown;
    # on a machine too busy for that, the deadline still ends the turn.
    assert (outcome.status, outcome.reason) in {
        (Status.PASSED, None),
        (Status.FAILED_OPEN, Reason.LATENCY_BUDGET),
    }
    assert outcome.response == reply
    assert timed.within(0.5), timed.seconds


# -- 4. run_sync and await in one process -------------------------------------------------------


MIXED = """
import asyncio, sys, threading
sys.path.insert(0, {tests!r})
from support.provider_server import OPENAI, ProviderServer, Step
from replyguard import Turn, Verifier, VerifierConfig
from replyguard.testing import ScriptedAgent

async def main(url):
    config = VerifierConfig.from_dict({{
        "enabled": True, "verifyAll": True, "model": OPENAI.judge_model,
        "agentModel": OPENAI.agent_model, "apiKey": "sk-test-SECRETKEY-0123456789abcdef",
        "apiBase": url,
    }})
    verifier = Verifier(config)
    statuses = []
    def sync_turn():
        statuses.append(verifier.run_sync(ScriptedAgent(["Done"]), Turn(user_message="q")).status)
    for _ in range(2):
        await asyncio.to_thread(sync_turn)
        statuses.append(await verifier.run(ScriptedAgent(["Done"]), Turn(user_message="q")))
        await asyncio.gather(*(asyncio.to_thread(sync_turn) for _ in range(3)))
        verdict = await verifier.verify(Turn(user_message="q"), "Done")
        statuses.append("passed" if verdict.passed and verdict.readable else verdict.error)
    print(len(statuses), sorted({{str(getattr(s, "status", s)) for s in statuses}}))
    {close}

with ProviderServer(default=Step(text="PASS")) as server:
    asyncio.run(main(server.url))
"""


@pytest.mark.slow  # a fresh interpreter importing litellm (about 5 s): .ci/run's slow step
@pytest.mark.parametrize("closed", [True, False], ids=["aclose", "no-aclose"])
def test_run_sync_from_threads_mixed_with_await_is_silent_and_correct(closed: bool) -> None:
    close = "await verifier.aclose()" if closed else "pass  # a host that never closes"
    script = MIXED.format(tests=str(Path(__file__).parents[1]), close=close)
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "default"},
    )
    assert done.returncode == 0, done.stderr
    assert "12 ['passed'" in done.stdout or "12 ['Status.PASSED'" in done.stdout, done.stdout
    for noise in ("Task was destroyed", "Exception ignored", "Traceback", "never awaited"):
        assert noise not in done.stderr, done.stderr


async def test_run_sync_from_a_thread_the_host_loop_waits_for_runs_on_its_own_loop(
    make_config: Callable[..., VerifierConfig],
) -> None:
    """A host loop blocked on the very ``run_sync`` call (a sync call made on it, handed to a
    thread) cannot take the turn: after a short wait it runs on the verifier's own loop."""
    verifier = Verifier(make_config(verifyAll=True), judge=ScriptedJudge(["PASS", "PASS"]))
    await verifier.verify(Turn(user_message="the host loop is this one"), REPLY)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        sync_turn = pool.submit(verifier.run_sync, ScriptedAgent([REPLY]), Turn(user_message="q"))
        outcome = sync_turn.result(timeout=30)  # blocks this loop until the turn is done
    assert outcome.status == Status.PASSED
    assert time.monotonic() - started < 5
    await verifier.aclose()


def test_run_sync_on_a_host_loop_closed_mid_turn_raises_instead_of_waiting_for_ever(
    make_config: Callable[..., VerifierConfig],
) -> None:
    """A careless host closes the loop that took a ``run_sync`` turn before the turn ended: the
    call says so at once rather than waiting for a loop that will never run again."""
    verifier = Verifier(make_config(verifyAll=True), judge=ScriptedJudge(["PASS", "PASS"]))
    agent_started, release = threading.Event(), threading.Event()

    async def agent(messages: list[dict[str, Any]]) -> str:
        agent_started.set()
        await asyncio.to_thread(release.wait, 30)
        return REPLY

    loop = asyncio.new_event_loop()
    loop.run_until_complete(verifier.verify(Turn(user_message="the host loop"), REPLY))
    errors: list[BaseException] = []

    def sync_turn() -> None:
        try:
            verifier.run_sync(agent, Turn(user_message="q"))
        except BaseException as exc:
            errors.append(exc)

    caller = threading.Thread(target=sync_turn)

    async def host_until_the_turn_is_taken() -> None:
        caller.start()
        await asyncio.to_thread(agent_started.wait, 10)

    loop.run_until_complete(host_until_the_turn_is_taken())
    loop.close()  # with the taken turn still pending on it
    caller.join(timeout=10)
    release.set()
    assert not caller.is_alive()
    assert len(errors) == 1 and "was closed before it ended" in str(errors[0])
    verifier.close()


async def test_run_sync_from_threads_runs_on_the_loop_of_the_async_api(
    make_config: Callable[..., VerifierConfig],
) -> None:
    """While the host's loop is free, ``run_sync`` turns from its threads run on it: one loop
    for litellm's clients and logging worker, none stranded on another."""
    loops: list[asyncio.AbstractEventLoop] = []

    async def agent(messages: list[dict[str, Any]]) -> str:
        loops.append(asyncio.get_running_loop())
        return REPLY

    verifier = Verifier(make_config(verifyAll=True), judge=ScriptedJudge(["PASS"] * 4))
    await verifier.verify(Turn(user_message="the host loop is this one"), REPLY)
    outcomes = await asyncio.gather(
        *(asyncio.to_thread(verifier.run_sync, agent, Turn(user_message="q")) for _ in range(3))
    )
    assert [o.status for o in outcomes] == [Status.PASSED] * 3
    assert loops == [asyncio.get_running_loop()] * 3
    await verifier.aclose()


# -- 5. sync agents get their own bounded pool --------------------------------------------------


async def test_sync_agents_share_only_the_agent_threads_of_their_verifier(
    make_config: Callable[..., VerifierConfig],
) -> None:
    config = make_config(verifyAll=True, agentThreads=2)
    verifier = Verifier(config, judge=ScriptedJudge(["PASS"] * 3))
    release = threading.Event()
    lock = threading.Lock()
    running: list[str] = []
    most = 0
    two_running = threading.Event()

    def slow_agent(messages: list[dict[str, Any]]) -> str:
        nonlocal most
        with lock:
            running.append(threading.current_thread().name)
            most = max(most, len(running))
            if len(running) == 2:
                two_running.set()
        release.wait(timeout=30)
        with lock:
            running.remove(threading.current_thread().name)
        return REPLY

    turns = [
        asyncio.create_task(verifier.run(slow_agent, Turn(user_message=f"q{n}"))) for n in range(3)
    ]
    assert await asyncio.to_thread(two_running.wait, 10)
    # Both agent threads are taken; asyncio's default executor (checks, hosts) is not.
    assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), timeout=5) == "free"
    assert all(name.startswith("replyguard-agent") for name in running)
    release.set()
    outcomes = await asyncio.wait_for(asyncio.gather(*turns), timeout=30)
    assert [o.status for o in outcomes] == [Status.PASSED] * 3
    assert most == 2
    await verifier.aclose()
    agent_threads = [t for t in threading.enumerate() if t.name.startswith("replyguard-agent")]
    for thread in agent_threads:
        thread.join(timeout=5)
    assert not any(t.is_alive() for t in agent_threads)


def test_agent_threads_has_a_documented_default() -> None:
    assert VerifierConfig().agent_threads == 32
    reliability = Path(__file__).parents[2] / "docs" / "reliability.md"
    assert "agentThreads" in reliability.read_text(encoding="utf-8")


# -- 6. operator regexes ------------------------------------------------------------------------

CATASTROPHIC = "(a|a)+$"
"""Backtracks exponentially in re and in the regex module alike (not rescued by regex's
optimiser, as ``(a+)+$`` is)."""
VICTIM = "a" * 40 + "b"


@pytest.mark.parametrize(
    "check",
    [
        pytest.param({"type": "rules", "mustNotMatch": [CATASTROPHIC]}, id="rules-must-not-match"),
        pytest.param({"type": "rules", "mustMatch": [CATASTROPHIC]}, id="rules-must-match"),
        pytest.param(
            {"type": "json", "fields": {"code": {"pattern": CATASTROPHIC}}}, id="json-field"
        ),
        pytest.param(
            {
                "type": "json",
                "schema": {"type": "object", "properties": {"code": {"pattern": CATASTROPHIC}}},
            },
            id="json-schema-pattern",
        ),
        pytest.param(
            {
                "type": "json",
                "schema": {"type": "object", "patternProperties": {CATASTROPHIC: {}}},
            },
            id="json-schema-pattern-properties",
        ),
    ],
)
async def test_a_catastrophic_operator_pattern_fails_its_check_open_within_the_deadline(
    make_config: Callable[..., VerifierConfig], ticker: Ticker, check: dict[str, Any]
) -> None:
    reply = json.dumps({"code": VICTIM, VICTIM: 1}) if check["type"] == "json" else VICTIM
    # The turn's deadline far off: the pattern's own time limit is the case under test (a busy
    # machine slows the check around it, and the turn must not run out first).
    config = make_config(verifyAll=True, maxLatencyMs=30000, checks=[check])
    verifier = Verifier(config, judge=ScriptedJudge(["PASS"]))
    ticker.reset()
    outcome = await verifier.run(ScriptedAgent([reply]), Turn(user_message="q"))
    assert outcome.status == Status.PASSED
    result = outcome.attempts[0].checks[0]
    assert result.passed
    assert "did not finish within" in (result.error or "")
    assert CATASTROPHIC in (result.error or "")
    assert await stopped(ticker) < 0.25


async def test_a_pattern_still_out_of_time_when_the_turn_deadline_passes_fails_the_turn_open(
    make_config: Callable[..., VerifierConfig],
) -> None:
    check = {"type": "rules", "mustNotMatch": [CATASTROPHIC]}
    config = make_config(verifyAll=True, maxLatencyMs=200, checks=[check])
    verifier = Verifier(config, judge=ScriptedJudge([]))
    async with Timed(0.2) as timed:
        outcome = await verifier.run(ScriptedAgent([VICTIM]), Turn(user_message="q"))
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, Reason.LATENCY_BUDGET)
    assert timed.within(0.5), timed.seconds


async def test_ordinary_operator_patterns_still_decide(
    make_config: Callable[..., VerifierConfig],
) -> None:
    check = {"type": "rules", "mustNotMatch": [r"\bTODO\b"], "mustMatch": [r"^Done"]}
    config = make_config(verifyAll=True, maxAttempts=1, checks=[check])
    verifier = Verifier(config, judge=ScriptedJudge([]))
    outcome = await verifier.run(ScriptedAgent(["Done, but TODO: tests"]), Turn(user_message="q"))
    assert outcome.status == Status.EXHAUSTED
    verdict = outcome.attempts[0].verdict
    assert verdict is not None
    assert "forbidden pattern" in (verdict.feedback or "")


# -- 7. a workspace on a disk that hangs --------------------------------------------------------


class HungDisk:
    """``Path.stat`` of one file name blocks until released, as on a stalled network mount.

    Installed once the verifier is built: its construction checks the workspace on the
    caller's thread (a constructor has no turn deadline to keep)."""

    def __init__(self, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.name = name
        self.entered = threading.Event()
        self.release = threading.Event()
        self._monkeypatch = monkeypatch

    def hang(self) -> None:
        original = Path.stat

        def stat(path: Path, **kwargs: Any) -> os.stat_result:
            if path.name == self.name:
                self.entered.set()
                self.release.wait(10)
            return original(path, **kwargs)

        self._monkeypatch.setattr(Path, "stat", stat)


@pytest.fixture
def hung_disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[HungDisk]:
    disk = HungDisk("AGENTS.md", monkeypatch)
    yield disk
    disk.release.set()


@pytest.mark.parametrize(
    ("keys", "reason"),
    [
        pytest.param({"maxLatencyMs": 400}, Reason.LATENCY_BUDGET, id="turn-deadline"),
        pytest.param({"timeoutSeconds": 0.4}, Reason.INTERNAL_ERROR, id="timeout-seconds"),
    ],
)
async def test_a_rules_file_on_a_hung_disk_fails_the_turn_open_with_the_loop_free(
    make_config: Callable[..., VerifierConfig],
    tmp_path: Path,
    hung_disk: HungDisk,
    ticker: Ticker,
    keys: dict[str, Any],
    reason: Reason,
    caplog: pytest.LogCaptureFixture,
) -> None:
    (tmp_path / "AGENTS.md").write_text("Answer in English.\n", encoding="utf-8")
    config = make_config(verifyAll=True, workspaceDir=str(tmp_path), **keys)
    judge = ScriptedJudge([])
    verifier = Verifier(config, judge=judge)
    await verifier.warmup()  # the tokenizer's one load holds the GIL: not the case under test
    hung_disk.hang()
    ticker.reset()
    started = time.monotonic()
    outcome = await verifier.run(ScriptedAgent([REPLY]), Turn(user_message="q"))
    assert hung_disk.entered.is_set()
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, reason)
    assert outcome.response == REPLY
    assert judge.calls == []
    assert time.monotonic() - started < 3.0
    assert await stopped(ticker) < 0.25
    late = [
        r
        for r in caplog.records
        if getattr(r, "replyguard", {}).get("event") == "workspace_read_late"
    ]
    assert late and late[0].replyguard["files"] == ["AGENTS.md", "SOUL.md"]


async def test_a_hung_disk_leaves_the_loops_default_executor_to_others(
    make_config: Callable[..., VerifierConfig], tmp_path: Path, hung_disk: HungDisk
) -> None:
    """Turn after turn stuck on the disk never take the threads litellm builds requests on."""
    (tmp_path / "AGENTS.md").write_text("Answer in English.\n", encoding="utf-8")
    config = make_config(verifyAll=True, workspaceDir=str(tmp_path), maxLatencyMs=100)
    verifier = Verifier(config, judge=ScriptedJudge([]))
    hung_disk.hang()
    turns = [verifier.run(ScriptedAgent([REPLY]), Turn(user_message="q")) for _ in range(40)]
    outcomes = await asyncio.gather(*turns)
    assert {o.reason for o in outcomes} == {Reason.LATENCY_BUDGET}
    assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), 2.0) == "free"


async def test_rules_edited_between_turns_reach_the_judge(
    make_config: Callable[..., VerifierConfig], tmp_path: Path
) -> None:
    rules = tmp_path / "AGENTS.md"
    rules.write_text("Answer in English.\n", encoding="utf-8")
    config = make_config(verifyAll=True, workspaceDir=str(tmp_path))
    judge = ScriptedJudge(["PASS", "PASS"])
    verifier = Verifier(config, judge=judge)
    await verifier.run(ScriptedAgent([REPLY]), Turn(user_message="q"))
    rules.write_text("Answer in French, always and only.\n", encoding="utf-8")
    await verifier.run(ScriptedAgent([REPLY]), Turn(user_message="q"))
    first, second = (prompt.user for prompt in judge.calls)
    assert "Answer in English." in first and "French" not in first
    assert "Answer in French, always and only." in second and "English" not in second


async def test_a_heartbeat_turn_shows_the_judge_its_task_file_read_off_the_loop(
    make_config: Callable[..., VerifierConfig], tmp_path: Path
) -> None:
    (tmp_path / "HEARTBEAT.md").write_text("- [ ] rotate the logs\n", encoding="utf-8")
    config = make_config(verifyHeartbeat=True, workspaceDir=str(tmp_path), rulesFiles=[])
    judge = ScriptedJudge(["PASS"])
    outcome = await Verifier(config, judge=judge).run(
        ScriptedAgent(["Rotated the logs."]), Turn(user_message="heartbeat", heartbeat=True)
    )
    assert outcome.status == Status.PASSED
    (prompt,) = judge.calls
    assert "rotate the logs" in prompt.user


@pytest.mark.parametrize("keys", [{"verifyAll": True}, {}], ids=["verify-all", "keywords"])
async def test_a_turn_that_may_be_judged_reads_its_workspace_during_the_agents_call(
    make_config: Callable[..., VerifierConfig],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    keys: dict[str, Any],
) -> None:
    (tmp_path / "AGENTS.md").write_text("Answer in English.\n", encoding="utf-8")
    judge = ScriptedJudge(["PASS"])
    verifier = Verifier(make_config(workspaceDir=str(tmp_path), **keys), judge=judge)
    disk = HungDisk("AGENTS.md", monkeypatch)
    disk.release.set()  # records the read, never holds it
    disk.hang()

    async def agent(messages: list[dict[str, Any]]) -> str:
        assert await asyncio.to_thread(disk.entered.wait, 5.0)  # read before the reply exists
        return REPLY

    outcome = await verifier.run(agent, Turn(user_message="q"))
    assert outcome.status == Status.PASSED
    (prompt,) = judge.calls
    assert "Answer in English." in prompt.user


async def test_every_attempt_of_a_turn_on_a_hung_disk_fails_open_in_time(
    make_config: Callable[..., VerifierConfig], tmp_path: Path, hung_disk: HungDisk
) -> None:
    """The turn's one read is waited for by each attempt without being cancelled by the first."""
    (tmp_path / "AGENTS.md").write_text("Answer in English.\n", encoding="utf-8")
    check = {"type": "rules", "mustNotMatch": [r"\bTODO\b"]}
    config = make_config(
        verifyAll=True,
        workspaceDir=str(tmp_path),
        timeoutSeconds=0.2,
        maxAttempts=2,
        judgeAfterChecks="always",
        checks=[check],
    )
    verifier = Verifier(config, judge=ScriptedJudge([]))
    hung_disk.hang()
    started = time.monotonic()
    outcome = await verifier.run(ScriptedAgent(["TODO later", REPLY]), Turn(user_message="q"))
    assert outcome.status == Status.FAILED_OPEN
    assert outcome.response in {"TODO later", REPLY}
    assert time.monotonic() - started < 3.0


def hung_workspace_script(workspace: Path, judge_answers: list[str], then: str) -> str:
    """A script with a verifier of ``workspace`` whose ``AGENTS.md`` lies on a mount that
    never answers once it runs ``Path.stat = stat``, then ``then``."""
    prelude = f"""
        import asyncio, os, threading
        from pathlib import Path
        from replyguard import Turn, Verifier, VerifierConfig
        from replyguard.testing import ScriptedAgent, ScriptedJudge

        config = VerifierConfig.from_dict({{
            "enabled": True, "verifyAll": True, "agentModel": "openai/gpt-4o",
            "workspaceDir": {str(workspace)!r}, "maxLatencyMs": 300,
        }})
        judge = ScriptedJudge({judge_answers!r})
        verifier = Verifier(config, judge=judge, preload=False)
        turn = Turn(user_message="q")
        original, never = Path.stat, threading.Event()

        def stat(path, **kwargs):
            if path.name == "AGENTS.md":
                never.wait()  # a mount that never answers
            return original(path, **kwargs)
        """
    return textwrap.dedent(prelude) + textwrap.dedent(then)


def last_line_of(script: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_a_process_whose_workspace_read_hangs_still_exits(tmp_path: Path) -> None:
    """The readers are daemon threads: a read stuck for good never holds up the exit."""
    (tmp_path / "AGENTS.md").write_text("Answer in English.\n", encoding="utf-8")
    then = """
        Path.stat = stat
        outcome = asyncio.run(verifier.run(ScriptedAgent(["Done"]), turn))
        print(outcome.reason.value)
        """
    assert last_line_of(hung_workspace_script(tmp_path, [], then)) == "latency_budget"


async def test_turns_on_a_hung_disk_queue_one_read_between_them(
    make_config: Callable[..., VerifierConfig],
    tmp_path: Path,
    hung_disk: HungDisk,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not one read per turn: the queue stays bounded however long the disk hangs, and once
    it answers, the one queued read serves them all."""
    (tmp_path / "AGENTS.md").write_text("Answer in English.\n", encoding="utf-8")
    config = make_config(verifyAll=True, workspaceDir=str(tmp_path), maxLatencyMs=100)
    verifier = Verifier(config, judge=ScriptedJudge([]))
    reads: list[tuple[str, ...]] = []
    read_all = Workspace.read_all

    def counted(self: Workspace, names: Sequence[str]) -> tuple[str | None, ...]:
        reads.append(tuple(names))
        return read_all(self, names)

    monkeypatch.setattr(Workspace, "read_all", counted)
    hung_disk.hang()
    for _ in range(30):
        outcome = await verifier.run(ScriptedAgent([REPLY]), Turn(user_message="q"))
        assert outcome.reason == Reason.LATENCY_BUDGET
    hung_disk.release.set()
    texts = await asyncio.wait_for(Workspace(str(tmp_path), Events()).read_later(["AGENTS.md"]), 5)
    assert texts == ("Answer in English.\n",)
    # The two readers each took one turn's read; all 28 later turns shared one queued read.
    assert len(reads) == 4  # and the read just made


def test_a_child_forked_while_reads_hang_reads_its_workspace_afresh(tmp_path: Path) -> None:
    """A read queued in the parent is never served in a forked child (its reader threads
    stay behind): the child's turns read on threads of their own."""
    (tmp_path / "AGENTS.md").write_text("Answer in English.\n", encoding="utf-8")
    then = """
        Path.stat = stat
        for _ in range(3):  # two readers stuck, one read queued
            asyncio.run(verifier.run(ScriptedAgent(["Done"]), turn))
        Path.stat = original
        child = os.fork()
        if child == 0:
            outcome = asyncio.run(verifier.run(ScriptedAgent(["Done"]), turn))
            seen = "Answer in English." in judge.calls[0].user if judge.calls else False
            print(outcome.status.value, seen, flush=True)
            os._exit(0)
        os.waitpid(child, 0)
        """
    assert last_line_of(hung_workspace_script(tmp_path, ["PASS"], then)) == "passed True"


async def test_a_fault_of_the_workspace_reader_fails_the_turn_open_without_its_secrets(
    make_config: Callable[..., VerifierConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "AGENTS.md").write_text("Answer in English.\n", encoding="utf-8")
    config = make_config(verifyAll=True, workspaceDir=str(tmp_path), apiKey=API_KEY)
    verifier = Verifier(config, judge=ScriptedJudge([]))

    def broken(self: Workspace, names: Sequence[str]) -> tuple[str | None, ...]:
        raise RuntimeError(f"reader broke holding {API_KEY}")

    monkeypatch.setattr(Workspace, "read_all", broken)
    outcome = await verifier.run(ScriptedAgent([REPLY]), Turn(user_message="q"))
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, Reason.INTERNAL_ERROR)
    assert outcome.response == REPLY
    error = outcome.attempts[0].verdict.error if outcome.attempts[0].verdict else ""
    assert "reading the workspace failed" in (error or "")
    assert API_KEY not in (error or "")


async def test_a_workspace_on_a_hung_disk_leaves_other_workspaces_reads_alone(
    make_config: Callable[..., VerifierConfig], tmp_path: Path, hung_disk: HungDisk
) -> None:
    stuck, healthy = tmp_path / "stuck", tmp_path / "healthy"
    stuck.mkdir()
    healthy.mkdir()
    (stuck / "AGENTS.md").write_text("Answer in English.\n", encoding="utf-8")
    (healthy / "RULES.md").write_text("Answer in French.\n", encoding="utf-8")
    hung = Verifier(
        make_config(verifyAll=True, workspaceDir=str(stuck), maxLatencyMs=100),
        judge=ScriptedJudge([]),
    )
    judge = ScriptedJudge(["PASS"])
    other = Verifier(
        make_config(
            verifyAll=True, workspaceDir=str(healthy), rulesFiles=["RULES.md"], maxLatencyMs=3000
        ),
        judge=judge,
    )
    hung_disk.hang()
    for _ in range(3):  # both of its readers stuck, one read queued behind them
        outcome = await hung.run(ScriptedAgent([REPLY]), Turn(user_message="q"))
        assert outcome.reason == Reason.LATENCY_BUDGET
    outcome = await other.run(ScriptedAgent([REPLY]), Turn(user_message="q"))
    assert outcome.status == Status.PASSED
    (prompt,) = judge.calls
    assert "Answer in French." in prompt.user
