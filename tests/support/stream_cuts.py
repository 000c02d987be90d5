"""Streams cut by an incremental check, played through ``run`` and ``stream`` alike.

Shared by ``tests/runner/test_stream_cut_parity.py`` (the shipped fakes, both modes) and the
fault matrix (``tests/runner/test_fault_matrix.py``: a loopback provider on both wires, and
nothing left behind). A rules check forbids "as an AI"; the violating reply's fragment up to
the phrase ("... as an AI I can") says the opposite of the whole reply ("... cannot book
tables"). Each ``Scenario`` is a script of the agent's replies (pieces for ``stream``, joined
for ``run``), the judge's answers, config keys, and what the stream delivers where ``run``
delivers a reply the stream never read whole (it was cut).

Time is proven with events: a stalled retry waits on an event that never fires, and the turn's
deadline is what ends it; ``BOUND`` is a hang guard only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from replyguard import Delta, Done, Outcome, Reason, Retract, Status, Turn, Verifier
from support.fault_matrix import config, tasks_left_behind, warm_up
from support.provider_server import ProviderServer, Step, Wire

TURN = Turn(user_message="Can you book the table?", id="turn-cut-parity")
VIOLATING = (
    "Sure, I can help with that. ",
    "Well, as ",
    "an AI I can",
    "not book tables, ",
    "but here is ",
    "the number.",
)
FRAGMENT = "Sure, I can help with that. Well, as an AI I can"
WHOLE = "".join(VIOLATING)
GOOD = ("Booked for 8 pm ", "tonight.")
UNCLEAR = ("We open ", "at 8 pm.")  # complete, passes the checks; the judge fails it
FAIL = "FAIL [goal_missed]: say whether the table is booked"
BOUND = 30.0
"""A hang guard only: every turn here ends on events (a script's end, the turn's deadline)."""


class Stall:
    """A script entry: the agent stops sending (a stream after its first piece; ``run``'s
    agent before it answers) and never resumes."""


STALL = Stall()
Entry = Sequence[str] | Exception | Stall


class Doors:
    """The same script for both doors: ``whole`` (for ``run``) and ``pieces`` (for ``stream``)."""

    def __init__(self, script: Sequence[Entry]) -> None:
        self.script = list(script)
        self.calls = {"run": 0, "stream": 0}

    def _entry(self, door: str) -> Entry:
        entry = self.script[self.calls[door]]
        self.calls[door] += 1
        return entry

    async def whole(self, messages: list[dict[str, Any]]) -> str:
        entry = self._entry("run")
        if isinstance(entry, Exception):
            raise entry
        if isinstance(entry, Stall):
            await asyncio.Event().wait()
        return "".join(entry)  # type: ignore[arg-type]

    async def pieces(self, messages: list[dict[str, Any]]) -> AsyncIterator[str]:
        entry = self._entry("stream")
        if isinstance(entry, Exception):
            raise entry
        return self._stream(entry)

    async def _stream(self, entry: Sequence[str] | Stall) -> AsyncIterator[str]:
        if isinstance(entry, Stall):
            yield "One moment, "
            await asyncio.Event().wait()
            return
        for piece in entry:
            yield piece
            await asyncio.sleep(0)


@dataclass(frozen=True)
class Scenario:
    name: str
    script: tuple[Entry, ...]
    answers: tuple[str, ...] = ()
    keys: dict[str, Any] = field(default_factory=dict)
    streamed_response: str | None = None
    """What the stream delivers where ``run`` delivers a reply the stream cut (None: the same
    as ``run``)."""


SCENARIOS = (
    Scenario("cut-at-the-last-attempt", (VIOLATING,), keys={"maxAttempts": 1}),
    Scenario("final-retry-has-the-violation", (UNCLEAR, VIOLATING), (FAIL,), {"maxAttempts": 2}),
    Scenario("cut-then-a-passing-retry", (VIOLATING, GOOD), ("PASS",)),
    Scenario("cut-then-the-same-reply-again", (VIOLATING, VIOLATING, VIOLATING)),
    Scenario(
        "judged-then-cut-then-stalls-deliver-best",
        (UNCLEAR, VIOLATING, STALL),
        (FAIL,),
        {"maxLatencyMs": 500, "deliver": "best"},
    ),
    # The stream never read the whole reply run delivers here:
    Scenario("cut-then-retry-raises", (VIOLATING, RuntimeError("down")), streamed_response=""),
    Scenario(
        "judged-then-cut-then-retry-raises",
        (UNCLEAR, VIOLATING, RuntimeError("down")),
        (FAIL,),
        streamed_response="".join(UNCLEAR),
    ),
    Scenario("cut-then-an-empty-retry", (VIOLATING, ("",)), streamed_response=""),
    Scenario(
        "cut-then-exhausted-deliver-first",
        (VIOLATING, UNCLEAR),
        (FAIL,),
        {"maxAttempts": 2, "deliver": "first"},
        streamed_response="".join(UNCLEAR),
    ),
    Scenario(
        "cut-then-retry-stalls",
        (VIOLATING, STALL),
        keys={"maxLatencyMs": 500},
        streamed_response="",
    ),
    Scenario(
        "judged-then-cut-then-stalls",
        (UNCLEAR, VIOLATING, STALL),
        (FAIL,),
        {"maxLatencyMs": 500},
        streamed_response="".join(UNCLEAR),
    ),
)


async def streamed(verifier: Verifier, agent: Any, turn: Turn = TURN) -> tuple[list[Any], Outcome]:
    """The stream's events and its outcome, once the stream's invariant holds for it."""
    async with asyncio.timeout(BOUND):
        events = [event async for event in verifier.stream(agent, turn)]
    assert isinstance(events[-1], Done)
    shown = "".join(e.text for e in events[last_retract(events) :] if isinstance(e, Delta))
    outcome: Outcome = events[-1].outcome
    assert shown == outcome.response
    assert all(e.text for e in events if isinstance(e, Delta))
    return events, outcome


def last_retract(events: Sequence[Any]) -> int:
    return max((i for i, e in enumerate(events) if isinstance(e, Retract)), default=0)


Summary = tuple[Status, Reason | None, str, int]
"""An outcome's status, reason, response and number of attempts."""


