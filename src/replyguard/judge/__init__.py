"""The judge call: the ``Judge`` protocol, ``LiteLLMJudge`` and everything around one call.

The only folder that imports litellm (the router, the answer cap, the HTTP clients, model
info for prompt caching, the one-off completions of ``insights``, the agent's upstream call of
``replyguard serve``), and where the verdict text is parsed.

Every name loads its module on first use (``replyguard.judge.LiteLLMJudge``): a module of
another folder that needs one part (the protocol, the logging worker's isolation) imports that
part alone, not the machinery of a judge call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replyguard._public import lazy_package

if TYPE_CHECKING:
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

_LAZY = {
    "BaseJudge": "_base",
    "LiteLLMJudge": "_fallbacks",
    **dict.fromkeys(["VERDICT_FORMAT", "Judge", "JudgeReply", "verdict_format"], "_protocol"),
}
_LAZY.update({name: "_litellm" for name in __all__ if name not in _LAZY})


__getattr__, __dir__ = lazy_package(__name__, globals(), _LAZY)
