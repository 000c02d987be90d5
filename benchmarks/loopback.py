"""The scenarios against the loopback judge (``judge_server.py``, its own process): a verified
turn beside the raw ``litellm.acompletion`` of its request, the floor (a bare HTTP POST), big
turns, bursts of concurrent turns, a hung judge's fail-open, and a judge panel."""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

from sampling import Burst, Pair, burst, interleaved, rotated
from scenarios import (
    WIRES,
    Wire,
    close_clients,
    config,
    default_params,
    judge_params,
    raw_call,
    reply_agent,
    sized_turn,
    typical_turn,
)

from replyguard import Reply, RunMeta, Verifier


async def against_raw_call(
    measured: Callable[[], Awaitable[Any]],
    params: dict[str, Any],
    pairs: int,
    warmup: int,
    *,
    cleanup: Callable[[], Awaitable[Any]] | None = None,
) -> Any:
    """``measured`` interleaved with a raw litellm call of ``params`` (the reference); the
    clients are closed afterwards, and ``cleanup`` run."""

    async def reference() -> None:
        await raw_call(params)

    try:
        return await interleaved(measured, reference, pairs, warmup=warmup)
    finally:
        await close_clients()
        if cleanup is not None:
            await cleanup()


async def _passing_turn(
    wire: Wire, url: str
) -> tuple[Callable[[], Awaitable[None]], dict[str, Any]]:
    """A verified turn that passes first time against ``url``'s fast judge, and the judge's
    request for it (``judge_params``: the raw references are made from it)."""
    turn, reply = typical_turn()
    cfg = config(wire, f"{url}/fast", verifyAll=True)
    verifier = Verifier(cfg)
    await verifier.warmup()
    agent = reply_agent(reply)
    outcome = await verifier.run(agent, turn)
    if outcome.status != "passed":
        raise RuntimeError(f"the verified turn ended {outcome.status} ({outcome.reason})")

    async def measured() -> None:
        await verifier.run(agent, turn)

    return measured, judge_params(cfg, turn, reply)


async def verified_vs_raw(
    wire: Wire, url: str, pairs: int, *, warmup: int = 30
) -> tuple[Pair, dict[str, Any]]:
    """A verified turn that passes first time vs one default ``litellm.acompletion`` of the
    same messages (``default_params``), same server."""
    measured, by_hand = await _passing_turn(wire, url)
    params = default_params(by_hand)
    pair = await against_raw_call(measured, params, pairs, warmup)
    info = {"prompt_chars": sum(len(m["content"]) for m in params["messages"])}
    return pair, info


async def verified_vs_requests(
    wire: Wire, url: str, rounds: int, *, warmup: int = 30
) -> tuple[Pair, Pair, dict[str, Any]]:
    """A verified turn that passes first time vs the same judge request sent by hand through
    ``litellm.acompletion`` (``judge_params``: model, messages, ``response_format``,
    ``temperature``, ``max_tokens``...), and vs a default call of the same messages
    (``default_params``), the three rotated in one loop, same server."""
    measured, by_hand = await _passing_turn(wire, url)
    default = default_params(by_hand)

    async def hand() -> None:
        await raw_call(by_hand)

    async def plain() -> None:
        await raw_call(default)

    try:
        turns, hands, plains = await rotated([measured, hand, plain], rounds, warmup=warmup)
    finally:
        await close_clients()
    info = {"prompt_chars": sum(len(m["content"]) for m in by_hand["messages"])}
    return Pair(turns, hands), Pair(turns, plains), info


async def concurrent_vs_raw(
    wire: Wire, url: str, count: int, delay_ms: int, rounds: int, *, frozen: bool = False
) -> tuple[list[Burst], list[Burst]]:
    """``count`` concurrent verified turns vs ``count`` concurrent raw calls of the judge's
    own request (``judge_params``), alternating. A turn that does not pass (it failed open:
    the machine was too busy for the judge's timeout) counts in its burst's ``failed``.
    ``frozen``: the host's recipe, ``gc.freeze()`` once both sides are warm, so no full
    collection walks the heap the imports left (undone after the bursts)."""
    turn, reply = typical_turn()
    cfg = config(wire, f"{url}/d{delay_ms}", verifyAll=True)
    verifier = Verifier(cfg)
    await verifier.warmup()
    agent = reply_agent(reply)
    params = judge_params(cfg, turn, reply)

    async def verified() -> bool:
        outcome = await verifier.run(agent, turn)
        return outcome.status == "passed"

    async def raw() -> bool:
        await raw_call(params)
        return True

    measured: list[Burst] = []
    reference: list[Burst] = []
    try:
        await burst(raw, count)  # opens the connection pool for both sides
        await burst(verified, count)
        if frozen:
            gc.collect()
            gc.freeze()
        for i in range(rounds):
            order = [(reference, raw), (measured, verified)]
            if i % 2:
                order.reverse()
            for sink, make in order:
                gc.collect()
                sink.append(await burst(make, count))
    finally:
        gc.unfreeze()
        await close_clients()
    return measured, reference


