"""replyguard: a second opinion on a chat agent's reply before it is delivered.

    config = VerifierConfig.load("verifier.json")
    verifier = Verifier(config)
    outcome = await verifier.run(agent, Turn(user_message="..."))
    deliver(outcome.response)

Everything the verifier itself gets wrong fails open: the reply is delivered as it is.
"""

from replyguard._env import set_env_defaults

set_env_defaults()

from replyguard.checks import (  # noqa: E402 - after the env defaults
    Check,
    CheckResult,
    ClaimCheck,
    CommandCheck,
    FunctionCheck,
    HeartbeatCheck,
    HttpRequestCheck,
    JsonCheck,
    RuleCheck,
    repair_json,
)
from replyguard.config import VerifierConfig  # noqa: E402
from replyguard.errors import (  # noqa: E402
    ConfigError,
    CrossFamilyError,
    JudgeError,
    ReplyguardError,
    VerificationExhausted,
)
from replyguard.judge import Judge, JudgeReply, LiteLLMJudge  # noqa: E402
from replyguard.prechecks import skip_reason  # noqa: E402
from replyguard.runner import Verifier  # noqa: E402
from replyguard.types import (  # noqa: E402
    Attempt,
    FailCategory,
    Outcome,
    Reason,
    Reply,
    RunMeta,
    SkipReason,
    Status,
    ToolCallRecord,
    Turn,
    Verdict,
)
from replyguard.verdict import parse_verdict  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "Attempt",
    "Check",
    "CheckResult",
    "ClaimCheck",
    "CommandCheck",
    "ConfigError",
    "CrossFamilyError",
    "FailCategory",
    "FunctionCheck",
    "HeartbeatCheck",
    "HttpRequestCheck",
    "JsonCheck",
    "Judge",
    "JudgeError",
    "JudgeReply",
    "LiteLLMJudge",
    "Outcome",
    "Reason",
    "Reply",
    "ReplyguardError",
    "RuleCheck",
    "RunMeta",
    "SkipReason",
    "Status",
    "ToolCallRecord",
    "Turn",
    "Verdict",
    "VerificationExhausted",
    "Verifier",
    "VerifierConfig",
    "__version__",
    "parse_verdict",
    "repair_json",
    "skip_reason",
]
