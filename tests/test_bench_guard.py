"""A CI-sized guard against speed regressions on the hot paths, by ratios, never absolute times.

Each figure is measured against a reference in the same run, interleaved, by medians, so a
slow or busy machine slows both sides alike:

- the skip and not-triggered paths against the agent call they wrap, for an agent that does a
  small, fixed amount of Python work (about as much as shaping one reply);
- a verified turn that passes first time against one raw ``litellm.acompletion`` with the same
  parameters to the same loopback judge (``benchmarks/judge_server.py``, its own process).

A guard passes when any of up to three trials is within its bound (noise only ever slows a
trial down), and the bounds leave several times today's overhead. The last tests inject a
busy-wait of a few milliseconds into the pipeline and show the same guard failing, so it can
fail. The full figures and targets are ``python benchmarks/run.py``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import scenarios as sc  # noqa: E402
from judge_server import JudgeServerProcess  # noqa: E402

import replyguard.assessment  # noqa: E402
import replyguard.runner  # noqa: E402

AGENT_WORK = 1000
"""Units of ``scenarios.agent_step`` per agent call: about 150 µs of Python here."""
HOT_PATH_BOUND = 1.6
"""Skip / not-triggered turn over the working agent alone (today about 1.15-1.3)."""
VERIFIED_BOUND = 1.5
"""Verified turn over a raw litellm call to the same loopback judge (today about 1.1-1.3)."""
TRIALS = 3
PRECHECK_DELAY = 0.002
PROMPT_DELAY = 0.008
"""Seconds of busy-wait the last tests add to the pre-checks and to the prompt build."""


def _guard(ratios: list[float], bound: float) -> bool:
    return min(ratios) <= bound


async def _trials(measure: Callable[[], Awaitable[float]], bound: float) -> list[float]:
    """Ratios of up to ``TRIALS`` trials, stopping at the first within ``bound``."""
    ratios: list[float] = []
    for _ in range(TRIALS):
        ratios.append(await measure())
        if ratios[-1] <= bound:
            break
    return ratios


@pytest.fixture(scope="module")
def judge_server() -> Iterator[JudgeServerProcess]:
    with JudgeServerProcess() as server:
        yield server


def _slowed(function: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    """``function`` after a busy-wait of ``seconds`` of this thread's CPU time.

    CPU time, not wall time: on a busy machine the injected work slows down just as much as
    the reference does, as a real regression (more Python on the event loop) would.
    """

    def slow(*args: Any, **kwargs: Any) -> Any:
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass
        return function(*args, **kwargs)

    return slow


async def _hot_path_ratio(kind: str, pairs: int = 1500) -> float:
    warmup = min(200, pairs)
    return (await sc.hot_path(kind, pairs, agent_work=AGENT_WORK, warmup=warmup)).ratio


async def _verified_ratio(server: JudgeServerProcess, pairs: int = 100) -> float:
    pair, _ = await sc.verified_vs_raw(sc.WIRES["anthropic"], server.url, pairs)
    return pair.ratio


async def test_skip_path_costs_little_next_to_the_agent_call() -> None:
    ratios = await _trials(lambda: _hot_path_ratio("skip"), HOT_PATH_BOUND)
    assert _guard(ratios, HOT_PATH_BOUND), f"skip path / agent call: {ratios}"


async def test_not_triggered_path_costs_little_next_to_the_agent_call() -> None:
    ratios = await _trials(lambda: _hot_path_ratio("quiet"), HOT_PATH_BOUND)
    assert _guard(ratios, HOT_PATH_BOUND), f"not-triggered path / agent call: {ratios}"


async def test_verified_turn_costs_little_next_to_a_raw_judge_call(
    judge_server: JudgeServerProcess,
) -> None:
    ratios = await _trials(lambda: _verified_ratio(judge_server), VERIFIED_BOUND)
    print("verified ratios", ratios)
    assert _guard(ratios, VERIFIED_BOUND), f"verified turn / raw litellm call: {ratios}"


async def test_the_hot_path_guard_fails_when_the_prechecks_get_slow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        replyguard.runner, "skip_reason", _slowed(replyguard.runner.skip_reason, PRECHECK_DELAY)
    )
    for kind in ("skip", "quiet"):
        ratios = await _trials(lambda kind=kind: _hot_path_ratio(kind, 100), HOT_PATH_BOUND)
        assert not _guard(ratios, HOT_PATH_BOUND), f"{kind}: a slow pre-check went unseen"


async def test_the_verified_turn_guard_fails_when_the_prompt_build_gets_slow(
    monkeypatch: pytest.MonkeyPatch, judge_server: JudgeServerProcess
) -> None:
    monkeypatch.setattr(
        replyguard.assessment,
        "build_judge_prompt",
        _slowed(replyguard.assessment.build_judge_prompt, PROMPT_DELAY),
    )
    ratios = await _trials(lambda: _verified_ratio(judge_server, pairs=40), VERIFIED_BOUND)
    print("injected verified ratios", ratios)
    assert not _guard(ratios, VERIFIED_BOUND), "a slow prompt build went unseen"
