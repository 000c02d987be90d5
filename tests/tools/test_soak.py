"""A CI-sized soak (``scripts/soak.py``): many turns through one verifier leave nothing behind.

600 turns per wire format (200 of them warm-up), 50 at a time, through ``Verifier.run`` to the
loopback provider over litellm's real network path; every fourth turn's first reply is failed
and retried, and every fifth turn goes through ``Verifier.stream``: its first reply is cut
short at a forbidden phrase (its stream closed) and retried, and none may deliver the
fragment. After the warm-up, open file descriptors must stay where they were, the memory
Python holds must stay flat, and resident memory may grow only within a generous bound
(allocator noise, not a leak). ``python scripts/soak.py`` runs the full 10,000 turns.

Memory held after the warm-up is counted whole, whoever holds it: litellm's objects and the
test runner's too. That is how this soak found, under litellm 1.110, Routers that earlier tests
could not retire: their strategy handlers stayed in litellm's callback lists and logged an
error with a traceback on every later judge call, and pytest's log capture kept each record
and the request objects its traceback reached (about 28 KB a call). A canary below proves that
a leak of replyguard's own makes the soak fail.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from replyguard.runner import _run as runner

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import soak

TURNS = 600
WARMUP = 200
RSS_BOUND_MB = 20.0
"""Generous: a leak of one kilobyte a turn would already show in ``traced``."""
TRACED_BOUND_MB = 3.0
"""Python allocations still held at the end that were made after the warm-up."""


@pytest.fixture(scope="module", params=["anthropic", "openai"])
def report(request: pytest.FixtureRequest) -> soak.SoakReport:
    """One soak per wire format, shared by the tests of that wire (its own event loop)."""
    return asyncio.run(soak.soak(TURNS, batch=50, warmup=WARMUP, wire=request.param))


@pytest.mark.slow
def test_every_turn_passes(report: soak.SoakReport) -> None:
    assert report.statuses == {"passed": TURNS}


@pytest.mark.slow
def test_every_failed_first_reply_is_retried_once(report: soak.SoakReport) -> None:
    retried = soak.retried_turns(TURNS, 4, 5)
    assert TURNS // 4 < retried < TURNS // 2  # failed, cut, or both
    assert report.attempts == {1: TURNS - retried, 2: retried}


@pytest.mark.slow
def test_every_streamed_turn_is_cut_and_none_delivers_its_fragment(
    report: soak.SoakReport,
) -> None:
    assert report.streamed == TURNS // 5
    assert report.fragments == 0


@pytest.mark.slow
def test_open_file_descriptors_stay_flat_after_the_warm_up(report: soak.SoakReport) -> None:
    assert report.end.open_fds <= report.baseline.open_fds


@pytest.mark.slow
def test_closing_the_verifier_releases_every_file_descriptor(report: soak.SoakReport) -> None:
    assert report.closed.open_fds <= report.start.open_fds


@pytest.mark.slow
def test_memory_python_holds_stays_flat_after_the_warm_up(report: soak.SoakReport) -> None:
    assert report.traced_growth_mb < TRACED_BOUND_MB, report.litellm_callbacks


@pytest.mark.slow
def test_a_leak_of_replyguards_own_fails_the_soak(monkeypatch: pytest.MonkeyPatch) -> None:
    """The canary: the verifier keeps every outcome it reports with a 20 KB copy of its reply,
    as a cache that is never emptied would; the soak's verdict must name the growth."""
    kept: list[object] = []
    report_outcome = runner._Run.report

    def keep(self: runner._Run, outcome: runner.Outcome) -> None:
        report_outcome(self, outcome)
        kept.append((outcome, outcome.response * (20_000 // max(len(outcome.response), 1))))

    monkeypatch.setattr(runner._Run, "report", keep)
    leaky = asyncio.run(soak.soak(TURNS, batch=50, warmup=WARMUP, wire="openai"))
    assert leaky.statuses == {"passed": TURNS}
    assert leaky.traced_growth_mb > TRACED_BOUND_MB
    assert any("memory Python holds grew" in p for p in soak.problems(leaky))


@pytest.mark.slow
def test_resident_memory_growth_after_the_warm_up_is_bounded(report: soak.SoakReport) -> None:
    assert report.rss_growth_mb < RSS_BOUND_MB


# -- the script's verdict -------------------------------------------------------------------------

MB = 1024 * 1024


def _report(**changes: soak.Sample) -> soak.SoakReport:
    flat = soak.Sample(rss_bytes=300 * MB, open_fds=113, traced_bytes=20 * MB)
    base = soak.SoakReport(
        turns=10, batch=5, warmup=2, wire="openai", judge_requests=12,
        statuses={"passed": 10}, attempts={1: 8, 2: 2}, seconds=1.0,
        start=replace(flat, open_fds=9), baseline=flat, end=flat, closed=replace(flat, open_fds=9),
        traced_peak_bytes=21 * MB,
    )  # fmt: skip
    return replace(base, **changes)


def test_the_script_passes_a_flat_soak() -> None:
    assert soak.problems(_report()) == []


def test_the_script_fails_a_soak_whose_resident_memory_grew() -> None:
    grown = soak.Sample(rss_bytes=306 * MB, open_fds=113, traced_bytes=20 * MB)
    assert len(soak.problems(_report(end=grown), max_growth_mb=5.0)) == 1


def test_the_script_fails_a_soak_whose_python_memory_grew() -> None:
    grown = soak.Sample(rss_bytes=300 * MB, open_fds=113, traced_bytes=24 * MB)
    assert len(soak.problems(_report(end=grown))) == 1


def test_the_script_fails_a_soak_whose_file_descriptors_grew() -> None:
    grown = soak.Sample(rss_bytes=300 * MB, open_fds=114, traced_bytes=20 * MB)
    assert len(soak.problems(_report(end=grown))) == 1


def test_the_script_fails_a_soak_that_left_file_descriptors_open() -> None:
    left = soak.Sample(rss_bytes=300 * MB, open_fds=10, traced_bytes=20 * MB)
    assert len(soak.problems(_report(closed=left))) == 1


def test_the_script_fails_a_soak_that_delivered_a_fragment() -> None:
    assert len(soak.problems(replace(_report(), fragments=1))) == 1


def test_the_script_fails_a_soak_with_a_turn_that_did_not_pass() -> None:
    failed = replace(_report(), statuses={"passed": 9, "failed_open": 1})
    assert len(soak.problems(failed)) == 1
