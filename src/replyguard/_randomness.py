"""Random tokens (the judge prompt's section code, turn ids) from the operating system's
CSPRNG, drawn in batches.

``os.urandom`` releases the GIL around its system call, and taking it back waits for whichever
thread holds it then, up to the interpreter's switch interval (5 ms). In a burst of turns,
with litellm's worker threads building requests, each call waited about 0.8 ms. One call now
draws ``_BATCH`` bytes, which serve hundreds of tokens; every byte is handed out once, and a
forked child starts with none of its parent's.
"""

from __future__ import annotations

import os
import threading

_BATCH = 4096
_lock = threading.Lock()
_pool = bytearray()


def _forget() -> None:
    del _pool[:]


os.register_at_fork(after_in_child=_forget)


def token_bytes(count: int) -> bytes:
    """``count`` random bytes, never handed out before."""
    with _lock:
        if len(_pool) < count:
            _pool[:] = os.urandom(max(_BATCH, count))
        taken = bytes(_pool[-count:])
        del _pool[-count:]
    return taken


def token_hex(count: int) -> str:
    """``count`` random bytes as ``2 * count`` hex digits."""
    return token_bytes(count).hex()
