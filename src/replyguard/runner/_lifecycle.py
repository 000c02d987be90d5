"""What a ``Verifier`` opens and closes: its judges (through their lifecycle, ``BaseJudge``),
its shared state's clients, its ``run_sync`` loop, its hook threads and its agents' pool; and
the event loops its async API runs on (``run_sync`` may hand turns to them, and the shared
state's clients there close as they shut down)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from replyguard._loop_ends import LoopEnds
from replyguard.judge._base import BaseJudge
from replyguard.runner._hooks import Hooks
from replyguard.runner._preload import prepare_turn
from replyguard.runner._sync import SyncLoop
from replyguard.runner._threads import ThreadPool

if TYPE_CHECKING:  # loaded when a config asks for it: most verifiers need none
    from replyguard.state import SharedState


class Lifecycle:
    """Warm-up and closing of one verifier's parts (see the module doc)."""

    __slots__ = ("_hooks", "_judges", "_loop_ends", "_pool", "_state", "sync")

    def __init__(
        self,
        judges: tuple[BaseJudge, ...],
        state: SharedState | None,
        hooks: Hooks,
        pool: ThreadPool,
    ) -> None:
        """``judges``: the verifier's judge and every judge its profiles hold, each once."""
        self._judges = judges
        self._state = state
        self._hooks = hooks
        self._pool = pool
        self.sync = SyncLoop(self._close_loop_clients)
        """The loop ``run_sync`` runs turns on when no host loop takes them."""
        self._loop_ends = LoopEnds(state.aclose) if state is not None else None

    def entered(self, loop: asyncio.AbstractEventLoop) -> None:
        """The async API runs on ``loop``: ``run_sync`` may hand turns to it, and the shared
        state's clients there close as it shuts down."""
        self.sync.note_host(loop)
        if self._loop_ends is not None:
            self._loop_ends.watch(loop)

    async def warmup(self) -> None:
        """The judges' ``warmup``, the tokenizer, the shared state's connection."""
        from replyguard.context import _tokens as tokens

        await asyncio.to_thread(prepare_turn)
        for judge in self._judges:
            await judge.warmup()
        await asyncio.to_thread(tokens.encoding)
        if self._state is not None:
            await self._state.warmup()

    async def aclose(self) -> None:
        """The judges' and the shared state's clients of the running loop, the ``run_sync``
        loop, the idle hook threads and the agents' pool."""
        await self._close_loop_clients()
        await asyncio.to_thread(self.sync.close)
        self._hooks.close()
        self._pool.close()

    def close(self) -> None:
        """What closes without an event loop: the judges' (the Router), the ``run_sync`` loop
        with its clients, the hook threads and the agents' pool."""
        for judge in self._judges:
            judge.close()
        self.sync.close()
        self._hooks.close()
        self._pool.close()

    async def _close_loop_clients(self) -> None:
        """Close the judges' and the shared state's clients of the running loop."""
        for judge in self._judges:
            await judge.aclose()
        if self._state is not None:
            await self._state.aclose()
