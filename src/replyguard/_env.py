"""Offline-friendly defaults for litellm and tiktoken, set only where the host set nothing.

- ``LITELLM_LOCAL_MODEL_COST_MAP``: use litellm's bundled price map instead of downloading one.
- ``LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS``: use litellm's bundled Anthropic beta-header table.
- ``TIKTOKEN_CACHE_DIR``: litellm's wheel ships the ``o200k_base`` and ``cl100k_base``
  encodings; pointing tiktoken there lets it count tokens without a download.

Neither import is performed here: litellm is located with ``importlib.util.find_spec``.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path


def _litellm_tokenizer_dir() -> str | None:
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "litellm_core_utils" / "tokenizers"
        if candidate.is_dir():
            return str(candidate)
    return None


def set_env_defaults() -> None:
    """Set the two variables when unset; never override the host's choice."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # Without it, litellm downloads Anthropic's beta-header table on the first call that asks
    # for a response format.
    os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        directory = _litellm_tokenizer_dir()
        if directory is not None:
            os.environ["TIKTOKEN_CACHE_DIR"] = directory
