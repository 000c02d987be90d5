"""The ``review`` command: serve the review page for one or more ledgers until interrupted.

Exit codes: 0 when the server was stopped (Ctrl-C), 2 on a usage error (no ledger matches, a
ledger or outcomes file that cannot be read, a bad config, an address that cannot be bound).
"""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from replyguard._commands import UsageError, load_config, run_command
from replyguard.insights.command import ledger_paths
from replyguard.review._labels import LabelFile
from replyguard.review._queue import QueueError, build_queue, read_ledgers, read_outcomes
from replyguard.review._server import Session, make_server
from replyguard.types import FailCategory

DEFAULT_LABELS = "replyguard-labels.jsonl"
DEFAULT_PORT = 8765
DEFAULT_SAMPLE = 20


def _count(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"must be a whole number, not {value!r}")
    return int(value)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``replyguard review``."""
    parser.add_argument("ledger", nargs="+", help="the JSONL ledger file(s), or a quoted glob")
    parser.add_argument(
        "--labels",
        default=DEFAULT_LABELS,
        metavar="FILE",
        help=f"where labels are appended, as eval records ({DEFAULT_LABELS})",
    )
    parser.add_argument(
        "--port", type=_count, default=DEFAULT_PORT, metavar="N", help=f"({DEFAULT_PORT}; 0: any)"
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (127.0.0.1: this machine only)"
    )
    parser.add_argument(
        "--sample",
        type=_count,
        default=DEFAULT_SAMPLE,
        metavar="N",
        help=f"passed turns sampled for review, stratified by run kind ({DEFAULT_SAMPLE})",
    )
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed (0)")
    parser.add_argument(
        "--outcomes",
        metavar="FILE",
        help='JSONL of {"turnId", "outcome": "good"|"bad"}: verdicts they contradict come first',
    )
    parser.add_argument("--reviewer", help="the name written with each label (the login name)")
    parser.add_argument(
        "--config", metavar="FILE", help="the verifier config (for its custom categories)"
    )


def main(args: argparse.Namespace) -> int:
    """Run ``replyguard review``: 0 when stopped, 2 on a usage error."""
    return run_command("review", _review, args)


def _review(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    paths, unmatched = ledger_paths(args.ledger)
    if unmatched is not None:
        raise UsageError(f"no ledger file matches {unmatched}")
    try:
        ledgers = read_ledgers(paths)
        outcomes = read_outcomes(Path(args.outcomes)) if args.outcomes else {}
    except QueueError as exc:
        raise UsageError(str(exc)) from None
    queue = build_queue(ledgers, sample=args.sample, seed=args.seed, outcomes=outcomes)
    categories = [*(c.value for c in FailCategory), *config.categories]
    reviewer = args.reviewer or getpass.getuser()
    session = Session(queue, LabelFile(Path(args.labels)), reviewer, categories)
    try:
        server = make_server(session, args.host, args.port)
    except OSError as exc:
        raise UsageError(
            f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}"
        ) from None
    host, port = str(server.server_address[0]), int(server.server_address[1])
    if not server.loopback:
        print(
            f"replyguard review: warning: listening on {host}, not loopback: anyone who can "
            "reach it can read the turns and label them",
            file=sys.stderr,
        )
    shown = f"[{host}]" if ":" in host else host
    skipped = f"; {len(ledgers.skipped)} ledger lines were not turns" if ledgers.skipped else ""
    print(
        f"replyguard review: {len(queue)} turns queued from {len(ledgers.turns)}{skipped}; "
        f"labels go to {args.labels}\nopen http://{shown}:{port}/ (Ctrl-C stops)",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
