"""The judge call: the ``Judge`` protocol, ``LiteLLMJudge`` and everything around one call.

The only folder that imports litellm (the router, the answer cap, the HTTP clients, model
info for prompt caching, the one-off completions of ``insights``, the agent's upstream call of
``replyguard serve``), and where the verdict text is parsed.
"""

from replyguard.judge._base import BaseJudge
from replyguard.judge._fallbacks import LiteLLMJudge
from replyguard.judge._litellm import (
    Failure,
    classify_failure,
    close_litellm_clients,
    import_litellm,
    read_response,
    supports_structured_verdict,
)
from replyguard.judge._protocol import VERDICT_FORMAT, Judge, JudgeReply, verdict_format

__all__ = [
    "VERDICT_FORMAT",
    "BaseJudge",
    "Failure",
    "Judge",
    "JudgeReply",
    "LiteLLMJudge",
    "classify_failure",
    "close_litellm_clients",
    "import_litellm",
    "read_response",
    "supports_structured_verdict",
    "verdict_format",
]
