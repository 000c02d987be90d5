"""Run the provider fault matrix outside pytest and print a markdown report.

    python scripts/reliability.py

Every fault of ``tests/support/fault_matrix.py`` (the table ``tests/runner/test_fault_matrix.py``
tests), on both wire formats, on the first judgement and on a retry's, through ``Verifier.run``
against a loopback provider (no network) with ``timeoutSeconds=1``. One row per case, then a
summary.

Exit status 1 when a reply was not delivered, a status or reason was wrong, a fail-open took
longer than ``timeoutSeconds`` + 0.5 s, or anything leaked: a task or a client connection a case
left behind, a task still pending on the loop once every verifier was closed, a task destroyed
while pending or a client left unclosed (reported by asyncio or as an unraisable exception).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import replyguard  # noqa: F401 - sets the offline env defaults before litellm is imported
from support.fault_matrix import (
    ATTEMPTS,
    FAULTS,
    SLACK,
    TIMEOUT,
    WIRES,
    Matrix,
    Result,
    run_matrix,
)


class _Collect(logging.Handler):
    """Keeps what asyncio reports ("Task was destroyed but it is pending!", unclosed clients)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage().splitlines()[0])


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _row(result: Result) -> str:
    case = result.case
    if result.escaped is not None:
        got = f"raised {result.escaped}"
    else:
        got = f"{result.status}/{result.reason}"
    if not result.right_status:
        got += " (expected {}/{})".format(*case.expected_status)
    time_ms = f"{result.seconds * 1000:.0f}" + ("" if result.in_time else " (late)")
    cells = [
        case.fault.name,
        case.wire.name,
        case.attempt,
        _yes(result.delivered),
        got,
        _yes(not result.right_status),
        f"{len(result.tasks_left)}/{result.connections_left}",
        time_ms,
    ]
    return "| " + " | ".join(cells) + " |"


def report(matrix: Matrix, loop_errors: list[str], unraisable: list[str]) -> tuple[str, bool]:
    """The markdown report, and whether everything held."""
    results = list(matrix.results.values())
    header = [
        "| fault | wire | attempt | delivered | status/reason | wrong status "
        "| leaks (tasks/connections) | fail-open time (ms) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    undelivered = sum(not r.delivered for r in results)
    wrong = sum(not r.right_status for r in results)
    leaked = sum(r.leaked for r in results)
    late = sum(not r.in_time for r in results)
    slowest = max(results, key=lambda r: r.seconds)
    loop_leaks = len(matrix.tasks_on_the_loop) + len(loop_errors) + len(unraisable)
    summary = (
        f"**Summary:** faults tried {len(results)} ({len(FAULTS)} faults x {len(WIRES)} wires x "
        f"{len(ATTEMPTS)} attempts); delivered {len(results) - undelivered}/{len(results)}; "
        f"wrong status {wrong}; leaks {leaked} of {len(results)} cases (tasks/connections), "
        f"{loop_leaks} on the loop after every verifier was closed; "
        f"late (> {(TIMEOUT + SLACK) * 1000:.0f} ms) {late}; "
        f"slowest fail-open time {slowest.seconds * 1000:.0f} ms ({slowest.case.id})."
    )
    notes = [
        f"- pending on the loop after every verifier was closed: {t}"
        for t in matrix.tasks_on_the_loop
    ]
    notes += [f"- reported by asyncio: {m}" for m in loop_errors]
    notes += [f"- unraisable: {u}" for u in unraisable]
    notes += [f"- run again (its fault-free first judgement failed): {r}" for r in matrix.repeated]
    lines = [*header, *(_row(r) for r in results), "", summary, *notes]
    ok = not (undelivered or wrong or leaked or late or loop_leaks)
    return "\n".join(lines), ok


def main() -> int:
    # A client left unclosed warns from ``__del__``: make that an unraisable error we count.
    warnings.simplefilter("error", ResourceWarning)
    unraisable: list[str] = []

    def hook(event: Any) -> None:
        unraisable.append(f"{event.exc_type.__name__}: {event.exc_value} in {event.object!r}")

    sys.unraisablehook = hook
    collect = _Collect()
    logging.getLogger("asyncio").addHandler(collect)
    # replyguard logs each fail-open as a WARNING; with no logging configured Python would
    # print every one of them to stderr.
    logging.getLogger("replyguard").addHandler(logging.NullHandler())
    matrix = asyncio.run(run_matrix())
    gc.collect()  # a pending task nothing refers to any more is reported as destroyed now
    text, ok = report(matrix, collect.messages, unraisable)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
