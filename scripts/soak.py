"""Soak one ``Verifier`` with many turns against a loopback provider; watch memory and fds.

    python scripts/soak.py                   # 10,000 turns, 50 at a time
    python scripts/soak.py --turns 2000 --batch 20 --wire anthropic

Every turn goes through ``Verifier.run`` with ``verifyAll`` to ``tests/support/provider_server.py``
over litellm's real network path (no network: loopback only). The judge answers FAIL to the
first attempt of every ``--fail-every``-th turn and PASS otherwise, so a share of the turns is
retried with feedback. Every ``--stream-every``-th turn (counting from the second) goes
through ``Verifier.stream`` instead (``"release"`` mode): its first reply says a forbidden
phrase, its stream is cut there and closed, and the retry passes; its delivered reply must
never be the cut fragment. Turns run in batches of ``--batch`` concurrent turns.

After ``--warmup`` turns (litellm's imports, connection pools, caches and the allocator settle)
the baseline is taken: resident memory (``/proc/self/statm``), open file descriptors
(``/proc/self/fd``) and the memory ``tracemalloc`` sees held (it traces from the first turn on,
so its own tables are in the baseline; its peak is taken over the turns after the warm-up).
The same figures are taken after the last batch, and again after ``Verifier.aclose()``.

Exit status 1 when resident memory grew by more than ``--max-growth-mb`` after the warm-up,
the memory Python holds grew by more than ``--max-traced-growth-mb``, the open file
descriptors grew, or a turn did not end as expected (every turn must end
``passed``: a FAIL is always followed by a PASS on the retry, and a cut by a passing retry),
or a streamed turn delivered a cut fragment.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import sys
import time
import tracemalloc
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from replyguard import Done, Outcome, Turn, Verifier, VerifierConfig
from support.provider_server import ANTHROPIC, OPENAI, ProviderServer, Seen, Step, Wire

API_KEY = "sk-soak-0123456789abcdefghijklmn"
RECHECK = "please double-check the totals"
"""In the user message of the turns whose first reply the judge fails."""
FEEDBACK_TAG = "<previous_feedback-"
"""Where the judge prompt carries feedback: the mark of a retry's judgement."""
WIRES = {"openai": OPENAI, "anthropic": ANTHROPIC}
FORBIDDEN = "as an AI"
CUT_AT = "an AI I can"
"""Where a streamed turn's first reply is cut (its fragment ends there)."""
MB = 1024 * 1024


@dataclass
class Sample:
    """Process figures at one moment, after a full garbage collection."""

    rss_bytes: int
    open_fds: int
    traced_bytes: int | None = None

    @property
    def rss_mb(self) -> float:
        return self.rss_bytes / MB


@dataclass
class SoakReport:
    """What a soak did and what it cost."""

    turns: int
    batch: int
    warmup: int
    wire: str
    judge_requests: int
    statuses: dict[str, int]
    attempts: dict[int, int]
    seconds: float
    start: Sample
    baseline: Sample
    end: Sample
    closed: Sample
    traced_peak_bytes: int
    streamed: int = 0
    """Turns that went through ``Verifier.stream`` and had their first reply cut short."""
    fragments: int = 0
    """Streamed turns that delivered a cut fragment (must be none)."""
    litellm_callbacks: list[str] = field(default_factory=list)
    """The callbacks registered in litellm when the soak began: each runs on every judge call
    (a Router that was never retired leaves its strategy's handlers there)."""
    problems: list[str] = field(default_factory=list)

    @property
    def rss_growth_mb(self) -> float:
        """Resident memory added between the baseline (after warm-up) and the last batch."""
        return (self.end.rss_bytes - self.baseline.rss_bytes) / MB

    @property
    def traced_growth_mb(self) -> float:
        """Python allocations still held at the end that were made after the baseline."""
        return ((self.end.traced_bytes or 0) - (self.baseline.traced_bytes or 0)) / MB

    @property
    def fd_growth(self) -> int:
        return self.end.open_fds - self.baseline.open_fds


def rss_bytes() -> int:
    """Resident set size of this process, from ``/proc/self/statm``."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        resident_pages = int(statm.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def litellm_callbacks() -> list[str]:
    """The type names of what litellm's global callback lists hold now."""
    import litellm

    lists = ("callbacks", "success_callback", "_async_success_callback", "failure_callback",
             "_async_failure_callback", "input_callback")  # fmt: skip
    return sorted(
        {type(c).__name__ for name in lists for c in getattr(litellm, name, None) or []
         if not isinstance(c, str)}
    )  # fmt: skip


def sample() -> Sample:
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else None
    return Sample(rss_bytes(), open_fds(), traced)


