"""Streaming agents that misbehave, shared by the streaming tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence


class HungClose:
    """An agent stream that yields ``pieces``, then waits forever for the next one; its
    ``aclose()`` waits forever too (a provider connection that never finishes closing)."""

    def __init__(self, pieces: Sequence[str]) -> None:
        self._pieces = list(pieces)
        self.closing = asyncio.Event()
        self.closed = False
        self._never = asyncio.Event()

    def __aiter__(self) -> HungClose:
        return self

    async def __anext__(self) -> str:
        if self._pieces:
            return self._pieces.pop(0)
        await self._never.wait()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self.closing.set()
        await self._never.wait()
        self.closed = True
