"""What ``GET /metrics`` serves, in Prometheus text, summed across the server's workers.

- ``replyguard_turns_total{status,reason}``: turns answered (``/v1/chat/completions``: the
  outcome's status; ``/v1/verify``: the judgement's), ``reason`` "" when there is none;
- ``replyguard_judge_seconds``: a histogram of judge calls' latency (each judged attempt);
- ``replyguard_fail_open_total{reason}``: turns delivered as they were because replyguard
  could not judge them (``failed_open``);
- ``replyguard_breaker_open``: 1 while the judge's circuit breaker is seen open (the last
  judgement a worker made was refused by it), 0 once a judge call goes through; the highest of
  the live workers.

Across workers: ``replyguard serve`` gives every worker process one folder
(``PROMETHEUS_MULTIPROC_DIR``, set before ``prometheus_client`` is imported); each writes its
own values there (memory-mapped files, no lock between processes) and whichever worker answers
``/metrics`` reads them all: counters and the histogram summed, the gauge the highest of the
live workers. Without the folder (an app built in a test) the values stay in the process.
"""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from replyguard.types import Outcome, Reason, Verdict

__all__ = ["CONTENT_TYPE", "MULTIPROC_ENV", "Metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
JUDGE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    """The server's counters; one per worker process."""

    def __init__(self) -> None:
        self._folder = os.environ.get(MULTIPROC_ENV) or None
        self._registry = CollectorRegistry()
        self.turns = Counter(
            "replyguard_turns",
            "Turns answered, by status and reason.",
            ("status", "reason"),
            registry=self._registry,
        )
        self.judge_seconds = Histogram(
            "replyguard_judge_seconds",
            "Latency of each judge call, in seconds.",
            buckets=JUDGE_BUCKETS,
            registry=self._registry,
        )
        self.fail_open = Counter(
            "replyguard_fail_open",
            "Turns delivered as they were because replyguard could not judge them, by reason.",
            ("reason",),
            registry=self._registry,
        )
        self.breaker_open = Gauge(
            "replyguard_breaker_open",
            "1 while the judge's circuit breaker is seen open, else 0.",
            registry=self._registry,
            multiprocess_mode="livemax",
        )

    def count(self, status: str, reason: str | None, verdicts: tuple[Verdict, ...]) -> None:
        """One answered turn: its status and reason, and its judge calls."""
        self.turns.labels(status=status, reason=reason or "").inc()
        if status == "failed_open":
            self.fail_open.labels(reason=reason or "").inc()
        for verdict in verdicts:
            if verdict.fail_open_reason == Reason.CIRCUIT_OPEN:
                self.breaker_open.set(1)
            elif verdict.model is not None and verdict.latency_ms > 0:
                self.judge_seconds.observe(verdict.latency_ms / 1000)
                self.breaker_open.set(0)

    def count_outcome(self, outcome: Outcome) -> None:
        """A verified turn of ``/v1/chat/completions``."""
        reason = outcome.reason.value if outcome.reason is not None else None
        self.count(outcome.status.value, reason, outcome.verdicts)

    def render(self) -> bytes:
        """The Prometheus text of every worker's values (this process's without a folder)."""
        if self._folder is None:
            return generate_latest(self._registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=self._folder)  # type: ignore[no-untyped-call]
        return generate_latest(registry)

    def close(self) -> None:
        """This worker stops: its live gauge no longer counts."""
        if self._folder is not None:
            mark_process_dead(os.getpid(), self._folder)  # type: ignore[no-untyped-call]

    def __repr__(self) -> str:
        where: Any = self._folder or "this process"
        return f"Metrics({where})"