def _judge_answer(seen: Seen) -> Step:
    """FAIL the first judgement of a turn that asks for a re-check, PASS everything else."""
    prompt = seen.prompt
    if RECHECK in prompt and FEEDBACK_TAG not in prompt:
        return Step(text="The totals are not checked.\nFAIL [incomplete]: check the totals.")
    return Step(text="Everything asked for is there.\nPASS")


async def _agent(messages: list[dict[str, Any]]) -> str:
    request = messages[0]["content"]
    if len(messages) > 1:  # a retry: the feedback is the last message
        return f"Done: {request} (totals checked)"
    return f"Done: {request}"


async def _streaming_agent(messages: list[dict[str, Any]]) -> Any:
    """``_agent``'s replies, streamed; the first one says the forbidden phrase mid-way."""
    if len(messages) > 1:
        text = await _agent(messages)
        yield text[:12]
        yield text[12:]
        return
    yield f"Done: {messages[0]['content']}. Well, as "
    yield CUT_AT
    yield "not check it all."


async def _streamed(verifier: Verifier, turn: Turn) -> Outcome:
    outcome = None
    async for event in verifier.stream(_streaming_agent, turn):
        if isinstance(event, Done):
            outcome = event.outcome
    assert outcome is not None  # a stream always ends with Done
    return outcome


def streamed_turn(number: int, stream_every: int) -> bool:
    """Whether turn ``number`` goes through ``Verifier.stream``."""
    return bool(stream_every) and number % stream_every == 1


def retried_turns(turns: int, fail_every: int, stream_every: int) -> int:
    """How many of the first ``turns`` turns take two attempts (a FAIL, or a cut)."""
    return sum(
        1
        for n in range(turns)
        if (fail_every and n % fail_every == 0) or streamed_turn(n, stream_every)
    )


def _turn(number: int, fail_every: int) -> Turn:
    ask = f"summarise ticket {number}"
    if fail_every and number % fail_every == 0:
        ask += f", {RECHECK}"
    return Turn(user_message=ask, id=f"soak-{number}")


async def _run_batches(
    verifier: Verifier,
    server: ProviderServer,
    numbers: range,
    batch: int,
    fail_every: int,
    statuses: Counter[str],
    attempts: Counter[int],
    streams: Counter[str],
    stream_every: int,
) -> None:
    for first in range(numbers.start, numbers.stop, batch):
        chunk = range(first, min(first + batch, numbers.stop))
        outcomes = await asyncio.gather(
            *(
                _streamed(verifier, _turn(n, fail_every))
                if streamed_turn(n, stream_every)
                else verifier.run(_agent, _turn(n, fail_every))
                for n in chunk
            )
        )
        for number, outcome in zip(chunk, outcomes, strict=True):
            statuses[outcome.status.value] += 1
            attempts[len(outcome.attempts)] += 1
            if streamed_turn(number, stream_every):
                streams["turns"] += outcome.attempts[0].reply.text.endswith(CUT_AT)
                streams["fragments"] += outcome.response.endswith(CUT_AT)
        # The test server keeps every request it saw; a soak must not measure that.
        server.seen.clear()


async def soak(
    turns: int = 10_000,
    *,
    batch: int = 50,
    warmup: int = 500,
    fail_every: int = 4,
    stream_every: int = 5,
    wire: str = "openai",
) -> SoakReport:
    """Run the soak and measure it (no verdict: see ``problems``)."""
    chosen: Wire = WIRES[wire]
    requests = itertools.count()

    def answer(seen: Seen) -> Step:
        next(requests)
        return _judge_answer(seen)

    start = sample()
    statuses: Counter[str] = Counter()
    attempts: Counter[int] = Counter()
    streams: Counter[str] = Counter()
    with ProviderServer() as server:
        server.respond_with(answer)
        config = VerifierConfig.from_dict(
            {
                "enabled": True,
                "verifyAll": True,
                "model": chosen.judge_model,
                "agentModel": chosen.agent_model,
                "apiBase": server.url,
                "apiKey": API_KEY,
                "maxAttempts": 3,
                "checks": [
                    {"type": "heartbeat"},
                    {"type": "rules", "forbiddenPhrases": [FORBIDDEN]},
                ],
                "streaming": {"mode": "release", "holdBackChars": 16},
                "timeoutSeconds": 20,
            }
        )
        verifier = Verifier(config)
        await verifier.warmup()
        callbacks = litellm_callbacks()
        # Tracing from the start, so that its own tables are part of the baseline.
        tracemalloc.start()
        began = time.perf_counter()
        warm = min(warmup, turns)
        counts = (statuses, attempts, streams, stream_every)
        await _run_batches(verifier, server, range(warm), batch, fail_every, *counts)
        baseline = sample()
        tracemalloc.reset_peak()
        await _run_batches(verifier, server, range(warm, turns), batch, fail_every, *counts)
        end = sample()
        traced_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        seconds = time.perf_counter() - began
        await verifier.aclose()
    closed = sample()
    report = SoakReport(
        turns=turns,
        batch=batch,
        warmup=warm,
        wire=wire,
        judge_requests=next(requests),
        statuses=dict(statuses),
        attempts=dict(sorted(attempts.items())),
        seconds=seconds,
        start=start,
        baseline=baseline,
        end=end,
        closed=closed,
        traced_peak_bytes=traced_peak,
        streamed=streams["turns"],
        fragments=streams["fragments"],
        litellm_callbacks=callbacks,
    )
    return report


