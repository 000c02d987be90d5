"""The example's chat page in headless Chromium, against the app served by uvicorn.

The page is driven through the DevTools protocol (``support.chromium``): the test types a
message, and the agent waits at each step until the page shows what it should, so each
assertion is about what the user sees at that moment: the first words while the agent is still
writing, an empty reply with a note once the judge's FAIL retracted it, then the retry's text.
The judge is the shipped scripted judge. In ``"buffer"`` mode the page shows each phase
(``progress`` events) in the reply's place, and no text of a reply before the one that passed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from replyguard import Verifier, VerifierConfig
from replyguard.testing import ScriptedJudge
from support.chromium import CHROMIUM, Chromium
from support.example_app import load_example, serving

pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (Debian: apt-get install chromium)",
)

example = load_example()

QUESTION = "Plan a three-day trip to Lisbon."
FIRST = "Done: day 1 Alfama, "
SHORT = FIRST + "day 2 Belém."
FIXED = 'Done: day 1 Alfama, day 2 Belém, day 3 <img src=x onerror="document.title=1">Sintra.'
"""The retry's text: markup in a reply is text on the page, never elements."""
WAIT = 10.0
CONFIG = {
    "enabled": True,
    "verifyAll": True,
    "model": "anthropic/claude-sonnet-4-5",
    "agentModel": "openai/gpt-4o",
    "streaming": {"mode": "release", "holdBackChars": 0},
}

REPLY = "document.querySelector('.assistant')"
TEXT = f"{REPLY}.querySelector('.text').textContent"
NOTE = f"{REPLY}.querySelector('.note')"


class Writer:
    """Two attempts; each waits for the page to show what came before it."""

    def __init__(self) -> None:
        self.first_shown = asyncio.Event()
        self.retract_shown = asyncio.Event()

    async def __call__(self, messages: list[dict[str, Any]]) -> AsyncIterator[str]:
        async with asyncio.timeout(WAIT):
            if "third day" not in str(messages[-1]["content"]):
                yield FIRST
                await self.first_shown.wait()
                yield "day 2 Belém."
            else:
                await self.retract_shown.wait()
                yield "Done: day 1 Alfama, day 2 Belém, "
                yield FIXED.removeprefix("Done: day 1 Alfama, day 2 Belém, ")


async def test_the_page_streams_a_reply_and_replaces_a_retracted_one(tmp_path: Path) -> None:
    judge = ScriptedJudge(["Two days only.\nFAIL [incomplete]: add the third day.", "PASS"])
    writer = Writer()
    verifier = Verifier(VerifierConfig.from_dict(CONFIG), judge=judge)
    app = example.create_app(verifier=verifier, agent=writer, streaming_agent=writer)
    async with serving(app) as url, Chromium(width=900, height=640) as browser:
        page = await browser.open(url + "/")
        await page.send("Runtime.evaluate", expression="document.getElementById('message').focus()")
        await page.send("Input.insertText", text=QUESTION)
        await page.evaluate("document.getElementById('send').click()")

        # The first words are on the page while the agent still waits to write the rest.
        await page.wait_for(f"{TEXT} === {json.dumps(FIRST)}", seconds=WAIT)
        assert await page.evaluate(f"{REPLY}.classList.contains('streaming')")
        (tmp_path / "chat-streaming.png").write_bytes(await page.screenshot())
        writer.first_shown.set()

        # The judge's FAIL withdraws the reply: its text is gone, a note says why.
        await page.wait_for(f"{NOTE} !== null && {TEXT} === ''", seconds=WAIT)
        assert not await page.evaluate("document.body.innerText.includes('day 2 Belém.')")
        (tmp_path / "chat-withdrawn.png").write_bytes(await page.screenshot())
        writer.retract_shown.set()

        # The retry's text takes its place; the note stays, the status is shown.
        await page.wait_for(
            f"{REPLY}.dataset.status === 'passed' && !document.getElementById('send').disabled",
            seconds=WAIT,
        )
        shown = await page.evaluate(
            f"""({{
                text: {TEXT},
                note: {NOTE}.innerText,
                reason: {NOTE}.dataset.reason,
                noteHeight: {NOTE}.getBoundingClientRect().height,
                status: {REPLY}.querySelector('.status').innerText,
                user: document.querySelector('.user').innerText,
                replies: document.querySelectorAll('.assistant').length,
                elements: {REPLY}.querySelectorAll('img').length,
                streaming: {REPLY}.classList.contains('streaming'),
                sendEnabled: !document.getElementById('send').disabled,
            }})""",
        )
        png = await page.screenshot()
    (tmp_path / "chat-retracted.png").write_bytes(png)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert shown == {
        "text": FIXED,
        "note": "A reply was withdrawn (incomplete) and replaced.",
        "reason": "incomplete",
        "noteHeight": shown["noteHeight"],
        "status": "passed after 2 attempts",
        "user": QUESTION,
        "replies": 1,
        "elements": 0,
        "streaming": False,
        "sendEnabled": True,
    }
    assert shown["noteHeight"] > 0  # the note is laid out, not hidden
    judge.assert_exhausted()


