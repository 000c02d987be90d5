"""The ``replyguard`` command (also ``python -m replyguard``).

Commands: ``demo`` (scripted turns through the real runner, no API key needed), ``schema``
(the config's JSON Schema), ``check-config FILE`` (check a config as the verifier would;
``--show`` prints it with secrets masked), ``insights LEDGER`` (recurring failures and
suggestions from a ledger), ``review LEDGER`` (label the turns worth a look in a local page),
``verify [FILE]`` (judge one turn given as JSON), ``heartbeat --workspace DIR [REPLY]`` (judge
a heartbeat agent's reply), ``eval [DATASET.jsonl]`` (agreement of the judge with labels,
and the trust gate) and ``serve`` (an OpenAI-compatible endpoint that verifies; exit 2 when it
cannot start).
Exit codes: 0 on success (for ``verify``/``heartbeat``: the reply may be delivered), 1 when a
requested model call failed (``verify``/``heartbeat``: the reply FAILed), 2 on a usage or
config error (``verify``/``heartbeat``: an internal error too, never read as a FAIL), 141 when
the output's reader stopped reading (``| head``; ``verify``/``heartbeat`` keep their code).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections.abc import Callable, Sequence

from replyguard._cli.check_config import CHECK_EPILOG, add_check_arguments, check_config_main
from replyguard._cli.streams import PIPE_CLOSED, discard_stdout, open_closed_streams
from replyguard._cli.verify import (
    STATUSES_HELP,
    add_heartbeat_arguments,
    add_verify_arguments,
    heartbeat_main,
    verify_main,
)
from replyguard._commands import run_command
from replyguard._version import __version__
from replyguard.config._schema import VerifierConfig


def _wanted(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs, when its first word that is not an option names one: only
    that command's arguments are added to the parser (``eval`` and ``insights`` load their
    packages for them). None (``--help``, ``--version``, a typo): every command's."""
    first = next((word for word in argv if not word.startswith("-")), None)
    return first if first in {name for name, *_ in _SUBCOMMANDS} else None


def _insights_arguments() -> Callable[[argparse.ArgumentParser], None]:
    from replyguard.insights import add_arguments

    return add_arguments


def _eval_arguments() -> Callable[[argparse.ArgumentParser], None]:
    from replyguard.evaluation import add_arguments

    return add_arguments


def _review_arguments() -> Callable[[argparse.ArgumentParser], None]:
    from replyguard.review import add_arguments

    return add_arguments


def _serve_arguments() -> Callable[[argparse.ArgumentParser], None]:
    from replyguard.serve import add_arguments

    return add_arguments