def summary(outcome: Outcome) -> Summary:
    return outcome.status, outcome.reason, outcome.response, len(outcome.attempts)


def expected(scenario: Scenario, ran: Summary) -> Summary:
    """What the stream must end with: ``run``'s outcome (``summary``), but for the reply it
    never read."""
    status, reason, response, attempts = ran
    if scenario.streamed_response is not None:
        response = scenario.streamed_response
    return status, reason, response, attempts


# -- through a loopback provider (the fault matrix) -----------------------------------------------

MATRIX_LATENCY_MS = 3000
"""``maxLatencyMs`` of the matrix's stalling scenarios: room for a real judge call first, on a
busy machine (a judge call that outlasts it ends either door early, and differently)."""


@dataclass
class CutResult:
    """What one scenario did through both doors on one wire."""

    ran: Summary | None = None
    streamed: Summary | None = None
    escaped: str | None = None
    connections_left: int = 0
    tasks_left: list[str] = field(default_factory=list)


UNTIMED_SECONDS = 20.0
"""``timeoutSeconds`` of the scenarios that stall nothing: no deadline is under test there, and
every scenario runs at once on one loop, so a judge call waits for the others' work too (on a
busy machine a fault-free call missed the matrix's 3 s and the turn failed open); under
``BOUND``, so a hung call still ends the turn before the harness gives up on it."""


def _matrix_config(scenario: Scenario, wire: Wire, api_base: str, mode: str) -> Any:
    keys = {"maxAttempts": 3, **scenario.keys}
    if "maxLatencyMs" in keys:
        keys["maxLatencyMs"] = MATRIX_LATENCY_MS
    else:
        keys["timeoutSeconds"] = UNTIMED_SECONDS
    return config(
        wire,
        api_base,
        checks=[{"type": "rules", "forbiddenPhrases": ["as an AI"]}],
        streaming={"mode": mode, "holdBackChars": 16},
        **keys,
    )


async def _both_doors(scenario: Scenario, wire: Wire, mode: str, result: CutResult) -> None:
    with ProviderServer() as server:
        doors = Doors(scenario.script)
        for door in ("run", "stream"):
            server.push(*(Step(text=answer) for answer in scenario.answers))
            verifier = Verifier(_matrix_config(scenario, wire, server.url, mode))
            try:
                if door == "run":
                    async with asyncio.timeout(BOUND):
                        result.ran = summary(await verifier.run(doors.whole, TURN))
                else:
                    result.streamed = summary((await streamed(verifier, doors.pieces))[1])
            except Exception as exc:
                result.escaped = f"{door}: {exc!r}"
            finally:
                await verifier.aclose()
        result.connections_left = await server.wait_for_open_connections(0)


async def run_cuts(wire: Wire, mode: str = "release") -> dict[str, CutResult]:
    """Every scenario through both doors on ``wire``, at once (each with its own provider);
    the tasks left once every verifier is closed are counted for them all."""
    await warm_up()
    results = {scenario.name: CutResult() for scenario in SCENARIOS}
    await asyncio.gather(*(_both_doors(s, wire, mode, results[s.name]) for s in SCENARIOS))
    left = tasks_left_behind()
    for result in results.values():
        result.tasks_left = left
    return results