PHASE = f"{REPLY}.querySelector('.phase')"
SAYS = f"({PHASE} && {PHASE}.textContent)"


async def test_buffer_mode_shows_each_phase_while_the_reply_is_written_and_judged(
    tmp_path: Path,
) -> None:
    """In ``"buffer"`` nothing of a reply shows before it passed; the page says what happens
    instead. The agent writes, the judge answers and the retry starts only once the page shows
    the phase before it."""
    page_ready: dict[str, asyncio.Event] = {}

    def when_shown(step: str, answer: str) -> Any:
        page_ready[step] = asyncio.Event()

        async def answer_later(prompt: Any) -> str:
            async with asyncio.timeout(WAIT):
                await page_ready[step].wait()
            return answer

        return answer_later

    judge = ScriptedJudge(
        [
            when_shown("checking 1", "Two days only.\nFAIL [incomplete]: add the third day."),
            when_shown("checking 2", "PASS"),
        ]
    )
    page_ready["writing"], page_ready["revising"] = asyncio.Event(), asyncio.Event()

    async def writer(messages: list[dict[str, Any]]) -> AsyncIterator[str]:
        if "third day" in str(messages[-1]["content"]):
            async with asyncio.timeout(WAIT):
                await page_ready["revising"].wait()
            yield FIXED
        else:
            async with asyncio.timeout(WAIT):
                await page_ready["writing"].wait()
            yield SHORT

    config = CONFIG | {"streaming": {"mode": "buffer"}}
    verifier = Verifier(VerifierConfig.from_dict(config), judge=judge)
    app = example.create_app(verifier=verifier, agent=writer, streaming_agent=writer)
    seen: list[str] = []
    async with serving(app) as url, Chromium(width=900, height=640) as browser:
        page = await browser.open(url + "/")
        await page.send("Runtime.evaluate", expression="document.getElementById('message').focus()")
        await page.send("Input.insertText", text=QUESTION)
        await page.evaluate("document.getElementById('send').click()")
        for step, says in (
            ("writing", "Writing…"),
            ("checking 1", "Checking the reply…"),
            ("revising", "Revising after feedback…"),
            ("checking 2", "Checking the revised reply…"),
        ):
            await page.wait_for(f"{SAYS} === {json.dumps(says)}", seconds=WAIT)
            seen.append(await page.evaluate(f"{REPLY}.innerText"))
            assert await page.evaluate(f"{TEXT} === ''")  # no text of any reply yet
            if step == "checking 1":
                (tmp_path / "chat-checking.png").write_bytes(await page.screenshot())
            page_ready[step].set()
        await page.wait_for(f"{REPLY}.dataset.status === 'passed'", seconds=WAIT)
        shown = await page.evaluate(
            f"({{text: {TEXT}, phase: {PHASE}, dataPhase: {REPLY}.dataset.phase || null,"
            f" note: {NOTE}, status: {REPLY}.querySelector('.status').innerText}})"
        )
        (tmp_path / "chat-buffer-done.png").write_bytes(await page.screenshot())
    assert [line.strip() for line in seen] == [
        "Writing…",
        "Checking the reply…",
        "Revising after feedback…",
        "Checking the revised reply…",
    ]
    assert shown == {
        "text": FIXED,
        "phase": None,
        "dataPhase": None,
        "note": None,  # buffer mode never showed, so never withdrew, the first reply
        "status": "passed after 2 attempts",
    }
    judge.assert_exhausted()
