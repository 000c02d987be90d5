"""Deterministic checks that run before the judge: the protocol and the built-ins.

Every name loads on first use (``replyguard.checks.ClaimCheck``, or a config that lists one): a
verifier without the built-ins never imports them, and ``import replyguard`` reads only the
names below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replyguard._public import lazy_package

if TYPE_CHECKING:
    from replyguard.checks.base import Check, CheckResult, FunctionCheck, as_check, failed, passed
    from replyguard.checks.claim_tools import DEFAULT_CLAIMS
    from replyguard.checks.claims import ClaimCheck
    from replyguard.checks.command import CommandCheck
    from replyguard.checks.figures import FigureCheck
    from replyguard.checks.heartbeat import HeartbeatCheck, open_tasks
    from replyguard.checks.http_request import HttpRequestCheck
    from replyguard.checks.json_check import JsonCheck
    from replyguard.checks.json_repair import repair_json
    from replyguard.checks.rules import RuleCheck

_LAZY = {
    **dict.fromkeys(
        ["Check", "CheckResult", "FunctionCheck", "as_check", "failed", "passed"], "base"
    ),
    "DEFAULT_CLAIMS": "claim_tools",
    "ClaimCheck": "claims",
    "CommandCheck": "command",
    "FigureCheck": "figures",
    "HeartbeatCheck": "heartbeat",
    "open_tasks": "heartbeat",
    "HttpRequestCheck": "http_request",
    "JsonCheck": "json_check",
    "repair_json": "json_repair",
    "RuleCheck": "rules",
}
# What ``replyguard`` itself exports (lazily too): its ``__module__`` says ``replyguard``.
AT_TOP_LEVEL = frozenset(
    {
        "Check",
        "CheckResult",
        "FunctionCheck",
        "ClaimCheck",
        "CommandCheck",
        "FigureCheck",
        "HeartbeatCheck",
        "HttpRequestCheck",
        "JsonCheck",
        "RuleCheck",
        "repair_json",
    }
)

__all__ = [
    "DEFAULT_CLAIMS",
    "Check",
    "CheckResult",
    "ClaimCheck",
    "CommandCheck",
    "FigureCheck",
    "FunctionCheck",
    "HeartbeatCheck",
    "HttpRequestCheck",
    "JsonCheck",
    "RuleCheck",
    "as_check",
    "failed",
    "open_tasks",
    "passed",
    "repair_json",
]


__getattr__, __dir__ = lazy_package(__name__, globals(), _LAZY, AT_TOP_LEVEL)