_Arguments = Callable[[], Callable[[argparse.ArgumentParser], None]] | None
_SUBCOMMANDS: tuple[tuple[str, str, str, str | None, _Arguments], ...] = (
    (
        "demo",
        "run scripted turns through the verifier (no API key, no network)",
        "Run scripted turns through the real verifier, one for each path a turn can take, and "
        "print the path each took (skip, not triggered, pass, fail and retry, exhausted, "
        "checks, a stagnant retry, budgets, a rubric, fail-open, awaiting the user, side "
        "effects, a judge panel). The judge is scripted: no API key, no network.",
        None,
        None,
    ),
    (
        "schema",
        "print the JSON Schema of the config file",
        'Print the JSON Schema of the config file on stdout; point a config\'s "$schema" key '
        "at a saved copy and editors complete and check its keys.",
        None,
        None,
    ),
    (
        "check-config",
        "check a config file as the verifier would, before deploying it",
        "Check a config file with every check the verifier makes when it is built: the "
        "file's keys and values, the judge's and agent's model families, the workspace and "
        "its files, the ledger's folder, env: keys. Prints each error and warning, then one "
        "summary line.",
        CHECK_EPILOG,
        lambda: add_check_arguments,
    ),
    (
        "insights",
        "summarise recurring failures in a ledger file",
        "Read one or more ledgers (ledgerPath's JSON lines) and print what keeps failing: "
        "totals, each run kind's rates, FAIL categories, checks, judge models, the feedback's "
        "recurring themes, and suggestions citing the counts behind them. --propose asks the "
        "config's judge model for rule edits, printed for a human to review: nothing is "
        "written or applied.",
        "exit 0 when the report was printed, 1 when --propose's model call failed, 2 on a "
        "usage error or a ledger that cannot be read",
        _insights_arguments,
    ),
    (
        "review",
        "label the ledger's turns worth a look in a local page; labels become an eval set",
        "Serve a local page that shows, one at a time, the ledger's turns worth a human look "
        "(contradicted by a later outcome, panel splits, exhausted, flagged, failed open, then "
        "a seeded sample of passes stratified by run kind) and appends each label to the label "
        "file as an eval record with the turn's recorded verdict, ready for replyguard eval "
        "--replay. Keys: p pass, f fail (then a category), s skip, n note.",
        "exit 0 when stopped (Ctrl-C), 2 on a usage error",
        _review_arguments,
    ),
    (
        "verify",
        "judge one turn given as JSON and print the verdict",
        "Judge one turn given as JSON (pre-checks apply, triggers do not) and print the "
        "verdict as one JSON object.",
        STATUSES_HELP,
        lambda: add_verify_arguments,
    ),
    (
        "heartbeat",
        "judge a heartbeat agent's reply against HEARTBEAT.md",
        "Judge a heartbeat run's reply against the workspace's HEARTBEAT.md and print the "
        "verdict JSON; on a FAIL the feedback for the agent goes to stderr. An empty reply "
        "while HEARTBEAT.md lists open tasks is a FAIL.",
        STATUSES_HELP,
        lambda: add_heartbeat_arguments,
    ),
    (
        "eval",
        "measure the judge against a labelled dataset; write report.json/.html",
        "Judge every record of a JSONL dataset (pre-checks apply, triggers do not), report "
        "agreement with the labels, and write report.json and report.html.",
        "exit 0 when the eval ran (disagreements included) and the trust gate, if limits are "
        "set, answered TRUSTED; 1 UNTRUSTED; 3 INCONCLUSIVE; 2 on a bad dataset, config or usage",
        _eval_arguments,
    ),
    (
        "serve",
        "serve an OpenAI-compatible endpoint that verifies every reply",
        "Serve POST /v1/chat/completions (the upstream model's reply, verified; streamed with "
        "stream: true), POST /v1/verify (one judgement of a host's reply), GET /healthz and "
        "GET /metrics (Prometheus). Needs the serve extra.",
        "exit 0 after SIGTERM/SIGINT (turns in flight are answered first), 2 on a bad config, "
        "an unset apiKeys variable or an address that cannot be bound",
        _serve_arguments,
    ),
)
"""Each command: name, help, description, epilog, and what gives the function that adds its
arguments (called only for the command being run: ``_wanted``)."""


def _parser(wanted: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="replyguard", description="A second opinion on a chat agent's reply."
    )
    parser.add_argument("--version", action="version", version=f"replyguard {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, summary, description, epilog, arguments in _SUBCOMMANDS:
        command = commands.add_parser(name, help=summary, description=description, epilog=epilog)
        if arguments is not None and wanted in (None, name):
            arguments()(command)
    return parser


def _eval_main(args: argparse.Namespace) -> int:
    from replyguard.evaluation import main as eval_main

    return eval_main(args)


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "verify": verify_main,
    "heartbeat": heartbeat_main,
    "eval": _eval_main,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code. A command whose output's reader stops
    early (``| head``) ends quietly with ``PIPE_CLOSED`` (141), as one killed by SIGPIPE;
    ``verify`` and ``heartbeat`` keep their decision's code.

    Without ``argv`` (the process's own command line: the ``replyguard`` script, ``python -m
    replyguard``) the process ends with the command: what it loaded is then frozen
    (``gc.freeze()``), so that the interpreter's exit does not walk it all once more in its
    last collection (5% of a heartbeat decided by its check). A caller that passes ``argv``
    (a test, a host) keeps its collector as it was."""
    open_closed_streams()
    try:
        return _run(argv)
    except BrokenPipeError:
        discard_stdout()
        return PIPE_CLOSED
    finally:
        if argv is None:
            gc.freeze()


def _run(argv: Sequence[str] | None) -> int:
    words = sys.argv[1:] if argv is None else argv
    args = _parser(_wanted(words)).parse_args(words)
    if args.command == "demo":
        from replyguard._cli.demo import main as demo_main

        return demo_main()
    if args.command == "schema":
        print(json.dumps(VerifierConfig.json_schema(), indent=2))
        return 0
    if args.command == "insights":
        from replyguard.insights import main as insights_main

        return insights_main(args)
    if args.command == "review":
        from replyguard.review import main as review_main

        return review_main(args)
    if args.command == "serve":
        from replyguard.serve import main as serve_main

        return serve_main(args)
    if args.command in _COMMANDS:
        return _COMMANDS[args.command](args)
    return run_command("check-config", check_config_main, args)


if __name__ == "__main__":
    sys.exit(main())
