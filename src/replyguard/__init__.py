"""replyguard: a second opinion on a chat agent's reply before it is delivered.

    config = VerifierConfig.load("verifier.json")
    verifier = Verifier(config)
    outcome = await verifier.run(agent, Turn(user_message="..."))
    deliver(outcome.response)

Everything the verifier itself gets wrong fails open: the reply is delivered as it is.
"""

from typing import TYPE_CHECKING, Any

from replyguard._env import set_env_defaults

set_env_defaults()

from replyguard._public import lazy_attribute, present_as  # noqa: E402
from replyguard._version import __version__  # noqa: E402
from replyguard.checks import AT_TOP_LEVEL as _CHECKS_AT_TOP_LEVEL  # noqa: E402
from replyguard.checks import (  # noqa: E402 - after the env defaults
    Check,
    CheckResult,
    FunctionCheck,
)
from replyguard.config._schema import VerifierConfig  # noqa: E402
from replyguard.errors import (  # noqa: E402
    ConfigError,
    CrossFamilyError,
    JudgeError,
    ReplyguardError,
    VerificationExhausted,
)
from replyguard.gate._prechecks import skip_reason  # noqa: E402
from replyguard.judge._base import BaseJudge  # noqa: E402
from replyguard.judge._fallbacks import LiteLLMJudge  # noqa: E402
from replyguard.judge._protocol import Judge, JudgeReply  # noqa: E402
from replyguard.judge._verdict import parse_verdict  # noqa: E402
from replyguard.runner._turn_scope import (  # noqa: E402
    TurnContext,
    current_turn,
    idempotency_key,
)
from replyguard.runner._verifier import Verifier  # noqa: E402
from replyguard.types import (  # noqa: E402
    Attempt,
    Delta,
    Done,
    FailCategory,
    Outcome,
    Progress,
    Reason,
    Reply,
    Retract,
    RunMeta,
    SkipReason,
    Status,
    TokenUsage,
    ToolCallRecord,
    Turn,
    Verdict,
)

if TYPE_CHECKING:
    from replyguard.checks import (
        ClaimCheck,
        CommandCheck,
        FigureCheck,
        HeartbeatCheck,
        HttpRequestCheck,
        JsonCheck,
        RuleCheck,
        repair_json,
    )

__all__ = [
    "Attempt",
    "BaseJudge",
    "Check",
    "CheckResult",
    "ClaimCheck",
    "CommandCheck",
    "ConfigError",
    "CrossFamilyError",
    "Delta",
    "Done",
    "FailCategory",
    "FigureCheck",
    "FunctionCheck",
    "HeartbeatCheck",
    "HttpRequestCheck",
    "JsonCheck",
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
    "RuleCheck",
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
    "repair_json",
    "skip_reason",
]

# The built-in checks load on first use (``replyguard.JsonCheck``): most verifiers need none.
_LAZY = dict.fromkeys(_CHECKS_AT_TOP_LEVEL, "checks")

present_as(__name__, globals(), [name for name in __all__ if name not in _LAZY])


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, globals(), _LAZY, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
