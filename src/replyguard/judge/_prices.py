"""What one judge call may cost, from litellm's price map: for spend limits, which hold an
estimate before the call (``replyguard.state._estimates``) and count the real cost after it.

A model's prices are looked up once per process (``litellm.get_model_info``); a model the map
does not know costs nothing here (and litellm prices its calls at nothing too).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from replyguard.judge._litellm import _loaded_litellm

__all__ = ["call_estimate", "surely_billed"]


@functools.cache
def _prices(model: str) -> tuple[float, float]:
    """USD per prompt token and per completion token (zero when unknown)."""
    litellm = _loaded_litellm()
    if litellm is None:
        return 0.0, 0.0
    try:
        info = litellm.get_model_info(model)
    except Exception:  # not in the map: unknown, not an error
        return 0.0, 0.0
    return float(info.get("input_cost_per_token") or 0.0), float(
        info.get("output_cost_per_token") or 0.0
    )


def _known(model: str) -> tuple[float, float]:
    # Not cached before litellm is loaded: the answer would stick at zero.
    if _loaded_litellm() is None:
        return 0.0, 0.0
    return _prices(model)


def call_estimate(models: Iterable[tuple[str, int]], prompt_tokens: int) -> float:
    """The most one call may cost: ``prompt_tokens`` in and each model's ``max_tokens`` out
    (``models``: each deployment model with its completion limit), the dearest of them."""
    dearest = 0.0
    for model, max_tokens in models:
        prompt, completion = _known(model)
        dearest = max(dearest, prompt * prompt_tokens + completion * max_tokens)
    return dearest


def surely_billed(models: Iterable[str], prompt_tokens: int, completion_tokens: int) -> float:
    """What a call of ``prompt_tokens`` in and ``completion_tokens`` out surely cost when any
    of ``models`` may have served it (a router group's deployments): the cheapest of them."""
    costs = [
        prompt * prompt_tokens + completion * completion_tokens
        for prompt, completion in map(_known, models)
    ]
    return min(costs, default=0.0)
