"""What ``instructions.py`` counts, and the counted process: the sides (each a call to repeat),
each warmed and then counted between two dumps that the controller (``callgrind_runs.py``) has
callgrind make; and replyguard's own shares from the counts."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import in_process
from callgrind_runs import ask_dump
from judge_options import sides_for
from scenarios import WIRES, InstantJudge, close_clients

from replyguard import Verifier

_WARM_CALLS = 50
IN_PROCESS = "in-process verified turn"
LOGGED = "in-process verified turn, logging at INFO"
SWITCHED = "in-process verified turn, logging at INFO, level switched per call"
BARE = "in-process bare agent"
BY_HAND = "request by hand"
SLOWED = "in-process verified turn, prompt build slowed"
PLUMBING = "in-process verified turn, screen and prompt build stubbed"
Side = Callable[[], Awaitable[object]]
_SETTLE_SECONDS = 1.0  # litellm's logging of the calls before, in its threads, under valgrind


OWN = "own"
"""The child's wire for replyguard's own share alone (``--own-share``): no judge server."""
STREAM = "stream"
"""The child's wire for a streamed reply (``--stream``): a 1,000-delta stream from the
loopback server iterated raw, and streamed through ``Verifier.stream`` in ``release`` mode,
each also with the collector on during its calls."""
STREAM_DELTAS = 1000


async def _stream_sides(url: str) -> tuple[dict[str, Side], Side]:
    import streaming as st

    agent = st.litellm_agent(url, f"s{STREAM_DELTAS}")
    verifier = Verifier(st.stream_config("release", 64), judge=InstantJudge())

    async def raw() -> None:
        await st.raw_stream(agent, 64, st.Timings())

    read = st.Timings()
    await st.raw_stream(agent, 64, read)  # the reply's length: timed at its last delta alone

    async def streamed() -> None:
        await st.streamed_turn(verifier, agent, st.Timings(), chars=read.chars[0])

    def collecting(side: Side) -> Side:
        async def call() -> None:
            gc.enable()
            try:
                await side()
            finally:
                gc.disable()

        return call

    sides = {"raw stream": raw, "streamed turn": streamed}
    sides |= {f"{name}, collector on": collecting(side) for name, side in sides.items()}

    async def close() -> None:
        await verifier.aclose()
        await close_clients()

    return sides, close


async def _nothing() -> None:
    return None


def _with_added_work(side: Side, iterations: int) -> Side:
    """``side`` with a loop of ``iterations`` passes added to each judge prompt build: a
    regression of known size, which the guard in the tests must see."""
    from replyguard.runner import _prompting

    build = getattr(_prompting, "build_judge_prompt")  # noqa: B009 - patched below, by name

    def slowed(*args: Any, **kwargs: Any) -> Any:
        for _ in range(iterations):
            pass
        return build(*args, **kwargs)

    async def call() -> None:
        setattr(_prompting, "build_judge_prompt", slowed)  # noqa: B010 - a module's name
        try:
            await side()
        finally:
            setattr(_prompting, "build_judge_prompt", build)  # noqa: B010

    return call


def _plumbing_only(side: Side) -> Side:
    """``side`` with the injection screen and the judge prompt's build stubbed out (the screen
    finds nothing, the build gives the prompt its first real call built): what is left is the
    turn's plumbing (``--plumbing``)."""
    from replyguard.runner import _assessment, _prompting

    build, screen = _prompting.build_judge_prompt, _assessment._suspicion
    built: list[Any] = []

    def rebuilt(*args: Any, **kwargs: Any) -> Any:
        if not built:
            built.append(build(*args, **kwargs))
        return built[0]

    async def clean(text: str, limits: Any) -> tuple[tuple[str, ...], None]:
        return (), None

    async def call() -> None:
        setattr(_prompting, "build_judge_prompt", rebuilt)  # noqa: B010 - a module's name
        setattr(_assessment, "_suspicion", clean)  # noqa: B010
        try:
            await side()
        finally:
            setattr(_prompting, "build_judge_prompt", build)  # noqa: B010
            setattr(_assessment, "_suspicion", screen)  # noqa: B010

    return call


