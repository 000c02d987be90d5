"""Random tokens come from the OS's CSPRNG in batches: each byte is handed out once, the
tokens of many threads never repeat, and a forked child never repeats its parent's."""

from __future__ import annotations

import concurrent.futures
import os
import uuid

import pytest

from replyguard import Turn
from replyguard._randomness import token_bytes, token_hex
from replyguard.context._prompt import new_nonce
from replyguard.runner._turn_scope import with_turn_id


def test_tokens_never_repeat_across_batches_and_threads() -> None:
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        drawn = list(pool.map(lambda _: token_hex(8), range(20_000)))  # many batches
    assert len(set(drawn)) == len(drawn)
    assert all(len(token) == 16 and int(token, 16) >= 0 for token in drawn)
    assert len(token_bytes(10_000)) == 10_000  # more than one batch at once


def test_nonces_and_turn_ids_are_fresh_each_time() -> None:
    nonces = {new_nonce() for _ in range(1_000)}
    assert len(nonces) == 1_000 and all(len(n) == 12 for n in nonces)
    ids = {with_turn_id(Turn(user_message="q")).id for _ in range(1_000)}
    assert len(ids) == 1_000
    one = next(iter(ids))
    assert one is not None and uuid.UUID(one.removeprefix("turn-")).version == 4


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_draws_none_of_its_parents_bytes() -> None:
    token_hex(1)  # the parent holds a batch
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        os.write(write, "".join(token_hex(8) for _ in range(64)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        childs = pipe.read()
    os.waitpid(pid, 0)
    parents = "".join(token_hex(8) for _ in range(64))
    child_tokens = {childs[i : i + 16] for i in range(0, len(childs), 16)}
    parent_tokens = {parents[i : i + 16] for i in range(0, len(parents), 16)}
    assert len(child_tokens) == 64 and not child_tokens & parent_tokens
