"""What ``replyguard serve`` adds to a turn over the bare upstream call.

    python benchmarks/serve.py [--samples N] [--clients N]

A loopback provider (tests/support/provider_server.py, answering at once) plays the upstream
(OpenAI wire) and the judge (Anthropic wire). Three ways to the same upstream are measured
side by side, one sample of each in turn, with the official ``openai`` SDK:

- the bare upstream call (the SDK straight to the provider);
- through ``replyguard serve`` with ``enabled: false`` (the server alone: HTTP, the wire, the
  turn's bookkeeping);
- through ``replyguard serve`` verifying every reply (plus one judge call through litellm).

Then a burst of concurrent clients against ``--workers 2``, and the same burst bare. Prints a
markdown table of medians, the ratio to the bare call and the milliseconds added per turn.
The servers are real processes; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import httpx
import openai

from support.serve_process import CLIENT_KEY, provider, served_config, serving

ASK = [{"role": "user", "content": "Write the weekly report."}]


def _timed(client: openai.OpenAI) -> float:
    started = time.perf_counter()
    client.chat.completions.create(model="gpt-4o", messages=ASK)  # type: ignore[arg-type]
    return (time.perf_counter() - started) * 1000


async def _burst(base_url: str, key: str, clients: int) -> list[float]:
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=0)
    async with (
        httpx.AsyncClient(limits=limits, timeout=120) as http,
        openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0, http_client=http) as c,
    ):

        async def one() -> float:
            started = time.perf_counter()
            await c.chat.completions.create(model="gpt-4o", messages=ASK)  # type: ignore[arg-type]
            return (time.perf_counter() - started) * 1000

        return await asyncio.gather(*(one() for _ in range(clients)))


def _row(name: str, samples: list[float], bare: float) -> str:
    median = statistics.median(samples)
    return (
        f"| {name} | {median:.2f} | {statistics.quantiles(samples, n=20)[18]:.2f} "
        f"| {median / bare:.2f}x | {median - bare:+.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--clients", type=int, default=200)
    args = parser.parse_args()
    with ExitStack() as stack:
        server, _ = stack.enter_context(provider())
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        for name in ("off", "on", "fleet"):
            (tmp / name).mkdir()
        config = served_config(server.url)
        off = stack.enter_context(serving({**config, "enabled": False}, tmp / "off"))
        on = stack.enter_context(serving(config, tmp / "on"))
        fleet = stack.enter_context(serving(config, tmp / "fleet", workers=2))
        clients = {
            "bare upstream call": openai.OpenAI(base_url=f"{server.url}/v1", api_key="sk-x"),
            "serve, enabled: false": openai.OpenAI(base_url=f"{off.url}/v1", api_key=CLIENT_KEY),
            "serve, verifying (one judge call)": openai.OpenAI(
                base_url=f"{on.url}/v1", api_key=CLIENT_KEY
            ),
        }
        samples: dict[str, list[float]] = {name: [] for name in clients}
        for client in clients.values():  # warm: connections, litellm's first call
            for _ in range(5):
                _timed(client)
        for _ in range(args.samples):
            for name, client in clients.items():
                samples[name].append(_timed(client))
        bare_burst = asyncio.run(_burst(f"{server.url}/v1", "sk-x", args.clients))
        asyncio.run(_burst(f"{fleet.url}/v1", CLIENT_KEY, 10))  # warm both workers
        fleet_burst = asyncio.run(_burst(f"{fleet.url}/v1", CLIENT_KEY, args.clients))
    bare = statistics.median(samples["bare upstream call"])
    print(f"\nreplyguard serve, {args.samples} sequential samples each (ms per turn)\n")
    print("| path | median | p95 | ratio to bare | added ms |")
    print("| --- | --- | --- | --- | --- |")
    for name, measured in samples.items():
        print(_row(name, measured, bare))
    burst_bare = statistics.median(bare_burst)
    print(f"\n{args.clients} concurrent clients (ms per turn, each from its own start)\n")
    print("| path | median | p95 | ratio to bare | added ms |")
    print("| --- | --- | --- | --- | --- |")
    print(_row("bare upstream call", bare_burst, burst_bare))
    print(_row("serve --workers 2, verifying", fleet_burst, burst_bare))


if __name__ == "__main__":
    main()
