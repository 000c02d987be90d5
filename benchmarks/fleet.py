"""What the fleet's shared state adds to a judged turn (``run.py --only fleet``), and what a
burst of turns gets admitted under a spend limit.

A loopback ``redis-server`` (no persistence, a free port, stopped by its pid) holds the shared
breaker and a spend limit. Each sample is a pair of ``verify`` calls made back to back, one by a
verifier without ``state`` and one with it (both with a scripted judge that answers at once, so
the difference is the shared state's cost: the admission round trip and the bookkeeping around
it; the spend settlement, the second round trip, lands in the background after the verdict and
is waited for between samples). Then Redis is paused (SIGSTOP): the first turn pays at most
``timeoutMs``, the later ones nothing while Redis is known down.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from replyguard import Turn, Verifier, VerifierConfig
from replyguard.testing import ScriptedJudge
from support.redis_server import redis_server

TIMEOUT_MS = 50
TURN = Turn(user_message="Is the report done?", agent_id="agent-1")
REPLY = "Done: the report is in reports/q3.pdf."


def _verifier(pairs: int, **keys: Any) -> Verifier:
    base = {"enabled": True, "model": "openai/gpt-4o-mini", "verifyAll": True}
    judge = ScriptedJudge(["PASS"] * (pairs + 10), cost_usd=0.0001)
    return Verifier(VerifierConfig.from_dict({**base, **keys}), judge=judge, preload=False)


async def _pair(
    plain: Verifier, shared: Verifier, *, degraded: bool = False
) -> tuple[float, float]:
    started = time.perf_counter()
    await plain.verify(TURN, REPLY)
    middle = time.perf_counter()
    verdict = await shared.verify(TURN, REPLY)
    ended = time.perf_counter()
    assert verdict.fail_open_reason is None, verdict.error
    state = shared._state  # the spend settlement lands in the background: not in the next pair
    if state is not None:
        await state.settled()
    return middle - started, ended - middle, verdict.shared_state == "degraded"


async def measure(pairs: int) -> dict[str, Any]:
    """Median added seconds per judged turn with Redis up; with it paused, the first turn's
    added time and the median of the later ones'."""
    with redis_server() as server:
        state = {"redisUrl": server.url(), "timeoutMs": TIMEOUT_MS}
        limits = [{"scope": "global", "window": "1h", "usd": 1e6}]
        plain = _verifier(pairs * 4 + 1000)
        shared = _verifier(pairs * 3 + 1000, state=state, spendLimits=limits)
        in_process = _verifier(pairs + 10, spendLimits=limits)
        await shared.warmup()
        for _ in range(20):  # warm: connection, scripts, tokenizer
            await _pair(plain, shared)
        samples = [await _pair(plain, shared) for _ in range(pairs)]
        # A sample decided on local state (a Redis call slower than timeoutMs on a busy
        # machine) does not measure Redis: left out, and counted.
        up = [s - p for p, s, degraded in samples if not degraded]
        local = [await _pair(plain, in_process) for _ in range(pairs)]
        for _ in range(100):  # Redis known up again before it is paused
            if not (await _pair(plain, shared))[2]:
                break
            await asyncio.sleep(0.1)
        server.pause()
        try:
            first = await _pair(plain, shared)
            later = [await _pair(plain, shared) for _ in range(pairs)]
        finally:
            server.resume()
        assert first[2]
        assert all(degraded for _, _, degraded in later)
        for verifier in (plain, shared, in_process):
            await verifier.aclose()
    return {
        "up_s": statistics.median(up),
        "up_p95_s": sorted(up)[int(len(up) * 0.95)],
        "local_s": statistics.median(s - p for p, s, _ in local),
        "left_out": pairs - len(up),
        "down_first_s": first[1] - first[0],
        "down_later_s": statistics.median(s - p for p, s, _ in later),
        "timeout_s": TIMEOUT_MS / 1000,
        "pairs": pairs,
    }


# -- spend limits: what a burst gets admitted ------------------------------------------------

PRICED_JUDGE = "openai/gpt-4o-mini"  # litellm's map: $0.15 / $0.60 per million tokens
CALL_COST = 900 * 0.15e-6 + 12 * 0.60e-6  # the loopback provider's usage: 900 in, 12 out


async def _burst(config: dict[str, Any], turns: int, judge: Any = None) -> dict[str, Any]:
    """``turns`` judgements at once: how many were made, what they spent, and how many were
    decided on local state (a Redis call slower than ``timeoutMs`` on a busy machine)."""
    verifier = Verifier(VerifierConfig.from_dict(config), judge=judge, preload=False)
    await verifier.warmup()
    verdicts = await asyncio.gather(*(verifier.verify(TURN, REPLY) for _ in range(turns)))
    await verifier.aclose()
    assert all(v.fail_open_reason in (None, "spend_limit") for v in verdicts), verdicts
    return {
        "admitted": sum(v.fail_open_reason is None for v in verdicts),
        "spent": sum(v.cost_usd for v in verdicts),
        "degraded": sum(v.shared_state == "degraded" for v in verdicts),
    }


async def measure_admission(bursts: tuple[tuple[int, int], ...] = ((3, 10), (25, 150))) -> Any:
    """For each ``(calls, turns)``: a limit worth ``calls`` real calls (and half of one),
    ``turns`` simultaneous judgements of a priced judge through a loopback provider, in
    process and on Redis: the calls admitted and the spend. Then an unpriced judge ($0.02 a
    call) under $0.05, 20 judgements at once."""
    from support.provider_server import ProviderServer, Step

    rows = []
    with redis_server() as server, ProviderServer(default=Step(text="PASS", delay=0.05)) as api:
        state = {"redisUrl": server.url(), "timeoutMs": 1000}  # a busy machine: see "degraded"
        homes = {"in process": {}, "Redis": {"state": state}}
        base = {"enabled": True, "model": PRICED_JUDGE, "apiKey": "sk-bench-0123456789abcdef"}
        base |= {"apiBase": f"{api.url}/v1", "timeoutSeconds": 60}
        for calls, turns in bursts:
            limit = (calls + 0.5) * CALL_COST
            for home, keys in homes.items():
                limits = [{"scope": "global", "window": "1h", "usd": limit}]
                config = {**base, **keys, "spendLimits": limits}
                config["state"] = {**keys.get("state", {}), "keyPrefix": f"b{len(rows)}:"}
                if not keys:
                    del config["state"]
                found = await _burst(config, turns)
                rows.append({"home": home, "calls": calls, "turns": turns, **found,
                             "limit": limit, "call": CALL_COST})  # fmt: skip
        for home, keys in homes.items():
            config = {"enabled": True, "model": "openai/replyguard-bench-unpriced", **keys}
            config["spendLimits"] = [{"scope": "global", "window": "1h", "usd": 0.05}]
            if keys:
                config["state"] = {**keys["state"], "keyPrefix": f"u{len(rows)}:"}
            judge = ScriptedJudge(["PASS"] * 20, cost_usd=0.02, delay=0.05)
            found = await _burst(config, 20, judge)
            rows.append({"home": home, "calls": 2, "turns": 20, **found,
                         "limit": 0.05, "call": 0.02, "unpriced": True})  # fmt: skip
    return {"bursts": rows}
