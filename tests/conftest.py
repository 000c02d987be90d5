"""Shared fixtures: configs, the loopback provider, respx switches, and client cleanup."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

import replyguard  # noqa: F401 - sets the offline env defaults before litellm is imported
from provider_server import ProviderServer
from replyguard import VerifierConfig

JUDGE_MODEL = "anthropic/claude-sonnet-4-5"
AGENT_MODEL = "openai/gpt-4o"
API_KEY = "sk-test-SECRETKEY-0123456789abcdef"


@pytest.fixture(autouse=True)
async def _close_litellm_clients() -> AsyncIterator[None]:
    """litellm caches HTTP clients per loop; close them so no socket outlives its test."""
    yield
    litellm = sys.modules.get("litellm")
    if litellm is not None:
        await litellm.close_litellm_async_clients()


@pytest.fixture
def make_config() -> Callable[..., VerifierConfig]:
    """Build a config from camelCase keys on top of an enabled, cross-family default."""

    def build(**keys: Any) -> VerifierConfig:
        data: dict[str, Any] = {"enabled": True, "model": JUDGE_MODEL, "agentModel": AGENT_MODEL}
        data.update(keys)
        return VerifierConfig.from_dict(data)

    return build


@pytest.fixture
def provider() -> Iterator[ProviderServer]:
    """A loopback server playing the provider; push ``Step`` values to script it."""
    with ProviderServer() as server:
        yield server


async def _reset_litellm_clients() -> None:
    import litellm

    await litellm.close_litellm_async_clients()
    litellm.in_memory_llm_clients_cache.flush_cache()


@pytest.fixture
async def respx_litellm() -> AsyncIterator[None]:
    """Route litellm through httpx so respx can see its requests (clients made anew)."""
    import litellm

    before = litellm.disable_aiohttp_transport
    await _reset_litellm_clients()
    litellm.disable_aiohttp_transport = True
    try:
        yield
    finally:
        await _reset_litellm_clients()
        litellm.disable_aiohttp_transport = before


@pytest.fixture
def replyguard_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Every record of the ``replyguard`` logger, DEBUG included."""
    caplog.set_level(logging.DEBUG, logger="replyguard")
    return caplog
