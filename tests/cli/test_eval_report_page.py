"""``report.html`` as a browser lays it out: headless Chromium measures the page's width.

The page itself holds no script; the test adds one line that writes the measured widths into the
DOM, which ``--dump-dom`` prints.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from replyguard.cli import main
from replyguard.evaluation.html import render_html

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "eval" / "sample.jsonl"
CHROMIUM = shutil.which("chromium")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (Debian: apt-get install chromium)",
)

MEASURE = (
    "<script>document.body.insertAdjacentHTML('beforeend', '<pre id=\"measured\">' + "
    "JSON.stringify({scroll: document.documentElement.scrollWidth, window: innerWidth}) + "
    "'</pre>')</script>"
)


def measured_widths(page: str, tmp_path: Path, width: int) -> dict[str, int]:
    """The page's scroll width and the window's width, in a window ``width`` pixels wide."""
    path = tmp_path / f"page-{width}.html"
    path.write_text(page.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                f"--user-data-dir={profile}",
                f"--window-size={width},1200",
                "--dump-dom",
                path.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    found = re.search(r'<pre id="measured">(\{.*?\})</pre>', done.stdout)
    assert found is not None, done.stderr[-2000:]
    return dict(json.loads(found.group(1)))


def long_record() -> dict[str, Any]:
    return {
        "id": "a-very-long-record",
        "userMessage": "word " * 400 + "https://example.com/" + "x" * 600,
        "reply": "y" * 3000,
        "label": "PASS",
        "judgeOutput": "FAIL [incomplete]: " + "z" * 900,
    }


@pytest.fixture(scope="module")
def replay_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("eval")
    dataset = folder / "data.jsonl"
    dataset.write_text(SAMPLE.read_text() + json.dumps(long_record()) + "\n", encoding="utf-8")
    assert main(["eval", str(dataset), "--replay", "--out", str(folder)]) == 0
    return dict(json.loads((folder / "report.json").read_text(encoding="utf-8")))


def live_like(report: dict[str, Any]) -> dict[str, Any]:
    """The replayed report as a live run would show it: latencies, cost, the histogram."""
    rows = [
        {**row, "latencyMs": 400.0 + 37.5 * index if row["latencyMs"] is not None else None}
        for index, row in enumerate(report["results"])
    ]
    source = {"kind": "live", "modelCalled": report["judgeModel"], "recordedBy": {}}
    return {
        **report,
        "replay": False,
        "costUsd": 0.0421,
        "results": rows,
        "verdictSource": {**source, "recordedByUnknown": 0},
    }


@pytest.mark.parametrize("width", [1280, 760])
def test_the_replayed_report_fits_the_window_width(
    replay_report: dict[str, Any], tmp_path: Path, width: int
) -> None:
    page = render_html(replay_report)
    assert page.count("<svg") == 2  # no latency histogram under replay
    # the intervals, the labels needed for +-5 points and the category table are on the page
    assert page.count("95 % interval") >= 4 and "more labelled records" in page
    assert "<h2>By category</h2>" in page and "Synthetic data:" in page
    widths = measured_widths(page, tmp_path, width)
    assert widths["scroll"] <= widths["window"] == width


@pytest.mark.parametrize("width", [1280, 760])
def test_a_live_report_with_its_histogram_fits_the_window_width(
    replay_report: dict[str, Any], tmp_path: Path, width: int
) -> None:
    page = render_html(live_like(replay_report))
    assert "judgement latency (ms)" in page and ">records</text>" in page  # both axes labelled
    widths = measured_widths(page, tmp_path, width)
    assert widths["scroll"] <= widths["window"] == width
