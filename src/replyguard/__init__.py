"""replyguard: a second opinion on a chat agent's reply before it is delivered.

    config = VerifierConfig.load("verifier.json")
    verifier = Verifier(config)
    outcome = await verifier.run(agent, Turn(user_message="..."))
    deliver(outcome.response)

Everything the verifier itself gets wrong fails open: the reply is delivered as it is.
"""

from typing import TYPE_CHECKING

from replyguard._env import set_env_defaults

set_env_defaults()

from replyguard._public import lazy_package, present_as  # noqa: E402
from replyguard._version import __version__  # noqa: E402
from replyguard.checks import AT_TOP_LEVEL as _CHECKS_AT_TOP_LEVEL  # noqa: E402
from replyguard.errors import (  # noqa: E402 - after the env defaults
    ConfigError,
    CrossFamilyError,
    JudgeError,
    ReplyguardError,
    VerificationExhausted,
)

if TYPE_CHECKING:
    from replyguard.checks import (
        Check,
        CheckResult,
        ClaimCheck,
        CommandCheck,
        FigureCheck,
        FunctionCheck,
        HeartbeatCheck,
        HttpRequestCheck,
        JsonCheck,
        RuleCheck,
        repair_json,
    )
    from replyguard.config._schema import VerifierConfig
    from replyguard.gate._prechecks import skip_reason
    from replyguard.judge._base import BaseJudge
    from replyguard.judge._fallbacks import LiteLLMJudge
    from replyguard.judge._protocol import Judge, JudgeReply
    from replyguard.judge._verdict import parse_verdict
    from replyguard.runner._turn_scope import TurnContext, current_turn, idempotency_key
    from replyguard.runner._verifier import Verifier
    from replyguard.types import (
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

# Every public name but the errors loads on first use (``replyguard.Verifier``, or ``from
# replyguard import Verifier``): ``import replyguard`` costs the env defaults and the errors,
# and a command that needs a few modules (``replyguard heartbeat``) loads only those. A name
# reports ``replyguard`` as its module from its first look-up here; the errors, which
# tracebacks print, from the start.
_ELSEWHERE = {
    **dict.fromkeys(_CHECKS_AT_TOP_LEVEL, "checks"),
    "VerifierConfig": "config._schema",
    "skip_reason": "gate._prechecks",
    "BaseJudge": "judge._base",
    "LiteLLMJudge": "judge._fallbacks",
    "Judge": "judge._protocol",
    "JudgeReply": "judge._protocol",
    "parse_verdict": "judge._verdict",
    **dict.fromkeys(["TurnContext", "current_turn", "idempotency_key"], "runner._turn_scope"),
    "Verifier": "runner._verifier",
}
# Every other public name not imported above is one of ``replyguard.types``' value types.
_LAZY = {name: _ELSEWHERE.get(name, "types") for name in __all__ if name not in globals()}

present_as(__name__, globals(), [name for name in __all__ if name not in _LAZY])


__getattr__, __dir__ = lazy_package(__name__, globals(), _LAZY, _LAZY)
