"""The ``replyguard`` command (also ``python -m replyguard``).

Commands: ``demo`` (scripted turns through the real runner, no API key needed), ``schema``
(the config's JSON Schema), ``check-config FILE`` (check a config as the verifier would;
``--show`` prints it with secrets masked), ``insights LEDGER`` (recurring failures and
suggestions from a ledger), ``verify [FILE]`` (judge one turn given as JSON), ``heartbeat
--workspace DIR [REPLY]`` (judge a heartbeat agent's reply) and ``eval [DATASET.jsonl]``
(agreement of the judge with labels).
Exit codes: 0 on success (for ``verify``/``heartbeat``: the reply may be delivered), 1 when a
requested model call failed (``verify``/``heartbeat``: the reply FAILed), 2 on a usage or
config error (``verify``/``heartbeat``: an internal error too, never read as a FAIL), 141 when
the output's reader stopped reading (``| head``; ``verify``/``heartbeat`` keep their code).
"""

from __future__ import annotations

import argparse
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
    run_command,
    verify_main,
)
from replyguard._version import __version__
from replyguard.config._schema import VerifierConfig

_COMMAND_NAMES = ("demo", "schema", "check-config", "insights", "verify", "heartbeat", "eval")


def _wanted(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs, when its first word that is not an option names one: only
    that command's arguments are added to the parser (``eval`` and ``insights`` load their
    packages for them). None (``--help``, ``--version``, a typo): every command's."""
    first = next((word for word in argv if not word.startswith("-")), None)
    return first if first in _COMMAND_NAMES else None


def _parser(wanted: str | None = None) -> argparse.ArgumentParser:
    def needed(name: str) -> bool:
        return wanted is None or wanted == name

    parser = argparse.ArgumentParser(
        prog="replyguard", description="A second opinion on a chat agent's reply."
    )
    parser.add_argument("--version", action="version", version=f"replyguard {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "demo",
        help="run scripted turns through the verifier (no API key, no network)",
        description="Run scripted turns through the real verifier, one for each path a turn "
        "can take, and print the path each took (skip, not triggered, pass, fail and retry, "
        "exhausted, checks, a stagnant retry, budgets, a rubric, fail-open, awaiting the user, "
        "side effects, a judge panel). The judge is scripted: no API key, no network.",
    )
    commands.add_parser(
        "schema",
        help="print the JSON Schema of the config file",
        description="Print the JSON Schema of the config file on stdout; point a config's "
        '"$schema" key at a saved copy and editors complete and check its keys.',
    )
    check = commands.add_parser(
        "check-config",
        help="check a config file as the verifier would, before deploying it",
        description="Check a config file with every check the verifier makes when it is "
        "built: the file's keys and values, the judge's and agent's model families, the "
        "workspace and its files, the ledger's folder, env: keys. Prints each error and "
        "warning, then one summary line.",
        epilog=CHECK_EPILOG,
    )
    if needed("check-config"):
        add_check_arguments(check)
    insights = commands.add_parser(
        "insights",
        help="summarise recurring failures in a ledger file",
        description="Read one or more ledgers (ledgerPath's JSON lines) and print what keeps "
        "failing: totals, each run kind's rates, FAIL categories, checks, judge models, the "
        "feedback's recurring themes, and suggestions citing the counts behind them. "
        "--propose asks the config's judge model for rule edits, printed for a human to "
        "review: nothing is written or applied.",
        epilog="exit 0 when the report was printed, 1 when --propose's model call failed, "
        "2 on a usage error or a ledger that cannot be read",
    )
    if needed("insights"):
        from replyguard.insights import add_arguments as add_insights_arguments

        add_insights_arguments(insights)
    verify = commands.add_parser(
        "verify",
        help="judge one turn given as JSON and print the verdict",
        description="Judge one turn given as JSON (pre-checks apply, triggers do not) and "
        "print the verdict as one JSON object.",
        epilog=STATUSES_HELP,
    )
    if needed("verify"):
        add_verify_arguments(verify)
    heartbeat = commands.add_parser(
        "heartbeat",
        help="judge a heartbeat agent's reply against HEARTBEAT.md",
        description="Judge a heartbeat run's reply against the workspace's HEARTBEAT.md and "
        "print the verdict JSON; on a FAIL the feedback for the agent goes to stderr. An "
        "empty reply while HEARTBEAT.md lists open tasks is a FAIL.",
        epilog=STATUSES_HELP,
    )
    if needed("heartbeat"):
        add_heartbeat_arguments(heartbeat)
    evaluation = commands.add_parser(
        "eval",
        help="measure the judge against a labelled dataset; write report.json/.html",
        description="Judge every record of a JSONL dataset (pre-checks apply, triggers do "
        "not), report agreement with the labels, and write report.json and report.html.",
        epilog="exit 0 when the eval ran (disagreements included), 2 on a bad dataset, "
        "config or usage",
    )
    if needed("eval"):
        from replyguard.evaluation import add_arguments as add_eval_arguments

        add_eval_arguments(evaluation)
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
    ``verify`` and ``heartbeat`` keep their decision's code."""
    open_closed_streams()
    try:
        return _run(argv)
    except BrokenPipeError:
        discard_stdout()
        return PIPE_CLOSED


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
    if args.command in _COMMANDS:
        return _COMMANDS[args.command](args)
    return run_command("check-config", check_config_main, args)


if __name__ == "__main__":
    sys.exit(main())
