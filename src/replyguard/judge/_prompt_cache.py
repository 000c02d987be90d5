"""Anthropic prompt caching of the judge's rubric.

The rubric (the system message) comes first and is identical on every call. When the judge is
an Anthropic model and the rubric is at least as long as the smallest prefix that model caches,
the system message is sent as one text part marked ``cache_control: {"type": "ephemeral"}``;
later calls within the cache's lifetime then pay the cached-input price for it.

The minimum is litellm's ``prompt_cache_min_tokens`` for the model when its bundled model map
has one, else 2048 tokens for Haiku models and 1024 for the others (Sonnet, Opus); it is looked
up once per model (the first look-up parses litellm's bundled map, about 50 ms: the preload and
``warmup()`` do it off the event loop). The rubric is counted with ``o200k_base``, which gives
fewer tokens than Anthropic's tokenizer for English text: a rubric near the minimum is left
unmarked rather than marked in vain. A rubric with fewer UTF-8 bytes than the minimum is too
short without counting; one that needs counting before the tokenizer is loaded (by the preload,
after the first turn) is sent unmarked that time, as counting it would load the tokenizer on the
event loop: caching saves cost, never changes a verdict.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Iterable, Sequence
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


class _Undecided(Exception):
    """Deciding needs the tokenizer, which is not loaded yet."""


_minimums: dict[str, int] = {}  # by model, as litellm's model map gives them


def min_cacheable_tokens(model: str) -> int:
    """The smallest prefix ``model`` caches, in tokens."""
    found = _minimums.get(model)
    if found is not None:
        return found
    litellm = sys.modules.get("litellm")
    if litellm is None:  # the name decides, until litellm's map can be read
        return _HAIKU_MIN_TOKENS if "haiku" in model.lower() else _DEFAULT_MIN_TOKENS
    try:
        known = litellm.get_model_info(model=model).get("prompt_cache_min_tokens")
    except Exception:  # not in the model map: the name decides
        known = None
    # The model map gives an int or a float (1024.0): either is a count of tokens.
    if isinstance(known, int | float) and not isinstance(known, bool) and known > 0:
        found = math.ceil(known)
    else:
        found = _HAIKU_MIN_TOKENS if "haiku" in model.lower() else _DEFAULT_MIN_TOKENS
    _minimums[model] = found
    return found


def look_up(models: Iterable[str]) -> None:
    """What a first judgement would look up for ``models``, done now (off the event loop):
    each Anthropic model's minimum."""
    for model in models:
        if _cached_route(model):
            min_cacheable_tokens(model)


def _cached_route(model: str) -> bool:
    """Whether litellm speaks Anthropic's messages format, with its caching, to ``model``."""
    if model_family(model) != "anthropic":
        return False
    route = _route(model)
    return route is None or route in _ANTHROPIC_ROUTES  # not an OpenAI-compatible proxy's


@functools.lru_cache(maxsize=64)
def _worth_caching(model: str, system: str) -> bool:
    """Raises ``_Undecided`` (which is not cached) when only a count can tell."""
    if not _cached_route(model):
        return False
    minimum = min_cacheable_tokens(model)
    if tokens.size_bound(system) < minimum:
        return False  # fewer bytes than the minimum: fewer tokens too
    if not tokens.loaded():
        raise _Undecided
    return tokens.count(system) >= minimum


def with_cached_system(
    models: Sequence[str], messages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``messages`` with the leading system message marked for caching when that pays off for
    every one of ``models`` (one model, or a router group's deployments; a new list, the given
    one is not changed)."""
    if not messages or messages[0].get("role") != "system":
        return messages
    system = messages[0].get("content")
    if not isinstance(system, str):
        return messages
    try:
        if not all(_worth_caching(m, system) for m in models):
            return messages
    except _Undecided:  # counting would load the tokenizer here, on the event loop
        return messages
    part = {"type": "text", "text": system, "cache_control": dict(CACHE_CONTROL)}
    return [{"role": "system", "content": [part]}, *messages[1:]]
