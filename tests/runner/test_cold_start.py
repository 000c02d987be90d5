"""A fresh process: concurrent first turns all wait for litellm's one import, none fail open;
building a verifier starts that import (and the tokenizer's load) in a background thread."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from support.provider_server import ProviderServer, Step
    from replyguard import Turn, Verifier, VerifierConfig

    async def main(url):
        assert "litellm" not in sys.modules
        config = VerifierConfig(
            enabled=True, verify_all=True, model="openai/gpt-4o-mini", api_base=url,
            api_key="sk-test-cold-start-0000000000", agent_model="anthropic/claude-sonnet-4-5",
            timeout_seconds=5.0,
        )
        verifier = Verifier(config)
        async def turn(i):
            await asyncio.sleep(i * 0.05)  # staggered: later turns arrive mid-import
            return await verifier.run(lambda m: f"reply {i}", Turn(user_message=f"q{i}"))
        outcomes = await asyncio.gather(*(turn(i) for i in range(10)))
        await verifier.aclose()
        print(sorted({o.status.value for o in outcomes}))

    with ProviderServer(default=Step(text="PASS")) as server:
        asyncio.run(main(server.url))
    """
)


def test_concurrent_first_turns_in_a_fresh_process_all_reach_the_judge() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=TESTS,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "['passed']"


PRELOAD = textwrap.dedent(
    """
    import sys, threading, time
    import importlib.abc
    from replyguard import Verifier, VerifierConfig
    from replyguard.testing import ScriptedJudge

    importers = {{}}

    class Watch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name in ("litellm", "tiktoken"):
                importers.setdefault(name, threading.current_thread().name)
            return None

    sys.meta_path.insert(0, Watch())
    config = VerifierConfig(model="openai/gpt-4o-mini", agent_model="anthropic/claude-sonnet-4-5")
    {build}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (len(importers) < {expected} or (
        "litellm" in importers and not hasattr(sys.modules.get("litellm"), "acompletion")
    )):
        time.sleep(0.05)
    time.sleep(0.2)
    print(sorted(importers.items()), threading.current_thread().name)
    """
)


def preloaded(build: str, expected: int) -> str:
    script = PRELOAD.format(build=build, expected=expected)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip()


def test_building_a_verifier_loads_litellm_and_the_tokenizer_in_a_background_thread() -> None:
    assert preloaded("Verifier(config); Verifier(config)", 2) == (
        "[('litellm', 'replyguard-preload'), ('tiktoken', 'replyguard-preload')] MainThread"
    )


def test_a_verifier_with_its_own_judge_preloads_the_tokenizer_only() -> None:
    assert preloaded("Verifier(config, judge=ScriptedJudge([]))", 1) == (
        "[('tiktoken', 'replyguard-preload')] MainThread"
    )


def test_preload_false_loads_nothing_until_asked() -> None:
    assert preloaded("Verifier(config, preload=False)", 0) == "[] MainThread"


def test_the_preload_starts_once_per_process() -> None:
    script = (
        "from replyguard.runner._preload import start_preload as s; "
        "print(s(litellm=False), s(litellm=False), s(litellm=True), s(litellm=True))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.split() == ["True", "False", "True", "False"]


FIRST_CALL = textwrap.dedent(
    """
    import asyncio, importlib.abc, sys, threading
    from support.provider_server import ANTHROPIC, OPENAI, ProviderServer, Step
    from replyguard import Turn, Verifier, VerifierConfig

    on_the_loop = []

    class Watch(importlib.abc.MetaPathFinder):
        watching = False

        def find_spec(self, name, path, target=None):
            if Watch.watching and threading.current_thread() is threading.main_thread():
                on_the_loop.append(name)
            return None

    sys.meta_path.insert(0, Watch())
    wire = {{"openai": OPENAI, "anthropic": ANTHROPIC}}["{wire}"]

    async def main(url):
        config = VerifierConfig(
            enabled=True, verify_all=True, model=wire.judge_model, api_base=url,
            api_key="sk-test-cold-start-0000000000", agent_model=wire.agent_model,
            timeout_seconds=10.0,
        )
        verifier = Verifier(config)
        await verifier.warmup()
        Watch.watching = True
        outcome = await verifier.run(lambda m: "Done: the reply.", Turn(user_message="q"))
        Watch.watching = False
        await verifier.aclose()
        print(outcome.status.value, sorted(n for n in on_the_loop if n.startswith("litellm")))

    with ProviderServer(default=Step(text="PASS")) as server:
        asyncio.run(main(server.url))
    """
)


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_the_first_judge_call_after_warmup_imports_nothing_of_litellm_on_the_event_loop(
    wire: str,
) -> None:
    """litellm imports parts of itself lazily on its first call (its logging callback manager
    alone took 0.4 s), on the thread that calls: the event loop, where every turn then stalls
    and no deadline can fire. ``warmup()`` (and the background preload) import them first."""
    result = subprocess.run(
        [sys.executable, "-c", FIRST_CALL.format(wire=wire)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=TESTS,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "passed []"
