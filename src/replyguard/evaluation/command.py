"""The ``eval`` command: judge a labelled dataset, print a summary, write the two reports.

Exit codes: 0 when the eval ran (disagreements included), 2 on a bad dataset (every bad line is
reported at once, up to a cap), config or usage.
The dataset is read from stdin when its argument is ``-`` or absent. Progress goes to stderr: a
bar redrawn in place on a terminal, otherwise a plain line at each tenth of the dataset (ten
lines at most, at most one a second), each with the time elapsed and an estimate of the time
left; the last line gives the total time.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from replyguard._cli.verify import UsageError, check_run_kind, load_config, read_text, run_command
from replyguard._records import EvalRecord, parse_dataset, read_dataset
from replyguard.config._schema import VerifierConfig
from replyguard.errors import CrossFamilyError
from replyguard.evaluation.report import build_report, summary, write_reports
from replyguard.evaluation.run import Progress, RecordResult, judge_records
from replyguard.types import FailCategory

DEFAULT_OUT = "replyguard-eval"
DEFAULT_CONCURRENCY = 4
_BAR_WIDTH = 30
_TTY_WIDTH = 79
PLAIN_INTERVAL = 1.0
"""Seconds between two plain progress lines, at the least."""


def _seconds(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 60 else f"{int(seconds) // 60} min {int(seconds) % 60} s"


def progress_printer(
    stream: TextIO, clock: Callable[[], float] = time.monotonic, interval: float = PLAIN_INTERVAL
) -> Progress:
    """A ``Progress`` with the time elapsed and an estimate of the time left: a bar redrawn in
    place on a terminal; otherwise a line at each tenth of the dataset, at most one per
    ``interval`` seconds (a sub-second run prints only its last line), and the last."""
    tty = stream.isatty()
    started = clock()
    last_line = started

    def timing(done: int, total: int, now: float) -> str:
        elapsed = now - started
        if done == total:
            return f"in {_seconds(elapsed)}"
        left = elapsed / done * (total - done)
        return f"{_seconds(elapsed)} elapsed, about {_seconds(left)} left"

    def show(done: int, total: int) -> None:
        nonlocal last_line
        now = clock()
        if tty:
            filled = _BAR_WIDTH * done // total
            bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
            line = f"[{bar}] {done}/{total} {timing(done, total, now)}"
            end = "\n" if done == total else ""
            stream.write(f"\r{line.ljust(_TTY_WIDTH)}{end}")
        elif done == total:
            stream.write(
                f"replyguard eval: {done}/{total} records judged {timing(done, total, now)}\n"
            )
        elif done * 10 // total > (done - 1) * 10 // total and now - last_line >= interval:
            last_line = now
            stream.write(
                f"replyguard eval: {done}/{total} records judged, {timing(done, total, now)}\n"
            )
        stream.flush()

    return show


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {value!r}")
    return int(value)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``replyguard eval``."""
    parser.add_argument(
        "dataset",
        nargs="?",
        metavar="DATASET.jsonl",
        help="one eval record per line; '-' or none reads stdin",
    )
    parser.add_argument(
        "--replay",
        action="store_true",
        help="parse each record's judgeOutput instead of calling a model (offline)",
    )
    parser.add_argument(
        "--out", default=DEFAULT_OUT, metavar="DIR", help=f"report folder ({DEFAULT_OUT})"
    )
    parser.add_argument(
        "--concurrency",
        type=_positive,
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"records judged at once ({DEFAULT_CONCURRENCY})",
    )
    parser.add_argument("--config", metavar="FILE", help="the verifier config (else defaults)")
    parser.add_argument(
        "--judge-answer",
        choices=[*_ORDERS, "both"],
        help="the judge's answer order (else the config's judgeAnswer); 'both' judges every "
        "record in each order and reports the agreement of each (live only)",
    )


_ORDERS = ("reasoning_first", "verdict_first")
# The figures of each order that ``--judge-answer both`` puts side by side.
_PER_ORDER = ("labelled", "accuracy", "kappa", "falseFailRate", "falsePassRate", "unreadable")


def _records(
    dataset: str | None, config: VerifierConfig, *, replay: bool
) -> tuple[str, list[tuple[int, EvalRecord]]]:
    """The dataset's name and records (stdin for ``-`` or none); every bad line is reported at
    once, a ``runKind`` that is not one of the config's included."""

    def check(record: EvalRecord) -> list[tuple[str, str]]:
        try:
            check_run_kind(config, record.run_kind)
        except UsageError as exc:
            return [("runKind", str(exc))]
        category = record.label_category
        custom = isinstance(category, str) and not isinstance(category, FailCategory)
        if custom and category not in config.categories:
            known = ", ".join([*(c.value for c in FailCategory), *config.categories])
            return [("labelCategory", f"unknown category {category!r} (one of: {known})")]
        return []

    if dataset is None or dataset == "-":
        text, name = read_text(None, "dataset")
        return name, parse_dataset(text, name=name, replay=replay, check=check)
    return dataset, read_dataset(dataset, replay=replay, check=check)


def main(args: argparse.Namespace) -> int:
    """Run ``replyguard eval``: 0 when it ran, 2 on a usage/input/config/internal error."""
    return run_command("eval", _eval, args)


def _eval(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    order = getattr(args, "judge_answer", None)
    if order is not None and args.replay:
        raise UsageError("--judge-answer needs live judging: a replayed verdict has no order")
    orders = _ORDERS if order == "both" else (order or config.judge_answer,)
    dataset, records = _records(args.dataset, config, replay=args.replay)
    reports: dict[str, dict[str, Any]] = {}
    for each in orders:
        results = _judged(records, config.model_copy(update={"judge_answer": each}), args)
        reports[each] = build_report(
            results, dataset=dataset, replay=args.replay, mode=config.mode, judge_model=config.model
        )
    # The main figures are the config's own order's (or the one order asked for).
    report = reports.get(config.judge_answer) or reports[orders[0]]
    if order == "both":
        report["byJudgeAnswer"] = {
            each: {key: figures[key] for key in (*_PER_ORDER, "costUsd", "latencyMs")}
            for each, figures in reports.items()
        }
    try:
        json_path, html_path = write_reports(report, Path(args.out))
    except OSError as exc:
        print(f"replyguard eval: cannot write to {args.out}: {type(exc).__name__}", file=sys.stderr)
        return 2
    print(summary(report))
    for each, figures in report.get("byJudgeAnswer", {}).items():
        shown = (
            f"{k} {v:.3f}" if isinstance(v := figures[k], float) else f"{k} {v}" for k in _PER_ORDER
        )
        print(f"judgeAnswer {each}: " + ", ".join(shown))
    print(f"wrote {json_path} and {html_path}")
    return 0


def _judged(
    records: list[tuple[int, EvalRecord]], config: VerifierConfig, args: argparse.Namespace
) -> list[RecordResult]:
    try:
        return asyncio.run(
            judge_records(
                records,
                config,
                replay=args.replay,
                concurrency=args.concurrency,
                progress=progress_printer(sys.stderr),
            )
        )
    except CrossFamilyError as exc:  # a refused judge/agent pairing is a usage error
        raise UsageError(str(exc)) from None
