"""The tokenizer (tiktoken's ``o200k_base``), loaded once per process, and counting with it.

User content is counted with ``encode_ordinary`` so text such as ``<|endoftext|>`` is counted
as text, never refused. The cheap proof that a text fits is its size, no tokenizing: a text
never has more tokens than UTF-8 bytes, and never more bytes than 4 per character. Characters
alone are not a bound (one emoji can be several tokens).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from typing import Any

from replyguard._forks import loading

ENCODING_NAME = "o200k_base"

_load_lock = threading.Lock()
_loaded: list[Any] = []  # the encoding, once loaded
# Set where loading the encoding would block what must not wait (the event loop's own
# judge-prompt build): ``encoding()`` then raises ``NotLoaded`` instead of loading it.
_no_load: contextvars.ContextVar[bool] = contextvars.ContextVar("replyguard_no_load", default=False)


class NotLoaded(Exception):
    """The encoding is needed but not loaded, where loading it is not allowed
    (``without_loading``)."""


def encoding() -> Any:
    """The ``o200k_base`` encoding, loaded once per process (about half a second of CPU,
    most of it holding the GIL); a thread that asks while another loads it waits for that
    load."""
    if _loaded:
        return _loaded[0]
    if _no_load.get():
        raise NotLoaded(ENCODING_NAME)
    with loading(), _load_lock:
        if not _loaded:
            import tiktoken

            _loaded.append(tiktoken.get_encoding(ENCODING_NAME))
    return _loaded[0]


def loaded() -> bool:
    """Whether ``encoding()`` has already loaded the encoding (so calling it cannot block)."""
    return bool(_loaded)


@contextlib.contextmanager
def without_loading() -> Iterator[None]:
    """Within this block, ``encoding()`` raises ``NotLoaded`` rather than load the encoding:
    for work that needs tokens only sometimes, done where a load must not happen."""
    token = _no_load.set(True)
    try:
        yield
    finally:
        _no_load.reset(token)


def count(text: str) -> int:
    """The exact number of tokens in ``text``."""
    if not text:
        return 0
    return len(encoding().encode_ordinary(text))


def size_bound(text: str) -> int:
    """An upper bound on the tokens of ``text`` without tokenizing it: its UTF-8 length."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def surely_within(text: str, limit: int) -> bool:
    """True when ``text`` provably has at most ``limit`` tokens without tokenizing it."""
    return len(text) * 4 <= limit or (len(text) <= limit and size_bound(text) <= limit)
