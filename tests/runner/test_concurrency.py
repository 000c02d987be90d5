"""1,000 concurrent turns on one Verifier, random judge delays and verdicts: no cross-talk."""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
from typing import Any

from replyguard import Status, Turn, Verifier
from replyguard.context import JudgePrompt
from replyguard.testing import ScriptedJudge

TURNS = 1000


def _section(prompt: JudgePrompt, name: str) -> str:
    opening, closing = f"<{name}-{prompt.nonce}>\n", f"\n</{name}-{prompt.nonce}>"
    return prompt.user.split(opening, 1)[1].split(closing, 1)[0]


def _fails_first(number: int) -> bool:
    return number % 3 == 0


async def _answer(prompt: JudgePrompt) -> str:
    number = int(_section(prompt, "user_request").split("#")[1])
    reply = _section(prompt, "assistant_reply")
    await asyncio.sleep(random.Random(number).random() / 100)  # 0-10 ms, different per turn
    if reply != f"answer #{number}" and not reply.endswith("revised"):
        return f"FAIL [goal_missed]: that reply belongs to another turn: {reply}"
    if _fails_first(number) and not reply.endswith("revised"):
        return f"FAIL [incomplete]: revise turn {number}"
    return "PASS"


def _agent(number: int) -> Any:
    async def agent(messages: list[dict[str, Any]]) -> str:
        await asyncio.sleep(random.Random(-number).random() / 200)
        return f"answer #{number} revised" if len(messages) > 1 else f"answer #{number}"

    return agent


async def test_a_thousand_concurrent_turns_each_get_their_own_outcome(make_config: Any) -> None:
    script = [_answer] * (TURNS + sum(_fails_first(n) for n in range(TURNS)))
    verifier = Verifier(make_config(verifyAll=True, checks=[]), judge=ScriptedJudge(script))
    outcomes = await asyncio.gather(
        *(
            verifier.run(_agent(n), Turn(user_message=f"request #{n}", id=str(n)))
            for n in range(TURNS)
        )
    )
    for number, outcome in enumerate(outcomes):
        revised = _fails_first(number)
        expected = f"answer #{number} revised" if revised else f"answer #{number}"
        assert (outcome.status, outcome.response) == (Status.PASSED, expected)
        assert len(outcome.attempts) == (2 if revised else 1)


def test_run_sync_from_eight_threads_keeps_turns_apart(make_config: Any) -> None:
    per_thread = 25
    script = [_answer] * (8 * per_thread * 2)
    verifier = Verifier(make_config(verifyAll=True, checks=[]), judge=ScriptedJudge(script))

    def worker(thread: int) -> list[tuple[int, str]]:
        results = []
        for i in range(per_thread):
            number = thread * per_thread + i
            turn = Turn(user_message=f"request #{number}", id=str(number))
            results.append((number, verifier.run_sync(_agent(number), turn).response))
        return results

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            done = [pair for chunk in pool.map(worker, range(8)) for pair in chunk]
    finally:
        verifier.close()
    assert len(done) == 8 * per_thread
    for number, response in done:
        revised = _fails_first(number)
        assert response == (f"answer #{number} revised" if revised else f"answer #{number}")
