"""The ``verify`` and ``heartbeat`` commands, and the one-judgement status they share with ``eval``.

One reply is judged as ``Verifier.verify`` judges it (checks, then the judge; even when the
config is not ``enabled``), after the pre-checks; triggers do not apply. The status printed:

- ``passed``: the judge (or a deciding check) passed the reply — exit 0;
- ``skipped``: a pre-check delivers the reply as it is (tool calls, empty, ...) — exit 0;
- ``failed_open``: the judgement went wrong (error, timeout, unreadable verdict, ...); the
  reply would be delivered, ``reason`` says why — exit 0, with one line on stderr (a judge
  configuration error, such as a missing key or an unknown model, says so);
- ``flagged``: a FAIL in shadow mode (``mode: "shadow"``), or a FAIL of a reply whose tool
  calls already had side effects under ``onSideEffects: "deliver"`` (reason
  ``side_effects``): delivered anyway — exit 0;
- ``failed``: a FAIL; ``category`` and ``feedback`` say what must change — exit 1.

A usage, input or config error exits 2 with a message on stderr, and so does an unexpected
internal error (never 1: a crash must not read as a FAIL). The mode is the turn's run kind's
(``--run-kind``, or ``runKind`` in the turn JSON). litellm and the tokenizer are loaded only
when the judge is called (what a pre-check or a deciding check settles never loads them), and
``latencyMs`` does not count their loading. ``heartbeat`` fails an empty
reply (the agent printed nothing) while HEARTBEAT.md lists open tasks; a workspace without
HEARTBEAT.md has no tasks (a notice on stderr): an acknowledgement (``HEARTBEAT_OK``) passes
without a judge call, and a report is judged as usual.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from replyguard._cli.streams import discard_stdout
from replyguard._commands import UsageError, check_run_kind, load_config, read_text, run_command
from replyguard._records import TurnRecord, read_record
from replyguard._workspace import Workspace
from replyguard.checks.heartbeat import MAX_LISTED, is_acknowledgement, open_tasks
from replyguard.checks.markdown import bulleted
from replyguard.config._checks import HeartbeatCheckSpec
from replyguard.config._schema import VerifierConfig
from replyguard.errors import CrossFamilyError
from replyguard.judge._protocol import Judge
from replyguard.runner._feedback import feedback_message
from replyguard.runner._judgement import FAILED, FAILED_OPEN, Judgement, decide, judge_one
from replyguard.runner._verifier import Verifier
from replyguard.telemetry._events import Events
from replyguard.types import FailCategory, Reason, Reply, SkipReason, Turn, Verdict

STATUSES_HELP = (
    "statuses: passed, skipped (a pre-check delivers the reply as it is), failed_open (the "
    "judgement went wrong; the reply is delivered), flagged (a FAIL in shadow mode, or after "
    "side effects under onSideEffects deliver) - exit 0; "
    "failed (a FAIL) - exit 1; a usage, input or config error, or an internal error - exit 2 "
    "(never 1)"
)
HEARTBEAT_REQUEST = (
    "Heartbeat run: read {file} in the workspace and work through every open task listed "
    "there. Reply HEARTBEAT_OK only when nothing needs attention; otherwise report what was done."
)


def build_verifier(config: VerifierConfig, judge: Judge | None = None) -> Verifier:
    """A verifier for ``config``; a refused judge/agent pairing is a usage error."""
    try:
        return Verifier(config, judge=judge, preload=False)  # loaded only if the judge is called
    except CrossFamilyError as exc:
        raise UsageError(str(exc)) from None


def add_run_kind_argument(parser: argparse.ArgumentParser) -> None:
    """``--run-kind NAME``: the ``runKinds`` profile (mode, model, budgets) of the turn."""
    parser.add_argument(
        "--run-kind",
        metavar="NAME",
        help="judge under the config's runKinds profile NAME (its mode, model, budgets)",
    )


async def _judge_and_close(verifier: Verifier, turn: Turn, reply: Reply) -> Judgement:
    try:
        return await judge_one(verifier, turn, reply)
    finally:
        await verifier.aclose()


CONFIG_ERROR_PREFIX = "JudgeConfigError: "


def fail_open_notice(command: str, judgement: Judgement) -> str | None:
    """The one stderr line for a judgement that failed open, or None when it did not.

    A judge configuration error (bad or missing key, unknown model, bad request: the provider
    refused the call as misconfigured) says so and points at ``check-config``, and so does a
    judge model without a key (``missing_credentials``); any other fail-open names its
    reason. The error text is already redacted.
    """
    verdict = judgement.verdict
    if judgement.status != FAILED_OPEN or verdict is None:
        return None
    error = " ".join((verdict.error or "").split())
    delivered = "the reply is delivered as it is"
    if error.startswith(CONFIG_ERROR_PREFIX):
        error = error.removeprefix(CONFIG_ERROR_PREFIX)
        return (
            f"replyguard {command}: judge configuration error ({delivered}; check the model, "
            f"key and apiBase, or run replyguard check-config): {error}"
        )
    if verdict.fail_open_reason == Reason.MISSING_CREDENTIALS:
        delivered += "; run replyguard check-config"
    detail = f": {error}" if error else ""
    return f"replyguard {command}: failed open ({judgement.reason}, {delivered}){detail}"


def _finish(judgement: Judgement, command: str) -> int:
    try:
        print(json.dumps(judgement.to_json()), flush=True)
    except BrokenPipeError:  # the reader stopped reading: the decision stands
        discard_stdout()
    notice = fail_open_notice(command, judgement)
    if notice is not None:
        print(notice, file=sys.stderr)
    return 1 if judgement.status == FAILED else 0


# -- verify ------------------------------------------------------------------------------------


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``replyguard verify``."""
    parser.add_argument(
        "file", nargs="?", metavar="FILE", help="a turn as JSON; '-' or none reads stdin"
    )
    parser.add_argument("--config", metavar="FILE", help="the verifier config (else defaults)")
    add_run_kind_argument(parser)