def problems(
    report: SoakReport,
    *,
    max_growth_mb: float = 5.0,
    max_traced_growth_mb: float = 3.0,
    max_fd_growth: int = 0,
) -> list[str]:
    """What is wrong with a soak's figures (empty when it passed)."""
    found: list[str] = []
    if report.rss_growth_mb > max_growth_mb:
        found.append(
            f"resident memory grew by {report.rss_growth_mb:.1f} MB after the warm-up "
            f"(limit {max_growth_mb} MB)"
        )
    if report.traced_growth_mb > max_traced_growth_mb:
        found.append(
            f"memory Python holds grew by {report.traced_growth_mb:.1f} MB after the warm-up "
            f"(limit {max_traced_growth_mb} MB)"
        )
    if report.fd_growth > max_fd_growth:
        found.append(
            f"open file descriptors grew from {report.baseline.open_fds} to "
            f"{report.end.open_fds} after the warm-up"
        )
    if report.closed.open_fds > report.start.open_fds:
        found.append(
            f"{report.closed.open_fds - report.start.open_fds} file descriptor(s) still open "
            "after the verifier and the server were closed"
        )
    if report.fragments:
        found.append(f"{report.fragments} streamed turn(s) delivered a reply cut short")
    unexpected = {s: n for s, n in report.statuses.items() if s != "passed"}
    if unexpected or sum(report.statuses.values()) != report.turns:
        found.append(f"turns that did not pass: {unexpected or 'missing outcomes'}")
    return found


def describe(report: SoakReport) -> str:
    """The report as lines of text."""
    per_turn = report.seconds / max(report.turns, 1) * 1000
    return "\n".join(
        [
            f"turns: {report.turns:,} ({report.warmup:,} warm-up), {report.batch} at a time, "
            f"{report.wire} wire; {report.judge_requests:,} judge requests",
            f"statuses: {report.statuses}; attempts per turn: {report.attempts}; "
            f"{report.streamed:,} streamed and cut, {report.fragments} delivered a fragment",
            f"time: {report.seconds:.1f} s ({per_turn:.2f} ms a turn, under tracemalloc)",
            f"RSS: {report.start.rss_mb:.1f} MB at start, {report.baseline.rss_mb:.1f} MB after "
            f"warm-up, {report.end.rss_mb:.1f} MB at the end ({report.rss_growth_mb:+.2f} MB), "
            f"{report.closed.rss_mb:.1f} MB after close",
            f"tracemalloc: {(report.baseline.traced_bytes or 0) / MB:.2f} MB held after warm-up, "
            f"peak {report.traced_peak_bytes / MB:.2f} MB after it, "
            f"{(report.end.traced_bytes or 0) / MB:.2f} MB held at the end "
            f"({report.traced_growth_mb:+.2f} MB)",
            f"open fds: {report.start.open_fds} at start, {report.baseline.open_fds} after "
            f"warm-up, {report.end.open_fds} at the end, {report.closed.open_fds} after close",
            f"litellm callbacks run on every call: {', '.join(report.litellm_callbacks) or 'none'}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=50, help="concurrent turns per batch")
    parser.add_argument("--warmup", type=int, default=500, help="turns before the baseline")
    parser.add_argument("--fail-every", type=int, default=4, help="every Nth turn gets a FAIL")
    parser.add_argument(
        "--stream-every", type=int, default=5, help="every Nth turn is streamed and cut"
    )
    parser.add_argument("--wire", choices=sorted(WIRES), default="openai")
    parser.add_argument("--max-growth-mb", type=float, default=5.0)
    parser.add_argument("--max-traced-growth-mb", type=float, default=3.0)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = asyncio.run(
        soak(
            args.turns,
            batch=args.batch,
            warmup=args.warmup,
            fail_every=args.fail_every,
            stream_every=args.stream_every,
            wire=args.wire,
        )
    )
    report.problems = problems(
        report,
        max_growth_mb=args.max_growth_mb,
        max_traced_growth_mb=args.max_traced_growth_mb,
    )
    if args.json:
        print(json.dumps(asdict(report), indent=2))
    else:
        print(describe(report))
        for problem in report.problems:
            print(f"FAIL: {problem}")
        print("OK" if not report.problems else "FAILED")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
