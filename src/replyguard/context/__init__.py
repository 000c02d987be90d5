"""The judge prompt: a token-budgeted, nonce-fenced rendering of the turn and the reply.

Also the screens on the text it renders: hidden characters made visible, the review's section
code masked, and replies that address the judge flagged.

Every name loads its module on first use (``replyguard.context.build_judge_prompt``): a
module of another folder that needs one part (the prompt's vocabulary, the screen) imports
that part alone, and a turn that its checks decide never loads the prompt build.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replyguard._public import lazy_package

if TYPE_CHECKING:
    from replyguard.context._build import build_judge_prompt
    from replyguard.context._fitting import VIEW_EDGE, reply_in_view
    from replyguard.context._prompt import (
        BUILT_IN_CATEGORIES,
        DEFAULT_RUBRIC,
        FEEDBACK_CAP,
        HEARTBEAT_MIN_CAP,
        HISTORY_MESSAGE_CAP,
        MESSAGE_OVERHEAD,
        METADATA_CAP,
        REPLY_FLOOR,
        TOOL_LEDGER_ROWS,
        USER_FLOOR,
        ContextLimits,
        JudgePrompt,
        Redact,
        Rubric,
        RulesSource,
        new_nonce,
        system_prompt,
    )
    from replyguard.context._sections import render_message, render_metadata

__all__ = [
    "BUILT_IN_CATEGORIES",
    "DEFAULT_RUBRIC",
    "FEEDBACK_CAP",
    "HEARTBEAT_MIN_CAP",
    "HISTORY_MESSAGE_CAP",
    "MESSAGE_OVERHEAD",
    "METADATA_CAP",
    "REPLY_FLOOR",
    "TOOL_LEDGER_ROWS",
    "USER_FLOOR",
    "VIEW_EDGE",
    "ContextLimits",
    "JudgePrompt",
    "Redact",
    "Rubric",
    "RulesSource",
    "build_judge_prompt",
    "new_nonce",
    "render_message",
    "render_metadata",
    "reply_in_view",
    "system_prompt",
]

_LAZY = {
    "build_judge_prompt": "_build",
    "VIEW_EDGE": "_fitting",
    "reply_in_view": "_fitting",
    "render_message": "_sections",
    "render_metadata": "_sections",
}
_LAZY.update({name: "_prompt" for name in __all__ if name not in _LAZY})


__getattr__, __dir__ = lazy_package(__name__, globals(), _LAZY)
