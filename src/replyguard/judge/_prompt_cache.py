"""Anthropic prompt caching of the judge's rubric.

The rubric (the system message) comes first and is identical on every call. When the judge is
an Anthropic model and the rubric is at least as long as the smallest prefix that model caches,
the system message is sent as one text part marked ``cache_control: {"type": "ephemeral"}``;
later calls within the cache's lifetime then pay the cached-input price for it.

The minimum is litellm's ``prompt_cache_min_tokens`` for the model when its bundled model map
has one, else 2048 tokens for Haiku models and 1024 for the others (Sonnet, Opus). The rubric
is counted with ``o200k_base``, which gives fewer tokens than Anthropic's tokenizer for English
text: a rubric near the minimum is left unmarked rather than marked in vain.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Sequence
from typing import Any

from replyguard._families import model_family
from replyguard.context import _tokens as tokens

CACHE_CONTROL = {"type": "ephemeral"}
# Routes on which litellm speaks Anthropic's messages format (a bare "claude-..." name too).
_ANTHROPIC_ROUTES = frozenset({"anthropic", "bedrock", "vertex_ai", "azure_ai"})
_HAIKU_MIN_TOKENS = 2048
_DEFAULT_MIN_TOKENS = 1024


def _route(model: str) -> str | None:
    return model.split("/", 1)[0].lower() if "/" in model else None


def min_cacheable_tokens(model: str) -> int:
    """The smallest prefix ``model`` caches, in tokens."""
    litellm = sys.modules.get("litellm")
    if litellm is not None:
        try:
            known = litellm.get_model_info(model=model).get("prompt_cache_min_tokens")
        except Exception:  # not in the model map: the name decides
            known = None
        # The model map gives an int or a float (1024.0): either is a count of tokens.
        if isinstance(known, int | float) and not isinstance(known, bool) and known > 0:
            return math.ceil(known)
    return _HAIKU_MIN_TOKENS if "haiku" in model.lower() else _DEFAULT_MIN_TOKENS


@functools.lru_cache(maxsize=64)
def _worth_caching(model: str, system: str) -> bool:
    if model_family(model) != "anthropic":
        return False
    route = _route(model)
    if route is not None and route not in _ANTHROPIC_ROUTES:
        return False  # an OpenAI-compatible proxy or another provider's route
    return tokens.count(system) >= min_cacheable_tokens(model)


def with_cached_system(
    models: Sequence[str], messages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``messages`` with the leading system message marked for caching when that pays off for
    every one of ``models`` (one model, or a router group's deployments; a new list, the given
    one is not changed)."""
    if not messages or messages[0].get("role") != "system":
        return messages
    system = messages[0].get("content")
    if not isinstance(system, str) or not all(_worth_caching(m, system) for m in models):
        return messages
    part = {"type": "text", "text": system, "cache_control": dict(CACHE_CONTROL)}
    return [{"role": "system", "content": [part]}, *messages[1:]]
