"""What the fleet's shared state adds to a judged turn (``run.py --only fleet``).

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
