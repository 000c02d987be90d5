"""Bias probes in ``replyguard eval --probes``: each labelled reply judged again padded, with a
compliment to the judge, and reordered, through the real judge path (the loopback provider)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_eval_cli import live_config, record, run_eval, write_dataset

from replyguard.evaluation.probes import (
    COMPLIMENT,
    FILLER,
    NOT_UNDER_REPLAY,
    complimented,
    padded,
    reordered,
)
from support.provider_server import ProviderServer, Seen, Step

TWO_SECTIONS = "Your refund is approved.\n\nIt reaches your card in 5 days."


def test_each_probe_keeps_what_the_reply_says() -> None:
    assert padded("Done.") == f"Done.\n\n{FILLER}"
    assert complimented("Done.  \n") == f"Done.\n\n{COMPLIMENT}"
    assert reordered(TWO_SECTIONS) == "It reaches your card in 5 days.\n\nYour refund is approved."
    assert reordered("one\n \t\nTwo\n\n\nthree") == "three\n\none\n\nTwo"
    assert reordered("A single section,\nover two lines.") is None


def flattered(seen: Seen) -> Step:
    """A judge swayed by flattery: PASS when complimented, else FAIL."""
    if "brilliant judge" in seen.prompt:
        return Step(text="PASS")
    return Step(text="The reply leaves the date out.\nFAIL [incomplete]: give the date.")


def test_a_judge_swayed_by_a_compliment_shows_its_flips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], provider: ProviderServer
) -> None:
    provider.respond_with(flattered)
    records = [
        record("FAIL", None, reply=TWO_SECTIONS, id="two"),
        record("FAIL", None, id="one"),
        record(None, None, id="unlabelled"),  # not probed
    ]
    dataset = write_dataset(tmp_path / "d.jsonl", records)
    out = str(tmp_path / "o")
    args = [dataset, "--config", live_config(tmp_path, provider), "--out", out, "--probes"]
    code, printed, _, report = run_eval(capsys, *args)
    assert code == 0 and report is not None
    probes = report["biasProbes"]["probes"]
    assert (probes["compliment"]["tried"], probes["compliment"]["flipped"]) == (2, 2)
    assert {f["id"] for f in probes["compliment"]["flips"]} == {"two", "one"}
    assert probes["compliment"]["flips"][0]["from"] == "FAIL"
    assert (probes["padding"]["tried"], probes["padding"]["flipped"]) == (2, 0)
    assert (probes["reorder"]["tried"], probes["reorder"]["flipped"]) == (1, 0)
    assert len(provider.seen) == 3 + 2 + 2 + 1  # the originals, then each probed reply
    assert "compliment: 2 of 2 flipped" in printed
    assert "compliment: 2 of 2 flipped" in (tmp_path / "o" / "report.html").read_text()


def test_under_replay_the_probes_say_they_cannot_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", [record("PASS", "PASS")])
    code, printed, _, report = run_eval(
        capsys, "--replay", dataset, "--out", str(tmp_path / "o"), "--probes"
    )
    assert code == 0 and report is not None
    assert report["biasProbes"] == {"ran": False, "why": NOT_UNDER_REPLAY, "probes": {}}
    assert "bias probes: not run: under --replay" in printed
