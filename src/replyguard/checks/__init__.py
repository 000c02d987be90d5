"""Deterministic checks that run before the judge: the protocol and the built-ins."""

from replyguard.checks.base import Check, CheckResult, FunctionCheck, as_check, failed, passed
from replyguard.checks.claim_tools import DEFAULT_CLAIMS
from replyguard.checks.claims import ClaimCheck
from replyguard.checks.command import CommandCheck
from replyguard.checks.heartbeat import HeartbeatCheck, open_tasks
from replyguard.checks.http_request import HttpRequestCheck
from replyguard.checks.json_check import JsonCheck
from replyguard.checks.json_repair import repair_json
from replyguard.checks.rules import RuleCheck

__all__ = [
    "DEFAULT_CLAIMS",
    "Check",
    "CheckResult",
    "ClaimCheck",
    "CommandCheck",
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