def _verify(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    text, name = read_text(args.file, "turn")
    record = read_record(TurnRecord, text, path=name)
    turn = record.turn()
    if args.run_kind is not None:
        turn = turn.model_copy(update={"run_kind": args.run_kind})
    check_run_kind(config, turn.run_kind)
    verifier = build_verifier(config)
    return _finish(asyncio.run(_judge_and_close(verifier, turn, record.agent_reply())), "verify")


def verify_main(args: argparse.Namespace) -> int:
    """Run ``replyguard verify``: 0 deliverable, 1 FAIL, 2 usage/input/config/internal error."""
    return run_command("verify", _verify, args)


# -- heartbeat ---------------------------------------------------------------------------------


def add_heartbeat_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``replyguard heartbeat``."""
    parser.add_argument(
        "--workspace", required=True, metavar="DIR", help="the folder holding HEARTBEAT.md"
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "reply", nargs="?", metavar="REPLY", help="the agent's reply text; '-' or none reads stdin"
    )
    source.add_argument("--reply-file", metavar="FILE", help="read the agent's reply from FILE")
    parser.add_argument("--config", metavar="FILE", help="the verifier config (else defaults)")
    add_run_kind_argument(parser)


def heartbeat_config(config: VerifierConfig, workspace: Path) -> VerifierConfig:
    """``config`` reading ``workspace``, with the built-in heartbeat check in its checks."""
    checks = config.checks
    if not any(spec.type == "heartbeat" for spec in checks):
        checks = (*checks, HeartbeatCheckSpec(type="heartbeat"))
    return config.model_copy(update={"workspace_dir": str(workspace.resolve()), "checks": checks})


def _heartbeat(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    workspace = Path(args.workspace)
    if not workspace.is_dir():
        raise UsageError(f"--workspace {args.workspace}: not a folder")
    no_tasks = not (workspace / config.heartbeat_file).is_file()
    if no_tasks:
        print(
            f"replyguard heartbeat: notice: {workspace / config.heartbeat_file} not found: "
            "no tasks",
            file=sys.stderr,
        )
    if args.reply_file is not None:
        text, _ = read_text(args.reply_file, "reply")
    elif args.reply is not None and args.reply != "-":
        text = args.reply
    else:
        text, _ = read_text(None, "reply")
    check_run_kind(config, args.run_kind)
    config = heartbeat_config(config, workspace)
    turn = Turn(
        user_message=HEARTBEAT_REQUEST.format(file=config.heartbeat_file),
        heartbeat=True,
        run_kind=args.run_kind,
    )
    verifier = build_verifier(config)
    reply = Reply(text=text)
    if no_tasks and is_acknowledgement(text):
        verifier.close()
        verdict = Verdict(
            passed=True,
            decisive=True,
            feedback=f"There is no {config.heartbeat_file}: no tasks, nothing to do.",
        )
        judgement = decide(verdict, None, config.for_run_kind(turn.run_kind).mode, heartbeat=True)
    else:
        judgement = asyncio.run(_judge_and_close(verifier, turn, reply))
    if judgement.skip == SkipReason.EMPTY_RESPONSE:
        judgement = _empty_heartbeat(config, turn, judgement)
    code = _finish(judgement, "heartbeat")
    if judgement.judged_fail and judgement.verdict is not None:
        print(feedback_message(judgement.verdict, heartbeat=True), file=sys.stderr)
    return code


def _empty_heartbeat(config: VerifierConfig, turn: Turn, skipped: Judgement) -> Judgement:
    """An empty reply while the heartbeat file lists open tasks is a FAIL (the agent did
    nothing, or crashed before printing); with no open task it stays skipped."""
    markdown = Workspace(config.workspace_dir, Events()).read(config.heartbeat_file)
    tasks = open_tasks(markdown) if markdown is not None else []
    if not tasks:
        return skipped
    count = "1 open task" if len(tasks) == 1 else f"{len(tasks)} open tasks"
    feedback = (
        f"The reply is empty, but {config.heartbeat_file} still lists {count}:\n"
        f"{bulleted(tasks, MAX_LISTED)}\nWork through them now and report what you did."
    )
    verdict = Verdict(
        passed=False, category=FailCategory.GOAL_MISSED, feedback=feedback, decisive=True
    )
    return decide(verdict, None, config.for_run_kind(turn.run_kind).mode, heartbeat=True)


def heartbeat_main(args: argparse.Namespace) -> int:
    """Run ``replyguard heartbeat``: 0 deliverable, 1 FAIL, 2 usage/input/config/internal
    error."""
    return run_command("heartbeat", _heartbeat, args)