async def fail_open(wire: Wire, url: str, runs: int, timeout_seconds: float) -> list[float]:
    """Wall time of a turn whose judge hangs, with ``timeoutSeconds`` = ``timeout_seconds``."""
    turn, reply = typical_turn()
    agent = reply_agent(reply)
    times = []
    try:
        for _ in range(runs):
            cfg = config(wire, f"{url}/hang", verifyAll=True, timeoutSeconds=timeout_seconds)
            verifier = Verifier(cfg)  # a fresh circuit breaker: every run really waits
            await verifier.warmup()
            t0 = time.perf_counter()
            outcome = await verifier.run(agent, turn)
            times.append(time.perf_counter() - t0)
            if outcome.status != "failed_open":
                raise RuntimeError(f"a hung judge ended the turn {outcome.status}")
    finally:
        await close_clients()
    return times


async def big_turn_vs_raw(
    wire: Wire, url: str, chars: int, pairs: int, *, kind: str = "prose", warmup: int = 3
) -> tuple[Pair, dict[str, Any]]:
    """``verifier.verify()`` of a turn of ``chars`` characters (half of them the reply) vs one
    raw ``litellm.acompletion`` with the very messages the judge is sent: replyguard's whole
    end-to-end cost for a big turn (the prompt, the injection scan, the plumbing)."""
    turn, reply_text, _ = sized_turn(chars, kind)
    reply = Reply(text=reply_text, meta=RunMeta(stop_reason="stop"))
    cfg = config(wire, f"{url}/fast")
    verifier = Verifier(cfg)
    await verifier.warmup()
    params = judge_params(cfg, turn, reply)
    verdict = await verifier.verify(turn, reply)
    if not verdict.passed or verdict.fail_open_reason is not None:
        raise RuntimeError(f"the big turn was not passed: {verdict.fail_open_reason}")

    async def measured() -> None:
        await verifier.verify(turn, reply)

    pair = await against_raw_call(measured, params, pairs, warmup, cleanup=verifier.aclose)
    sent = sum(len(m["content"]) for m in params["messages"])
    return pair, {"chars": chars, "kind": kind, "prompt_chars": sent}


async def bare_post_vs_raw(wire: Wire, url: str, pairs: int) -> tuple[Pair, dict[str, Any]]:
    """The floor: one HTTP POST of the very body litellm sends (raw asyncio streams, one
    kept-alive connection, ``TCP_NODELAY``) vs one raw ``litellm.acompletion``."""
    from urllib.parse import urlsplit

    turn, reply = typical_turn()
    cfg = config(wire, f"{url}/fast", verifyAll=True)
    params = judge_params(cfg, turn, reply)
    path = "/fast/v1/messages" if wire.name == "anthropic" else "/fast/chat/completions"
    body = json.dumps(
        {"model": wire.judge_model.split("/", 1)[1], "messages": params["messages"]}
    ).encode()
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    head = (
        f"POST {path} HTTP/1.1\r\nhost: {parts.netloc}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()

    async def post() -> None:
        writer.write(head + body)
        answer = await reader.readuntil(b"\r\n\r\n")
        length = int(answer.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        await reader.readexactly(length)

    async def reference() -> None:
        await raw_call(params)

    try:
        pair = await interleaved(post, reference, pairs, warmup=30)
    finally:
        writer.close()
        await close_clients()
    return pair, {"body_bytes": len(body)}


PANEL_MEMBERS = ("openai/gpt-4o-mini", "openai/gemini-2.0-flash", "openai/deepseek-chat")


async def panel_sides(url: str, pairs: int, delay_ms: int = 50) -> tuple[Pair, Pair]:
    """A verification by a three-member panel, every call answered after ``delay_ms``, against
    (1) the same three requests sent with raw ``litellm.acompletion`` at once (the floor: the
    slowest of three concurrent calls, whose CPU work shares one event loop) and (2) one
    verification by a single judge."""
    turn, reply = typical_turn()
    wire = WIRES["openai"]
    api_base = f"{url}/d{delay_ms}"
    agent = "mistral/mistral-large-latest"
    single = Verifier(config(wire, api_base, agentModel=agent))
    panel = Verifier(
        config(wire, api_base, agentModel=agent, panel={"models": list(PANEL_MEMBERS)})
    )
    params = judge_params(config(wire, api_base, agentModel=agent), turn, reply)
    import litellm

    try:
        for verifier in (single, panel):
            await verifier.warmup()

        async def by_panel() -> None:
            verdict = await panel.verify(turn, reply)
            if len(verdict.members) != len(PANEL_MEMBERS) or verdict.fail_open_reason:
                raise RuntimeError(f"the panel did not decide: {verdict.error}")

        async def by_one() -> None:
            verdict = await single.verify(turn, reply)
            if verdict.fail_open_reason:
                raise RuntimeError(f"the judge did not decide: {verdict.error}")

        async def raw_three() -> None:
            calls = (litellm.acompletion(**{**params, "model": m}) for m in PANEL_MEMBERS)
            await asyncio.gather(*calls)

        floor = await interleaved(by_panel, raw_three, pairs, warmup=10)
        versus_one = await interleaved(by_panel, by_one, pairs, warmup=5)
        return floor, versus_one
    finally:
        await single.aclose()
        await panel.aclose()
        await close_clients()
