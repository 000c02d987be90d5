"""``replyguard check-config FILE``: check a config as the verifier would, before deploying it.

The file is loaded as ``VerifierConfig.load`` loads it (a bad key or value: the message on
stderr, exit 2); then every finding the verifier makes when it is built
(``replyguard.runner._preflight``) is printed, and a verifier is built from the config to catch
anything else it refuses. A judge model that would be called without a key is an error, unless
``--offline`` (``replyguard._credentials``). Errors exit 2; warnings exit 0 unless
``--strict``. The last line sums it up. ``--show`` prints the effective config (secrets
masked) as JSON on stdout, and the findings and summary then go to stderr so that stdout stays
one JSON document.
"""

from __future__ import annotations

import argparse
import json
import sys

from replyguard.config._schema import VerifierConfig
from replyguard.errors import ReplyguardError
from replyguard.runner._preflight import config_findings

CHECK_EPILOG = (
    "errors (what the verifier refuses, or loses on every turn: a judge of the agent's family "
    "with requireCrossFamily, a missing workspaceDir, a ledgerPath in a missing folder, an "
    "env: key whose variable is unset, a judge model with no key: none in the config, none in "
    "its provider's environment variable such as ANTHROPIC_API_KEY; --offline skips this) "
    "exit 2; warnings (what it tolerates: a missing rules or heartbeat file, a judge of the "
    "agent's family, an unknown model family) exit 0 unless --strict"
)


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``replyguard check-config``."""
    parser.add_argument("file", metavar="FILE", help="the JSON config file")
    parser.add_argument(
        "--strict", action="store_true", help="exit 2 on warnings too (for CI and deploy gates)"
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="do not look for the judge models' keys (for CI, where the provider keys are not "
        "set); every other check still runs",
    )
    parser.add_argument(
        "--show",
        action="store_true",
        help="print the effective config (defaults filled in, secrets masked) as JSON on stdout",
    )


def _refusal(config: VerifierConfig) -> str | None:
    """What building a verifier from ``config`` raises, if anything."""
    # Imported here: every command's parser reads this module (``CHECK_EPILOG``).
    from replyguard.runner._verifier import Verifier

    try:
        verifier = Verifier(config)
    except (ReplyguardError, ValueError) as exc:
        return str(exc)
    verifier.close()
    return None


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def summary(config: VerifierConfig) -> str:
    """``judge MODEL, enabled, 3 run kinds, 2 checks``: what the config sets up."""
    fallbacks = len(config.fallback_models)
    judge = f"judge {config.model}" + (f" (+{_plural(fallbacks, 'fallback')})" if fallbacks else "")
    state = "enabled" if config.enabled else 'disabled (set "enabled": true to judge turns)'
    mode = ", shadow mode" if config.mode == "shadow" else ""
    kinds = _plural(len(config.run_kinds), "run kind")
    return f"{judge}, {state}{mode}, {kinds}, {_plural(len(config.checks), 'check')}"


def check_config_main(args: argparse.Namespace) -> int:
    """Run ``replyguard check-config``: 0 usable, 2 on an error (or a warning with --strict)."""
    config = VerifierConfig.load(args.file)
    findings = config_findings(config, credentials=not args.offline)
    problems = [(f.level, f.key, f.message) for f in findings]
    if not any(level == "error" for level, _, _ in problems):
        refusal = _refusal(config)
        if refusal is not None:
            problems.append(("error", "", refusal))
    problems.sort(key=lambda problem: problem[0] != "error")
    report = sys.stdout
    if args.show:
        print(json.dumps(config.model_dump(mode="json", by_alias=True), indent=2))
        report = sys.stderr
    for level, key, message in problems:
        print(f"{level}: {key}: {message}" if key else f"{level}: {message}", file=report)
    errors = sum(level == "error" for level, _, _ in problems)
    warnings = len(problems) - errors
    if errors or (warnings and args.strict):
        counts = [_plural(errors, "error")] if errors else []
        counts += [_plural(warnings, "warning")] if warnings else []
        strict = " (--strict)" if not errors else ""
        print(f"FAILED{strict}: {', '.join(counts)} in {args.file}", file=report)
        return 2
    noted = f"; {_plural(warnings, 'warning')}" if warnings else ""
    print(f"OK: {summary(config)}{noted}", file=report)
    return 0
