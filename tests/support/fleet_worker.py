"""The instances of a fleet, each its own OS process (``support.fleet`` drives them).

Run as ``fleet_worker.py R,W [R,W ...]``: this process imports litellm and the tokenizer
once, then forks one instance per pair of inherited pipe descriptors (so the instances start
at once, without importing litellm again each). An instance writes ``ready`` on its ``W``,
then reads one JSON command a line from its ``R``: ``{"config": {...}, "turns": N,
"concurrency": C, "agentId": "..."}`` and answers one JSON line: each judgement's ``reason``,
``cost`` and ``sharedState``. It keeps a verifier per config, so its own state lasts from one
command to the next, as in a real process; it exits when ``R`` closes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from typing import Any, TextIO

from replyguard import Turn, Verifier, VerifierConfig


async def _judgements(verifier: Verifier, command: dict[str, Any]) -> list[dict[str, Any]]:
    gate = asyncio.Semaphore(int(command.get("concurrency", 1)))
    turn = Turn(user_message="Is the report done?", agent_id=command.get("agentId"))

    async def one() -> dict[str, Any]:
        async with gate:
            verdict = await verifier.verify(turn, "Done: the report is in reports/q3.pdf.")
        reason = verdict.fail_open_reason.value if verdict.fail_open_reason else None
        return {"reason": reason, "cost": verdict.cost_usd, "sharedState": verdict.shared_state}

    return list(await asyncio.gather(*(one() for _ in range(int(command["turns"])))))


async def _serve(commands: TextIO, answers: TextIO) -> None:
    verifiers: dict[str, Verifier] = {}
    loop = asyncio.get_running_loop()
    answers.write("ready\n")
    answers.flush()
    while line := await loop.run_in_executor(None, commands.readline):
        command = json.loads(line)
        key = json.dumps(command["config"], sort_keys=True)
        verifier = verifiers.get(key)
        if verifier is None:
            config = VerifierConfig.from_dict(command["config"])
            verifier = verifiers[key] = Verifier(config, preload=False)
            await verifier.warmup()
        results = await _judgements(verifier, command)
        answers.write(json.dumps({"verdicts": results}) + "\n")
        answers.flush()
    for verifier in verifiers.values():
        await verifier.aclose()


def main(pairs: list[tuple[int, int]]) -> None:
    from replyguard.context import _tokens
    from replyguard.judge._litellm import load_litellm

    logging.basicConfig(level=logging.WARNING, format="instance %(process)d: %(message)s")
    load_litellm()
    _tokens.encoding()
    children = []
    for index, (read, write) in enumerate(pairs):
        pid = os.fork()
        if pid == 0:
            for other, (r, w) in enumerate(pairs):
                if other != index:
                    os.close(r)
                    os.close(w)
            with os.fdopen(read) as commands, os.fdopen(write, "w") as answers:
                asyncio.run(_serve(commands, answers))
            os._exit(0)
        children.append(pid)
    for read, write in pairs:
        os.close(read)
        os.close(write)
    for pid in children:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main([tuple(int(fd) for fd in pair.split(",")) for pair in sys.argv[1:]])  # type: ignore[misc]
