"""The ``eval`` command: judge a labelled dataset, print a summary, write the two reports.

Exit codes: 0 when the eval ran (disagreements included) and, with limits set
(``--max-false-fail``, ``--max-false-pass``, ``--min-agreement``), the trust gate answered
TRUSTED; 1 UNTRUSTED; 3 INCONCLUSIVE; 2 on a bad dataset (every bad line is reported at once,
up to a cap), config or usage. ``--probes`` runs the bias probes (live only).
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

from replyguard._commands import UsageError, check_run_kind, load_config, read_text, run_command
from replyguard._records import EvalRecord, parse_dataset, read_dataset
from replyguard.config._schema import VerifierConfig
from replyguard.errors import CrossFamilyError
from replyguard.evaluation.gate import Threshold, trust
from replyguard.evaluation.gate import describe as describe_gate
from replyguard.evaluation.probes import describe as describe_probes
from replyguard.evaluation.probes import not_run, run_probes
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


def _share(value: str) -> float:
    """A share between 0 and 1, written ``0.05`` or ``5%``."""
    text = value.strip()
    try:
        share = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        share = -1.0
    if not 0.0 <= share <= 1.0:
        raise argparse.ArgumentTypeError(
            f"must be a share from 0 to 1 (or 0% to 100%), not {value!r}"
        )
    return share


def _thresholds(args: argparse.Namespace) -> list[Threshold]:
    given = {
        "falseFailRate": args.max_false_fail,
        "falsePassRate": args.max_false_pass,
        "accuracy": args.min_agreement,
    }
    return [Threshold(rate, limit) for rate, limit in given.items() if limit is not None]


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
    gate = parser.add_argument_group(
        "trust gate",
        "limits on the 95 % intervals; the answer is TRUSTED (exit 0), UNTRUSTED (exit 1) or "
        "INCONCLUSIVE (exit 3, with how many more labels would decide it)",
    )
    gate.add_argument(
        "--max-false-fail",
        type=_share,
        metavar="RATE",
        help="the false FAIL rate's upper bound must be at most RATE (0.05 or 5%%)",
    )
    gate.add_argument(
        "--max-false-pass",
        type=_share,
        metavar="RATE",
        help="the false PASS rate's upper bound must be at most RATE",
    )
    gate.add_argument(
        "--min-agreement",
        type=_share,
        metavar="RATE",
        help="the agreement's (accuracy's) lower bound must be at least RATE (0.85 or 85%%)",
    )
    parser.add_argument(
        "--probes",
        action="store_true",
        help="bias probes: judge each labelled reply again padded, with a compliment to the "
        "judge, and reordered, and count the flips (live only)",
    )
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
    """Run ``replyguard eval``: 0 when it ran (and the gate, if set, answered TRUSTED), 1
    UNTRUSTED, 3 INCONCLUSIVE, 2 on a usage/input/config/internal error."""
    return run_command("eval", _eval, args)


def _eval(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    order = getattr(args, "judge_answer", None)
    if order is not None and args.replay:
        raise UsageError("--judge-answer needs live judging: a replayed verdict has no order")
    orders = _ORDERS if order == "both" else (order or config.judge_answer,)
    dataset, records = _records(args.dataset, config, replay=args.replay)
    judged: dict[str, tuple[VerifierConfig, list[RecordResult], dict[str, Any]]] = {}
    for each in orders:
        ordered = config.model_copy(update={"judge_answer": each})
        results = _judged(records, ordered, args)
        judged[each] = (ordered, results, _built(results, dataset, config, args))
    # The main figures are the config's own order's (or the one order asked for).
    main_config, results, report = judged.get(config.judge_answer) or judged[orders[0]]
    if order == "both":
        report["byJudgeAnswer"] = {
            each: {key: figures[key] for key in (*_PER_ORDER, "costUsd", "latencyMs")}
            for each, (_, _, figures) in judged.items()
        }
    if args.probes:
        report["biasProbes"] = (
            not_run()
            if args.replay
            else asyncio.run(run_probes(results, main_config, concurrency=args.concurrency))
        )
    gate = trust(report, _thresholds(args))
    if gate is not None:
        report["trust"] = gate
    try:
        json_path, html_path = write_reports(report, Path(args.out))
    except OSError as exc:
        print(f"replyguard eval: cannot write to {args.out}: {type(exc).__name__}", file=sys.stderr)
        return 2
    print(summary(report))
    for line in [
        *_per_order_lines(report),
        *(describe_probes(report["biasProbes"]) if "biasProbes" in report else []),
        *(describe_gate(gate) if gate is not None else []),
    ]:
        print(line)
    print(f"wrote {json_path} and {html_path}")
    return 0 if gate is None else int(gate["exitCode"])


def _built(
    results: list[RecordResult], dataset: str, config: VerifierConfig, args: argparse.Namespace
) -> dict[str, Any]:
    return build_report(
        results, dataset=dataset, replay=args.replay, mode=config.mode, judge_model=config.model
    )


def _per_order_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    for each, figures in report.get("byJudgeAnswer", {}).items():
        shown = (
            f"{k} {v:.3f}" if isinstance(v := figures[k], float) else f"{k} {v}" for k in _PER_ORDER
        )
        lines.append(f"judgeAnswer {each}: " + ", ".join(shown))
    return lines


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