def _switched(side: Side) -> Side:
    """``side`` with the ``replyguard`` logger set to INFO before each call and back to WARNING
    after it, as the wall-time row's logged side is and this row's was until issue 42's third
    round (each ``setLevel`` empties every logger's level cache,
    so the calls after it pay look-ups a host that sets its levels once does not pay). Its
    records reach the host's handler ``child`` attaches for every side, which drops them:
    ``in_process.DiscardingHandler``."""
    logger = logging.getLogger("replyguard")

    async def call() -> None:
        logger.setLevel(logging.INFO)
        try:
            await side()
        finally:
            logger.setLevel(logging.WARNING)

    return call


async def _sides(
    wire_name: str, url: str, added_work: int, plumbing: bool = False
) -> tuple[dict[str, Side], Side]:
    """The sides to count for ``wire_name`` (``OWN``: the own share alone), and what closes
    what they opened."""
    if wire_name == STREAM:
        return await _stream_sides(url)
    own, bare = await in_process.instant_sides()
    own_sides: dict[str, Side] = {
        IN_PROCESS: own,
        LOGGED: own,  # its counted block holds the level at INFO: ``_LEVEL_HELD``
        SWITCHED: _switched(own),
        BARE: bare,
    }
    if added_work:
        own_sides[SLOWED] = _with_added_work(own, added_work)
    if plumbing:
        own_sides[PLUMBING] = _plumbing_only(own)
    if wire_name == OWN:
        return own_sides, _nothing
    sides, close = await sides_for(WIRES[wire_name], url)
    return {**sides, **own_sides}, close


_LEVEL_HELD = {IN_PROCESS: logging.WARNING, LOGGED: logging.INFO}
"""The ``replyguard`` logger's level held through each of these sides' warm-up and counted
block, set before the block's first dump (``in_process.logger_level``): logging off and on as a
host that sets its levels once runs them."""


def _level(name: str) -> contextlib.AbstractContextManager[None]:
    level = _LEVEL_HELD.get(name)
    return contextlib.nullcontext() if level is None else in_process.logger_level(level)


async def child(
    wire_name: str, url: str, folder: Path, calls: int, added_work: int, plumbing: bool = False
) -> None:
    """The counted process: every side warmed, then each counted between two dumps."""
    sides, close = await _sides(wire_name, url, added_work, plumbing)
    settle = 0.0 if wire_name == OWN else _SETTLE_SECONDS  # in-process sides log nothing
    try:
        with in_process.host_handler():  # as on a host that configured logging, whatever the level
            for name, side in sides.items():
                with _level(name):
                    for _ in range(_WARM_CALLS if wire_name != STREAM else 3):
                        await side()
            for index, (name, side) in enumerate(sides.items()):
                with _level(name):
                    if name in _LEVEL_HELD:
                        await side()  # the level's look-ups cached again before the count
                    await asyncio.sleep(settle)
                    gc.collect()
                    gc.disable()
                    ask_dump(folder, "start", index, name)
                    await _calls(side, calls)
                    await asyncio.sleep(settle)
                    ask_dump(folder, "end", index, name)
                    gc.enable()
    finally:
        await close()


async def _calls(side: Side, calls: int) -> None:
    for _ in range(calls):
        await side()


def shares(per_call: dict[str, float]) -> dict[str, float]:
    """replyguard's own share per turn (the in-process turn over the bare agent), and the
    slowed turn's when it was counted."""
    if IN_PROCESS not in per_call:
        return {}
    shares = {
        "own_share": per_call[IN_PROCESS] - per_call[BARE],
        "logging_at_info": per_call[LOGGED] - per_call[IN_PROCESS],
        "logging_at_info_level_switched": per_call[SWITCHED] - per_call[IN_PROCESS],
    }
    if SLOWED in per_call:
        shares["slowed_own_share"] = per_call[SLOWED] - per_call[BARE]
    if PLUMBING in per_call:
        shares["plumbing"] = per_call[PLUMBING] - per_call[BARE]
    return shares
