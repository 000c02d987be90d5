"""The review page in headless Chromium: a reviewer works the queue with the keyboard alone.

Keys are sent as real key events through the DevTools protocol (``support.chromium``); the
page talks to the real server (in a thread), and each assertion is about what the reviewer
sees, then about the label file on disk.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support_review import entry, serving, write_ledger

from support.chromium import CHROMIUM, Chromium, Page

pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (Debian: apt-get install chromium)",
)

HOSTILE = 'Fine. <img src=x onerror="document.title=\'owned\'"><script>document.title="x"</script>'


async def press(page: Page, key: str) -> None:
    """One key, as a keyboard sends it (keyDown with its text, then keyUp)."""
    code = {"Escape": "Escape", "Enter": "Enter"}.get(key, f"Key{key.upper()}")
    text = "" if len(key) > 1 else key
    await page.send("Input.dispatchKeyEvent", type="keyDown", key=key, code=code, text=text)
    await page.send("Input.dispatchKeyEvent", type="keyUp", key=key, code=code)


def shows(element: str, text: str) -> str:
    return f"document.getElementById({element!r}).textContent.includes({text!r})"


async def test_a_reviewer_labels_the_queue_with_the_keyboard(tmp_path: Path) -> None:
    ledger = write_ledger(
        tmp_path / "l.jsonl",
        [
            entry("t1", "flagged", "FAIL", reply="Let me check.", category="incomplete"),
            entry("t2", "exhausted", "FAIL", reply=HOSTILE, category="goal_missed"),
            entry("t3", "failed_open", None, reason="judge_timeout"),  # nothing logged
        ],
    )
    labels = tmp_path / "labels.jsonl"
    with serving(ledger, labels) as (address, _):
        async with Chromium(width=1000, height=800) as browser:
            page = await browser.open(f"http://{address}/")
            # exhausted comes before flagged in the queue
            await page.wait_for(shows("reasons", "exhausted"))
            assert await page.evaluate(shows("progress", "0 labelled, 3 left of 3"))
            # markup in a reply is text on the page, never elements
            assert await page.evaluate(shows("reply", "<img src=x"))
            assert await page.evaluate("document.querySelectorAll('#reply *').length") == 0
            assert await page.evaluate("document.title") == "replyguard review"
            await press(page, "s")
            await page.wait_for(shows("status", "Skipped."))
            await page.wait_for(shows("reply", "Let me check."))
            assert await page.evaluate(shows("reasons", "flagged"))
            assert await page.evaluate(shows("verdict", "FAIL [incomplete]"))
            await press(page, "n")  # a note first, then FAIL in the second category
            await page.send("Input.insertText", text="asked for the order number")
            await press(page, "Escape")
            await press(page, "f")
            await page.wait_for("document.getElementById('categories').classList.contains('open')")
            await press(page, "2")
            await page.wait_for(shows("status", "Saved FAIL [incomplete]."))
            await page.wait_for(shows("reasons", "failed_open"))
            assert await page.evaluate("document.getElementById('note').value") == ""
            assert await page.evaluate(shows("reply", "not logged: this ledger was written"))
            assert await page.evaluate(shows("verdict", "no verdict (failed open)"))
            await press(page, "p")
            await page.wait_for("!document.getElementById('done').hidden")
            assert await page.evaluate(shows("progress", "2 labelled, 1 left of 3 (1 skipped)"))
    first, second = [json.loads(line) for line in labels.read_text().splitlines()]
    assert (first["id"], first["label"], first["labelCategory"]) == ("t1", "FAIL", "incomplete")
    assert first["metadata"]["review"]["note"] == "asked for the order number"
    assert (second["id"], second["label"], second["judgeOutput"]) == ("t3", "PASS", "")
    assert second["metadata"]["review"]["contentLogged"] is False
