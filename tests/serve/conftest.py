"""One ``replyguard serve`` process for the package's client and endpoint tests (its start
takes seconds: litellm's import and warm-up), with a loopback provider playing the upstream
and the judge; each test scripts the provider afresh."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.provider_server import ProviderServer
from support.serve_process import KEYS, Served, TwoScripts, provider, served_config, serving


@pytest.fixture(scope="package")
def loopback() -> Iterator[tuple[ProviderServer, TwoScripts]]:
    with provider() as pair:
        yield pair


@pytest.fixture(scope="package")
def served(
    loopback: tuple[ProviderServer, TwoScripts], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    server, _ = loopback
    config = served_config(server.url)
    config["serve"]["maxBodyBytes"] = 64 * 1024
    with serving(config, tmp_path_factory.mktemp("serve")) as running:
        assert running.ready_line.strip() == f"replyguard serve: ready on {running.url} (1 worker)"
        yield running
    for key in KEYS:  # nothing the server wrote names a key
        assert key not in running.stderr


@pytest.fixture
def scripts(loopback: tuple[ProviderServer, TwoScripts]) -> TwoScripts:
    server, two = loopback
    with two.lock:
        two.agent.clear()
        two.judge.clear()
    server.seen.clear()
    return two


@pytest.fixture
def provider_server(loopback: tuple[ProviderServer, TwoScripts]) -> ProviderServer:
    return loopback[0]
