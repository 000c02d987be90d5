"""The ``replyguard`` command.

Commands: ``demo`` (scripted turns through the real runner, no API key needed), ``schema``
(the config's JSON Schema), ``check-config FILE`` (validate a config and print it with
secrets masked) and ``insights LEDGER`` (recurring failures and suggestions from a ledger).
Exit codes: 0 on success, 1 when a requested model call failed, 2 on a usage or config error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from replyguard import __version__
from replyguard.config import VerifierConfig
from replyguard.errors import ConfigError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="replyguard", description="A second opinion on a chat agent's reply."
    )
    parser.add_argument("--version", action="version", version=f"replyguard {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "demo", help="run scripted turns through the verifier (no API key, no network)"
    )
    commands.add_parser("schema", help="print the JSON Schema of the config file")
    check = commands.add_parser(
        "check-config", help="validate a config file and print the effective config"
    )
    check.add_argument("file", help="the JSON config file")
    from replyguard.insights import add_arguments as add_insights_arguments

    add_insights_arguments(
        commands.add_parser("insights", help="summarise recurring failures in a ledger file")
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = _parser().parse_args(argv)
    if args.command == "demo":
        from replyguard.demo import main as demo_main

        return demo_main()
    if args.command == "schema":
        print(json.dumps(VerifierConfig.json_schema(), indent=2))
        return 0
    if args.command == "insights":
        from replyguard.insights import main as insights_main

        return insights_main(args)
    try:
        config = VerifierConfig.load(args.file)
    except ConfigError as exc:
        print(f"replyguard: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(config.model_dump(mode="json", by_alias=True), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
