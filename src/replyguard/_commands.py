"""What every command shares: its usage error, the config, reading a file or stdin, run kinds,
and the wrapper that turns an error into its message and exit 2.

Neutral ground below the command line (``_cli``) and the commands that live in their own
folders (``evaluation``, ``review``), so none of them imports another's internals.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from replyguard._records import RecordError
from replyguard.config._schema import VerifierConfig
from replyguard.errors import ConfigError
from replyguard.telemetry._events import describe_error

STDIN = "<stdin>"
"""How stdin is named in messages."""


class UsageError(Exception):
    """A command's input cannot be used: printed on stderr, exit 2."""


def load_config(path: str | None) -> VerifierConfig:
    """The config at ``path``, or the defaults without one; raises ``ConfigError``.

    The defaults are made without validating them (a test holds them equal to
    ``VerifierConfig()``): validating nothing would build the config's whole validator, which
    a command given no file may never use (a heartbeat decided by its check: 3% of its work).
    """
    return VerifierConfig.model_construct() if path is None else VerifierConfig.load(path)


def read_text(argument: str | None, what: str) -> tuple[str, str]:
    """``(text, name)`` of a file argument, or of stdin for ``-`` or no argument."""
    name = STDIN if argument is None or argument == "-" else argument
    try:
        if name == STDIN:
            if sys.stdin is None:
                closed = "stdin is closed: pass it another way (see --help)"
                raise UsageError(f"{what} {name}: {closed}")
            return sys.stdin.read(), name
        return Path(name).read_text(encoding="utf-8"), name
    except FileNotFoundError:
        raise UsageError(f"{what} {name}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{what} {name}: cannot read: {type(exc).__name__}") from None


def check_run_kind(config: VerifierConfig, name: str | None) -> None:
    """A named run kind must be one of the config's ``runKinds``; raises ``UsageError``."""
    if name is not None and name not in config.run_kinds:
        known = ", ".join(sorted(config.run_kinds)) or "none"
        raise UsageError(f"run kind {name!r} is not in the config's runKinds (known: {known})")


def run_command(
    command: str, body: Callable[[argparse.Namespace], int], args: argparse.Namespace
) -> int:
    """``body(args)``; a usage, input, config or internal error prints and exits 2."""
    try:
        return body(args)
    except BrokenPipeError:  # not an internal error: ``main`` ends quietly
        raise
    except (UsageError, ConfigError, RecordError) as exc:
        print(f"replyguard {command}: {exc}", file=sys.stderr)
    except Exception as exc:  # an internal error must never exit 1, which means FAIL
        print(f"replyguard {command}: internal error: {describe_error(exc)}", file=sys.stderr)
    return 2
