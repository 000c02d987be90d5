"""Loading what a first judgement needs, in the background, once per process.

A ``Verifier`` built with ``preload=True`` (the default) starts one daemon thread that loads
the tokenizer (``o200k_base``) and, when the verifier judges through litellm, imports litellm:
the seconds that would fall on the first judged turn run off the caller's thread and event
loop while the host goes on starting up, so that turn waits only for what is not done yet
(``Verifier.warmup()`` and the first judgement wait for the rest off the loop too). Each part
starts at most once per process, whatever number of verifiers is built. A fault here is
swallowed: the first judgement meets it again, and fails open.
"""

from __future__ import annotations

import contextlib
import threading

from replyguard.context import _tokens as tokens
from replyguard.judge._litellm import load_litellm

_lock = threading.Lock()
_started: set[str] = set()


def _load(parts: tuple[str, ...]) -> None:
    for part in parts:
        with contextlib.suppress(Exception):  # met again, and failed open, by a judgement
            if part == "tokenizer":
                tokens.encoding()
            else:
                load_litellm()


def start_preload(*, litellm: bool) -> bool:
    """Start loading the tokenizer (and litellm) in a daemon thread unless already started in
    this process; True when a thread was started."""
    wanted = ("tokenizer", "litellm") if litellm else ("tokenizer",)
    with _lock:
        parts = tuple(part for part in wanted if part not in _started)
        _started.update(parts)
    if not parts:
        return False
    threading.Thread(target=_load, args=(parts,), name="replyguard-preload", daemon=True).start()
    return True
