"""The fault matrix's host half: what a careless host does around a turn, and what it must get.

``fault_matrix`` drives what the provider can do wrong; these cases are what the host can do
wrong while the provider is fine: close one verifier while another works (a config reload),
close a verifier while its turn is being judged, use a verifier after closing it, close it
under a ``run_sync`` turn, run a command check whose command leaves a detached child, let a
check repeat a coarse message while the agent's replies improve, and send a burst of turns
under a spend limit that has room for all of them. Each runs through
``Verifier.run`` against a loopback provider that answers PASS (litellm's real aiohttp path,
either wire format). Every turn must be judged and pass (never a silent fail-open), no client
connection may stay open once the verifiers are closed, and no process may be left behind.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replyguard import Outcome, Reply, Turn, Verifier
from replyguard.testing import ScriptedAgent
from support.fault_matrix import FIRST_REPLY, RETRY_REPLY, USER_MESSAGE, config
from support.provider_server import ProviderServer, Step, Wire

TURN = Turn(user_message=USER_MESSAGE)

# A command that leaves a child in a session of its own (stdio on /dev/null), records the
# child's pid in argv[1], and exits 0.
DETACHING_COMMAND = """
import os, subprocess, sys
child = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True,
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
with open(sys.argv[1], "w") as f:
    f.write(str(child.pid))
"""


@dataclass
class HostResult:
    """What one host-fault case did."""

    outcomes: list[tuple[str, str | None]] = field(default_factory=list)
    """Each turn's ``(status, reason)``."""
    connections_left: int = 0
    """Client connections the provider still held once every verifier was closed."""
    processes_left: list[int] = field(default_factory=list)
    """Processes a check started that are still alive."""

    def record(self, outcome: Outcome) -> None:
        reason = None if outcome.reason is None else outcome.reason.value
        self.outcomes.append((outcome.status.value, reason))


async def _sibling_closed(wire: Wire, server: ProviderServer, result: HostResult) -> None:
    old, other = Verifier(config(wire, server.url)), Verifier(config(wire, server.url))
    for verifier in (old, other):
        result.record(await verifier.run(ScriptedAgent([FIRST_REPLY]), TURN))
    await old.aclose()  # a config reload: the old verifier goes, the other one stays
    result.record(await other.run(ScriptedAgent([FIRST_REPLY]), TURN))
    await other.aclose()


async def _closed_mid_judgement(wire: Wire, server: ProviderServer, result: HostResult) -> None:
    server.push(Step(text="PASS", delay=0.3))
    verifier = Verifier(config(wire, server.url))
    turn = asyncio.create_task(verifier.run(ScriptedAgent([FIRST_REPLY]), TURN))
    await server.wait_for_requests(1)
    await verifier.aclose()
    result.record(await turn)


async def _reused_after_close(wire: Wire, server: ProviderServer, result: HostResult) -> None:
    verifier = Verifier(config(wire, server.url))
    result.record(await verifier.run(ScriptedAgent([FIRST_REPLY]), TURN))
    await verifier.aclose()
    result.record(await verifier.run(ScriptedAgent([FIRST_REPLY]), TURN))
    await verifier.aclose()


async def _closed_under_run_sync(wire: Wire, server: ProviderServer, result: HostResult) -> None:
    started, release = threading.Event(), threading.Event()

    def slow_agent(messages: list[dict[str, Any]]) -> str:
        started.set()
        release.wait(5)
        return FIRST_REPLY

    verifier = Verifier(config(wire, server.url))
    turn = asyncio.create_task(asyncio.to_thread(verifier.run_sync, slow_agent, TURN))
    await asyncio.to_thread(started.wait, 5)
    await verifier.aclose()
    release.set()
    result.record(await turn)


async def _detached_check_child(wire: Wire, server: ProviderServer, result: HostResult) -> None:
    with tempfile.TemporaryDirectory() as directory:
        pid_file = os.path.join(directory, "pid")
        command = [sys.executable, "-c", DETACHING_COMMAND, pid_file]
        checks = [{"type": "command", "command": command, "required": True}]
        verifier = Verifier(config(wire, server.url, checks=checks))
        result.record(await verifier.run(ScriptedAgent([FIRST_REPLY]), TURN))
        await verifier.aclose()
        pid = int(await asyncio.to_thread(Path(pid_file).read_text))
    for _ in range(100):
        if not _alive(pid):
            return
        await asyncio.sleep(0.02)
    result.processes_left.append(pid)


async def _check_repeating_a_coarse_message(
    wire: Wire, server: ProviderServer, result: HostResult
) -> None:
    def tests(turn: Turn, reply: Reply) -> tuple[bool, str]:
        return reply.text == RETRY_REPLY, "1 test failed"

    verifier = Verifier(config(wire, server.url, maxAttempts=3), checks=[tests])
    agent = ScriptedAgent([FIRST_REPLY, "Done: the checklist, five items.", RETRY_REPLY])
    result.record(await verifier.run(agent, TURN))
    await verifier.aclose()


async def _burst_under_a_spend_limit(
    wire: Wire, server: ProviderServer, result: HostResult
) -> None:
    """20 turns at once under a spend limit worth 40 of their calls: each is held at what a
    call really costs, so every one is judged (held at its worst case, about half of them
    failed open with ``spend_limit``)."""
    measuring = Verifier(config(wire, server.url))
    cost = (await measuring.run(ScriptedAgent([FIRST_REPLY]), TURN)).cost_usd
    await measuring.aclose()
    assert cost > 0, "the provider's usage was not priced"
    limits = [{"scope": "global", "window": "1d", "usd": 40 * cost}]
    # A deadline far off: 20 judgements at once on a busy machine take seconds, and a timeout
    # is not the case under test.
    verifier = Verifier(config(wire, server.url, spendLimits=limits, timeoutSeconds=30))
    turns = [verifier.run(ScriptedAgent([FIRST_REPLY]), TURN) for _ in range(20)]
    for outcome in await asyncio.gather(*turns):
        result.record(outcome)
    await verifier.aclose()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


HostFault = Callable[[Wire, ProviderServer, HostResult], Awaitable[None]]

HOST_FAULTS: dict[str, HostFault] = {
    "sibling-verifier-closed": _sibling_closed,
    "closed-mid-judgement": _closed_mid_judgement,
    "reused-after-aclose": _reused_after_close,
    "closed-under-run-sync": _closed_under_run_sync,
    "check-leaves-a-detached-child": _detached_check_child,
    "check-repeats-a-coarse-message": _check_repeating_a_coarse_message,
    "burst-under-a-spend-limit": _burst_under_a_spend_limit,
}
LINUX_ONLY = frozenset({"check-leaves-a-detached-child"})
"""Cases whose guarantee holds on Linux only (a child subreaper; elsewhere a process group)."""


async def run_host_fault(name: str, wire: Wire) -> HostResult:
    """Run one host-fault case on ``wire`` against its own provider, answering PASS."""
    result = HostResult()
    with ProviderServer(default=Step(text="PASS")) as server:
        await HOST_FAULTS[name](wire, server, result)
        result.connections_left = await server.wait_for_open_connections(0)
    return result
