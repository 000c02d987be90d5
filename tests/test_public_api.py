"""The one front door: ``replyguard`` exports exactly the public names, sorted."""

from __future__ import annotations

import subprocess
import sys

import replyguard

EXPECTED = {
    "Attempt",
    "Check",
    "CheckResult",
    "ClaimCheck",
    "CommandCheck",
    "FunctionCheck",
    "HeartbeatCheck",
    "HttpRequestCheck",
    "JsonCheck",
    "RuleCheck",
    "repair_json",
    "ConfigError",
    "CrossFamilyError",
    "FailCategory",
    "Judge",
    "JudgeError",
    "JudgeReply",
    "LiteLLMJudge",
    "Outcome",
    "Reason",
    "Reply",
    "ReplyguardError",
    "RunMeta",
    "SkipReason",
    "Status",
    "ToolCallRecord",
    "Turn",
    "Verdict",
    "Verifier",
    "VerifierConfig",
    "__version__",
    "parse_verdict",
    "skip_reason",
}


def test_all_lists_exactly_the_public_names_sorted() -> None:
    assert replyguard.__all__ == sorted(replyguard.__all__)
    assert set(replyguard.__all__) == EXPECTED


def test_every_public_name_is_importable() -> None:
    for name in replyguard.__all__:
        assert getattr(replyguard, name) is not None


def test_contract_enum_values() -> None:
    assert [s.value for s in replyguard.SkipReason] == [
        "tool_calls",
        "messaging_tool_sent",
        "block_streaming_sent",
        "empty_response",
        "error_response",
    ]
    assert [c.value for c in replyguard.FailCategory] == [
        "goal_missed",
        "incomplete",
        "rule_violation",
        "tone_mismatch",
        "refusal",
    ]
    assert {s.value for s in replyguard.Status} == {
        "passed",
        "skipped",
        "not_triggered",
        "disabled",
        "failed_open",
        "exhausted",
        "flagged",
    }


def test_import_does_not_load_litellm_or_set_more_than_env_defaults() -> None:
    script = (
        "import os, sys; before = dict(os.environ); import replyguard; "
        "added = set(os.environ) - set(before); "
        "print('litellm' in sys.modules, sorted(added))"
    )
    env = {
        k: v
        for k, v in __import__("os").environ.items()
        if not k.startswith(("LITELLM", "TIKTOKEN"))
    }
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    assert result.stdout.strip() == (
        "False ['LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS', 'LITELLM_LOCAL_MODEL_COST_MAP', "
        "'TIKTOKEN_CACHE_DIR']"
    )
