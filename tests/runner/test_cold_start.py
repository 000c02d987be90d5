"""A fresh process: concurrent first turns all wait for litellm's one import, none fail open."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

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
