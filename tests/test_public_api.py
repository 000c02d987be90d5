"""The one front door: ``replyguard`` exports exactly the public names, sorted."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pytest

import replyguard
from replyguard.testing import ScriptedAgent, ScriptedJudge

EXPECTED = {
    "Attempt",
    "BaseJudge",
    "Check",
    "CheckResult",
    "ClaimCheck",
    "FigureCheck",
    "CommandCheck",
    "FunctionCheck",
    "HeartbeatCheck",
    "HttpRequestCheck",
    "JsonCheck",
    "RuleCheck",
    "repair_json",
    "ConfigError",
    "CrossFamilyError",
    "Delta",
    "Done",
    "FailCategory",
    "Judge",
    "JudgeError",
    "JudgeReply",
    "LiteLLMJudge",
    "Outcome",
    "Progress",
    "Reason",
    "Reply",
    "ReplyguardError",
    "Retract",
    "RunMeta",
    "SkipReason",
    "Status",
    "TokenUsage",
    "ToolCallRecord",
    "Turn",
    "TurnContext",
    "Verdict",
    "VerificationExhausted",
    "Verifier",
    "VerifierConfig",
    "__version__",
    "current_turn",
    "idempotency_key",
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
        "grounding",
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


def test_import_loads_only_the_errors_and_each_name_on_first_use() -> None:
    """``import replyguard`` loads no model, no pydantic, no runner: only the env defaults and
    the errors. A name looked up loads its module (and what that needs), no other; ``from
    replyguard import X`` works for every public name, and ``dir`` lists them all."""
    script = (
        "import sys\n"
        "import replyguard\n"
        "ours = lambda: sorted(m for m in sys.modules if m.startswith('replyguard'))\n"
        "print(ours(), 'pydantic' in sys.modules)\n"
        "from replyguard import Verdict\n"
        "print('replyguard.runner' in sys.modules, 'replyguard.checks.base' in sys.modules,"
        " Verdict.__module__, replyguard.ConfigError.__module__)\n"
        "for name in replyguard.__all__:\n"
        "    exec(f'from replyguard import {name}')\n"
        "print(set(replyguard.__all__) <= set(dir(replyguard)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.splitlines() == [
        "['replyguard', 'replyguard._env', 'replyguard._public', 'replyguard._version', "
        "'replyguard.checks', 'replyguard.errors'] False",
        "False False replyguard replyguard",
        "True",
    ]


def test_import_builds_no_validator_and_reads_no_source_until_needed() -> None:
    """What makes ``import replyguard`` slow is left for first use: no model's validator is
    built and no class's source is parsed (for the schema's attribute docstrings) at import,
    nor by loading a config; the schema still describes every key."""
    script = (
        "import inspect, json; parsed = []; real = inspect.getsource\n"
        "inspect.getsource = lambda *a, **k: parsed.append(1) or real(*a, **k)\n"
        "import pydantic._internal._fields as f; real_docs = f.extract_docstrings_from_cls\n"
        "f.extract_docstrings_from_cls = lambda *a, **k: parsed.append(1) or real_docs(*a, **k)\n"
        "import pydantic._internal._model_construction as mc; built = []\n"
        "real_complete = mc.complete_model_class\n"
        "mc.complete_model_class = lambda cls, *a, **k: built.append(cls.__name__)"
        " or real_complete(cls, *a, **k)\n"
        "import replyguard; at_import = (list(built), len(parsed))\n"
        "config = replyguard.VerifierConfig.from_dict({'model': 'openai/gpt-4o-mini'})\n"
        "loaded = len(parsed)\n"
        "schema = replyguard.VerifierConfig.json_schema()\n"
        "print(json.dumps([at_import, loaded, len(parsed) > 0,"
        " schema['properties']['judgeMaxTokens']['description']]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    at_import, loaded, parsed_for_schema, description = json.loads(result.stdout)
    assert at_import == [[], 0]
    assert loaded == 0
    assert parsed_for_schema
    assert description.startswith("Verdict length limit")


async def test_verification_exhausted_comes_from_the_front_door_with_the_delivered_reply(
    make_config: Callable[..., replyguard.VerifierConfig],
) -> None:
    fails = ["FAIL [incomplete]: add the date.", "FAIL [incomplete]: add the time."]
    verifier = replyguard.Verifier(
        make_config(verifyAll=True, maxAttempts=2, onExhausted="raise"),
        judge=ScriptedJudge(fails),
    )
    with pytest.raises(replyguard.VerificationExhausted) as caught:
        await verifier.run(ScriptedAgent(["r1", "r2"]), replyguard.Turn(user_message="Plan it."))
    assert caught.value.last_reply == caught.value.outcome.attempts[-1].reply
    assert isinstance(caught.value.last_reply, replyguard.Reply)
    assert caught.value.last_reply.text == "r2"
