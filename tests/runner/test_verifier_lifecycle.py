"""Closing a verifier closes what it alone owns, and nothing of any other verifier.

A host that reloads its configuration builds a new verifier and closes the old one, while
other verifiers of the process go on judging. These tests run through litellm's real network
path (aiohttp) against the loopback provider, where each verifier's connections can be counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import threading
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import pytest

from conftest import API_KEY
from replyguard import Status, Turn, Verdict, Verifier, VerifierConfig
from replyguard.runner._preload import wait_for_preload
from replyguard.testing import ScriptedAgent, ScriptedJudge
from support.provider_server import ANTHROPIC, OPENAI, ProviderServer, Step, Wire

WIRES = [pytest.param(ANTHROPIC, id="anthropic"), pytest.param(OPENAI, id="openai")]
TURN = Turn(user_message="Send me the release checklist.")
REPLY = "Done: here is the checklist."


@pytest.fixture
def config_for(provider: ProviderServer) -> Callable[..., VerifierConfig]:
    def build(wire: Wire, **keys: Any) -> VerifierConfig:
        data = {
            "enabled": True,
            "verifyAll": True,
            "model": wire.judge_model,
            "agentModel": wire.agent_model,
            "apiKey": API_KEY,
            "apiBase": provider.url,
            "timeoutSeconds": 5,
            **keys,
        }
        return VerifierConfig.from_dict(data)

    return build


def judged(verdict: Verdict) -> bool:
    """A real PASS from the judge, not a fail-open one."""
    return verdict.passed and verdict.readable and verdict.fail_open_reason is None


def reopened_warnings(logs: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in logs.records if r.getMessage().startswith("verifier_reopened")]


@pytest.mark.parametrize("wire", WIRES)
async def test_closing_one_verifier_leaves_another_judging_on_its_own_connection(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    provider.respond_with(lambda seen: Step(text="PASS"))
    old, other = Verifier(config_for(wire)), Verifier(config_for(wire))
    assert judged(await old.verify(TURN, REPLY))
    assert judged(await other.verify(TURN, REPLY))
    assert provider.connections == 2  # each verifier has a connection of its own

    await old.aclose()

    assert await provider.wait_for_open_connections(1) == 1  # the closed one's is gone
    verdict = await other.verify(TURN, REPLY)
    assert judged(verdict), verdict.error
    assert provider.connections == 2  # the other one's connection was never closed
    await other.aclose()
    assert await provider.wait_for_open_connections(0) == 0


@pytest.mark.parametrize("wire", WIRES)
async def test_a_turn_in_flight_finishes_when_its_verifier_is_closed(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    provider.push(Step(text="PASS", delay=0.3))
    verifier = Verifier(config_for(wire))
    turn = asyncio.create_task(verifier.run(ScriptedAgent([REPLY]), TURN))
    await provider.wait_for_requests(1)

    await verifier.aclose()  # while the judge call is on the wire

    outcome = await turn
    assert (outcome.status, outcome.reason) == (Status.PASSED, None)
    assert await provider.wait_for_open_connections(0) == 0  # closed once the call had ended


@pytest.mark.parametrize("wire", WIRES)
async def test_a_verifier_used_after_aclose_reopens_its_clients_and_warns_once(
    provider: ProviderServer,
    config_for: Callable[..., VerifierConfig],
    wire: Wire,
    replyguard_logs: pytest.LogCaptureFixture,
) -> None:
    provider.respond_with(lambda seen: Step(text="PASS"))
    verifier = Verifier(config_for(wire))
    assert judged(await verifier.verify(TURN, REPLY))
    await verifier.aclose()
    assert reopened_warnings(replyguard_logs) == []

    first, second = await verifier.verify(TURN, REPLY), await verifier.verify(TURN, REPLY)

    assert judged(first), first.error
    assert judged(second), second.error
    [warning] = reopened_warnings(replyguard_logs)
    assert warning.levelno == logging.WARNING
    await verifier.aclose()
    assert await provider.wait_for_open_connections(0) == 0


def _descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
async def test_no_descriptor_of_a_closed_verifier_stays_open(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig]
) -> None:
    """Its connections of the running loop and of the ``run_sync`` loop, and that loop's own
    selector and wake-up pipe: everything it opened is closed once ``aclose`` returns."""
    provider.respond_with(lambda seen: Step(text="PASS"))
    warm = Verifier(config_for(OPENAI))  # litellm's one-time set-up opens nothing later
    assert judged(await warm.verify(TURN, REPLY))
    await warm.aclose()
    await provider.wait_for_open_connections(0)
    before = _descriptors()

    verifier = Verifier(config_for(OPENAI))
    # run_sync first: before the async API has run anywhere, it runs on its own loop
    synced = await asyncio.to_thread(verifier.run_sync, ScriptedAgent([REPLY]), TURN)
    assert synced.status == Status.PASSED
    assert judged(await verifier.verify(TURN, REPLY))
    assert len(_descriptors() - before) >= 4  # two connections, a selector, a pipe at least
    await verifier.aclose()

    assert await provider.wait_for_open_connections(0) == 0
    assert _descriptors() - before == set()


async def test_run_sync_turns_in_flight_finish_when_the_verifier_is_closed(
    make_config: Callable[..., VerifierConfig],
) -> None:
    started, release = threading.Event(), threading.Event()

    def slow_agent(messages: list[dict[str, Any]]) -> str:
        started.set()
        release.wait(5)
        return REPLY

    verifier = Verifier(make_config(verifyAll=True), judge=ScriptedJudge(["PASS"]))
    turn = asyncio.create_task(asyncio.to_thread(verifier.run_sync, slow_agent, TURN))
    await asyncio.to_thread(started.wait, 5)

    await verifier.aclose()
    release.set()

    outcome = await turn
    assert (outcome.status, outcome.response) == (Status.PASSED, REPLY)


async def test_sync_hooks_run_on_a_verifier_used_after_aclose(
    make_config: Callable[..., VerifierConfig],
) -> None:
    seen: list[int] = []
    verifier = Verifier(
        make_config(verifyAll=True),
        judge=ScriptedJudge(["PASS", "PASS"]),
        on_verdict=lambda turn, attempt: seen.append(attempt.number),
    )
    await verifier.run(ScriptedAgent([REPLY]), TURN)
    await verifier.aclose()

    outcome = await verifier.run(ScriptedAgent([REPLY]), TURN)

    assert outcome.status == Status.PASSED
    assert seen == [1, 1]


HANGS = [
    pytest.param(Step(delay=60), id="hang-before-headers"),
    pytest.param(Step(stall_mid_body=True), id="hang-mid-body"),
]
# Deadlines of 1.5 s, not less: on a busy machine litellm's own preparation (a hop to a worker
# thread) can outlast a shorter one before the request is even sent.
DEADLINES = [
    pytest.param({"timeoutSeconds": 1.5}, id="judgement-timeout"),
    pytest.param({"timeoutSeconds": 30, "maxLatencyMs": 1500}, id="turn-deadline"),
]


async def _open_after_a_hung_judgement(provider: ProviderServer, config: VerifierConfig) -> int:
    """Connections still open at the hung provider the moment the fail-open turn returned."""
    verifier = Verifier(config)
    try:
        await verifier.warmup()
        outcome = await verifier.run(ScriptedAgent([REPLY]), TURN)
        # Blocking this loop on purpose: nothing the turn left for later can run now.
        still_open = provider.open_connections_now(0, within=2.0)
    finally:
        await verifier.aclose()
    assert outcome.status is Status.FAILED_OPEN
    assert len(provider.seen) == 1
    return still_open


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("hang", HANGS)
@pytest.mark.parametrize("deadline", DEADLINES)
async def test_a_timed_out_judgement_has_closed_its_connection_when_the_turn_ends(
    provider: ProviderServer,
    config_for: Callable[..., VerifierConfig],
    wire: Wire,
    hang: Step,
    deadline: dict[str, float],
) -> None:
    """The turn that fails open on a hung judge returns only once the hung request's socket is
    closed: the provider sees the close while the caller's loop runs nothing more (a host that
    ends its loop right after the turn leaves no connection open at the provider). The judge's
    own deadline ends the call from inside the judge; the turn's deadline cancels it from
    outside."""
    provider.push(hang)
    assert await _open_after_a_hung_judgement(provider, config_for(wire, **deadline)) == 0


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("hang", HANGS)
@pytest.mark.parametrize("deadline", DEADLINES)
async def test_a_timed_out_judgement_over_httpx_has_closed_its_connection_when_the_turn_ends(
    provider: ProviderServer,
    config_for: Callable[..., VerifierConfig],
    wire: Wire,
    hang: Step,
    deadline: dict[str, float],
    respx_litellm: None,  # litellm switched to its httpx transport; nothing is mocked
) -> None:
    provider.push(hang)
    assert await _open_after_a_hung_judgement(provider, config_for(wire, **deadline)) == 0


class _SlowToClose:
    """A judge call that hangs, and once cancelled takes a few loop passes and 30 ms to close
    its connection (as httpcore does: a lock, then the stream's close), like a real client."""

    def __init__(self) -> None:
        self.cancellations = 0
        self.closed = False

    async def acompletion(self, **params: Any) -> Any:
        try:
            await asyncio.Event().wait()  # never set
        except asyncio.CancelledError:
            self.cancellations += 1
            for _ in range(3):
                await asyncio.sleep(0.01)
            self.closed = True
            raise


async def test_a_judge_call_cut_off_by_the_turn_deadline_is_cancelled_once_and_closes(
    provider: ProviderServer,
    config_for: Callable[..., VerifierConfig],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The judge's own share ends a few milliseconds before the turn's deadline; a call whose
    clean-up outlasts that gap is not cancelled a second time by the deadline (which would end
    the clean-up before the connection closed, leaving it open at the provider): the turn
    fails open once the call has closed, in time."""
    import litellm

    call = _SlowToClose()
    monkeypatch.setattr(litellm, "acompletion", call.acompletion)
    verifier = Verifier(config_for(OPENAI, timeoutSeconds=30, maxLatencyMs=300))
    try:
        await verifier.warmup()
        await asyncio.to_thread(wait_for_preload)  # no import holds the GIL meanwhile
        started = asyncio.get_running_loop().time()
        outcome = await verifier.run(ScriptedAgent([REPLY]), TURN)
        took = asyncio.get_running_loop().time() - started
    finally:
        await verifier.aclose()
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, "latency_budget")
    assert (call.cancellations, call.closed) == (1, True)
    assert took < 2.0


async def test_a_judge_call_that_never_finishes_closing_does_not_hold_the_turn(
    provider: ProviderServer,
    config_for: Callable[..., VerifierConfig],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The wait for a cancelled call to close is bounded: a client whose clean-up hangs (and
    shrugs off further cancellations) leaves the turn failing open a moment after its
    deadline, the call left to end by itself."""
    import litellm

    release = asyncio.Event()
    cancelled = asyncio.Event()

    async def never_closes(**params: Any) -> Any:
        try:
            await asyncio.Event().wait()  # never set
        except asyncio.CancelledError:
            cancelled.set()
            while not release.is_set():
                with contextlib.suppress(asyncio.CancelledError):
                    await release.wait()
            raise

    monkeypatch.setattr(litellm, "acompletion", never_closes)
    verifier = Verifier(config_for(OPENAI, timeoutSeconds=30, maxLatencyMs=300))
    try:
        await verifier.warmup()
        started = asyncio.get_running_loop().time()
        outcome = await verifier.run(ScriptedAgent([REPLY]), TURN)
        took = asyncio.get_running_loop().time() - started
        assert cancelled.is_set()
    finally:
        release.set()
        await verifier.aclose()
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, "latency_budget")
    assert took < 1.5  # the deadline (0.3 s) and the bounded wait (0.1 s), with room


def test_a_call_given_up_on_is_let_go_once_its_loop_is_closed(
    provider: ProviderServer,
    config_for: Callable[..., VerifierConfig],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A careless host closes its loop while a judge call given up on is still closing: that
    call is not held for ever (the next give-up, on another loop, lets it go)."""
    import litellm

    from replyguard.judge import _settling

    async def never_closes(**params: Any) -> Any:
        try:
            await asyncio.Event().wait()  # never set
        except asyncio.CancelledError:
            while True:  # a clean-up that never ends, shrugging off cancellations
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.Event().wait()  # never set

    monkeypatch.setattr(litellm, "acompletion", never_closes)
    config = config_for(OPENAI, timeoutSeconds=30, maxLatencyMs=300)
    held = []
    for _ in range(2):
        loop = asyncio.new_event_loop()
        try:
            verifier = Verifier(config)
            loop.run_until_complete(verifier.warmup())
            outcome = loop.run_until_complete(verifier.run(ScriptedAgent([REPLY]), TURN))
            assert outcome.reason == "latency_budget"
            held.append([call for call in _settling._UNSETTLED if call.get_loop() is loop])
        finally:
            loop.close()  # the given-up call is still pending on it: no cancel, no run
    assert [len(calls) for calls in held] == [1, 1]
    assert held[0][0] not in _settling._UNSETTLED
    assert held[1][0] in _settling._UNSETTLED
    _settling._UNSETTLED.discard(held[1][0])
    # What the careless host left (its calls, the verifiers' sessions) is finalized here, not
    # in a later test; a call closed by the collector raises nothing (its client scope's
    # context is gone).
    del held, verifier, loop
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


async def _one_turn_on_a_verifier_never_closed(config: VerifierConfig) -> Status:
    """A turn on a verifier nobody keeps or closes (built, used once, dropped)."""
    outcome = await Verifier(config).run(ScriptedAgent([REPLY]), TURN)
    return outcome.status


@pytest.mark.parametrize("wire", WIRES)
async def test_verifiers_dropped_without_aclose_leave_no_connection_open(
    provider: ProviderServer,
    config_for: Callable[..., VerifierConfig],
    wire: Wire,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A host that builds verifiers and never closes them: each one's clients and sessions are
    closed once it is collected (litellm's client cache would keep them, and a connection to
    the provider each, for an hour), and asyncio reports no unclosed session."""
    gc.collect()  # what earlier tests left to the collector is reported now, not below
    caplog.set_level(logging.ERROR, logger="asyncio")
    caplog.clear()
    provider.respond_with(lambda seen: Step(text="PASS"))
    statuses = [await _one_turn_on_a_verifier_never_closed(config_for(wire)) for _ in range(4)]
    assert statuses == [Status.PASSED] * 4
    gc.collect()
    assert await provider.wait_for_open_connections(0, within=5.0) == 0
    gc.collect()
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


@pytest.mark.parametrize("wire", WIRES)
async def test_a_burst_of_judge_calls_is_sent_at_once_as_litellm_would(wire: Wire) -> None:
    """The byte-capped session pools connections as litellm's own client does (500 to a host):
    150 concurrent turns all reach the provider, which answers none until all 150 arrived (a
    pool of aiohttp's default 100 would hold 50 back, and every turn would fail open)."""
    turns = 150
    with ProviderServer(default=Step(text="PASS", after_requests=turns)) as server:
        config = VerifierConfig.from_dict(
            {
                "enabled": True,
                "verifyAll": True,
                "model": wire.judge_model,
                "agentModel": wire.agent_model,
                "apiKey": API_KEY,
                "apiBase": server.url,
                "timeoutSeconds": 8,
            }
        )
        verifier = Verifier(config)
        await verifier.warmup()
        outcomes = await asyncio.gather(
            *(
                verifier.run(ScriptedAgent([f"Done: reply {i}."]), Turn(user_message=f"q{i}"))
                for i in range(turns)
            )
        )
        await verifier.aclose()
    assert {o.status for o in outcomes} == {Status.PASSED}
    assert len(server.seen) == turns


@pytest.mark.parametrize("wire", WIRES)
def test_a_loop_per_request_leaves_no_connection_open_when_each_loop_ends(
    provider: ProviderServer,
    config_for: Callable[..., VerifierConfig],
    wire: Wire,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A sync web framework's host runs each request in a loop of its own (``asyncio.run``)
    with one verifier: each loop's clients close as that loop shuts down. Before, litellm's
    cache kept every finished loop's client, and its connection to the provider, for an hour
    (20 requests: 20 connections open). The verifier stays open: no reopened warning."""
    caplog.set_level(logging.WARNING)
    provider.respond_with(lambda seen: Step(text="PASS"))
    verifier = Verifier(config_for(wire))
    statuses = {asyncio.run(verifier.run(ScriptedAgent([REPLY]), TURN)).status for _ in range(20)}
    assert statuses == {Status.PASSED}
    assert provider.open_connections_now(0, within=5.0) == 0
    verifier.close()
    assert [r.getMessage() for r in caplog.records] == []


def test_a_loops_shutdown_waits_for_a_verifiers_clients_there_only_so_long(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Closing a verifier's clients of a loop that ends (a Redis server or provider that
    stopped answering) holds up the host's ``asyncio.run`` at most ``CLOSE_SECONDS``."""
    from replyguard import _loop_ends

    monkeypatch.setattr(_loop_ends, "CLOSE_SECONDS", 0.2)
    closing = []

    async def hangs() -> None:
        closing.append(True)
        await asyncio.Event().wait()  # never set

    ends = _loop_ends.LoopEnds(hangs)

    async def turn() -> None:
        ends.watch(asyncio.get_running_loop())
        ends.watch(asyncio.get_running_loop())  # once per loop

    def ended_within(seconds: float) -> bool:
        done = threading.Event()
        threading.Thread(target=lambda: (asyncio.run(turn()), done.set()), daemon=True).start()
        return done.wait(seconds)

    assert ended_within(10.0)  # it hung for ever without the bound
    assert closing == [True]


def test_a_hosts_loop_dropped_unclosed_is_not_kept_alive_by_a_verifier() -> None:
    """A host that drops its loops without closing them: a verifier that ran on one does not
    keep it (nor its selector's descriptors) alive; it used to, through its watch of the
    loop's end."""
    verifier = Verifier(
        VerifierConfig(enabled=True, verify_all=True, agent_model="openai/gpt-4o"),
        judge=ScriptedJudge(["PASS"]),
    )
    loop = asyncio.new_event_loop()
    outcome = loop.run_until_complete(verifier.run(ScriptedAgent([REPLY]), TURN))
    assert outcome.status == Status.PASSED
    gone = weakref.ref(loop)
    # The verifier's preload thread builds pydantic validators, which enter and leave
    # ``warnings.catch_warnings`` (one global list before Python 3.14): leaving it in that
    # thread while this block runs would put back the filters without this "ignore".
    assert wait_for_preload(timeout=120)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)  # the host's unclosed loop
        del loop
        gc.collect()
    assert gone() is None
    verifier.close()
