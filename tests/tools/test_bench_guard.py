"""A CI-sized guard against speed regressions on the hot paths, by ratios, never absolute times.

``benchmarks/guard.py`` measures each figure against a reference in the same run, interleaved,
by medians, in a fresh interpreter (pytest's log capture and autouse fixtures would weigh on
both sides of a ratio), so a slow or busy machine slows both sides alike:

- the skip and not-triggered paths over the agent call they wrap, for an agent doing a small,
  fixed amount of Python work (about as much as shaping one reply);
- a verified turn that passes first time over one raw ``litellm.acompletion`` with the same
  parameters to the same loopback judge (``benchmarks/judge_server.py``, its own process).

A guard passes when any of up to three trials is within its bound (noise only ever slows a
trial down); the bounds leave several times today's overhead. The last tests add a busy-wait
of a few milliseconds of CPU to one pipeline step and show the same guard failing. The full
figures and their targets come from ``python benchmarks/run.py``.

replyguard's own share of a verified turn is also guarded in instructions, counted by
callgrind (``benchmarks/instructions.py --own-share``): a count no machine's noise moves, so
its budget can sit much closer to today's figure than a time ratio's bound.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Timed ratios over many interleaved runs and a callgrind count: minutes, so `.ci/run` runs them
# as its second step.
pytestmark = pytest.mark.slow

GUARD = Path(__file__).resolve().parents[2] / "benchmarks" / "guard.py"
INSTRUCTIONS = GUARD.with_name("instructions.py")

HOT_PATH_BOUND = 1.6
"""Skip / not-triggered turn over the working agent alone (1.1-1.3 today; 7-12 slowed)."""
VERIFIED_BOUND = 1.7
"""Verified turn over a raw litellm call to the same loopback judge (1.05-1.4 today; 2.4+
slowed)."""
OWN_SHARE_BUDGET = 813_000
"""Instructions of replyguard's own per verified turn, in-process instant judge over the bare
agent call (739-741K today, CPython 3.11, 767-769K before the seventh round: the injection
screen's interpreter overhead and a few pydantic reads and searches a turn, 27K less, the
budget lowered by as much; 776-780K before the screen's sixth round, the plumbing 411K ->
404K: a lone PASS has no reasoning to clean, a workspace read that found nothing is not
asked again on the attempt; 784K after the fifth round, the turn's plumbing 446K -> 412K: a
reply that fits is
its own view, models made of the dicts their callers hold, the policy's FAIL-only inputs asked
of a FAIL only; 840K after the fourth round, the plumbing 457K -> 447K: a plain PASS made a
verdict once; 848K after issue 42's third round: the injection screen 282K -> 176K, the turn's
plumbing 489K -> 458K; 989K after the second round, where the prompt
build went 269K -> 192K and the plumbing 630K -> 489K; 1,204.8K before it; the same code has
measured up to 6% apart across builds, hence the margin; issue 42 asks 750K)."""
LOGGING_BUDGET = 200_000
"""Instructions the same turn adds with the ``replyguard`` logger at INFO, its records reaching
a host's handler that drops them, each level held through its count (two events: about 182K
today, 202K before ``emit_fields``; with the level switched per call, which empties every
logger's level cache, about 25K more: 208K; 381K before the direct path; issue 42 asks
200K)."""
LOGGING_FLOOR = 50_000
"""Below this the events were not made at all (no handler heard them): the row measured
nothing."""
ADDED_WORK = 4_000
"""Passes of an empty loop the instruction guard's run adds to each judge prompt build, as a
regression it must see (about 0.8M instructions)."""
PRECHECK_DELAY = 0.002
PROMPT_DELAY = 0.010
"""CPU seconds of busy-wait the last tests add to the pre-checks / to the prompt build."""


def _measure(*options: str) -> dict[str, list[float]]:
    """Ratios per figure, measured by ``benchmarks/guard.py`` in a fresh interpreter."""
    bounds = ("--hot-bound", str(HOT_PATH_BOUND), "--verified-bound", str(VERIFIED_BOUND))
    done = subprocess.run(
        [sys.executable, str(GUARD), *bounds, *options],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, list[float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def ratios() -> dict[str, list[float]]:
    return _measure()


def test_skip_path_costs_little_next_to_the_agent_call(ratios: dict[str, list[float]]) -> None:
    assert min(ratios["skip"]) <= HOT_PATH_BOUND, f"skip path / agent call: {ratios['skip']}"


def test_not_triggered_path_costs_little_next_to_the_agent_call(
    ratios: dict[str, list[float]],
) -> None:
    assert min(ratios["quiet"]) <= HOT_PATH_BOUND, f"not-triggered / agent: {ratios['quiet']}"


def test_verified_turn_costs_little_next_to_a_raw_judge_call(
    ratios: dict[str, list[float]],
) -> None:
    found = ratios["verified"]
    assert min(found) <= VERIFIED_BOUND, f"verified turn / raw litellm call: {found}"


def test_the_hot_path_guard_fails_when_the_prechecks_get_slow() -> None:
    slowed = _measure("--only", "hot", "--slow-precheck", str(PRECHECK_DELAY))
    assert min(slowed["skip"]) > HOT_PATH_BOUND, slowed
    assert min(slowed["quiet"]) > HOT_PATH_BOUND, slowed


def test_the_verified_turn_guard_fails_when_the_prompt_build_gets_slow() -> None:
    slowed = _measure("--only", "verified", "--slow-prompt", str(PROMPT_DELAY))
    assert min(slowed["verified"]) > VERIFIED_BOUND, slowed


@pytest.mark.skipif(
    shutil.which("valgrind") is None or shutil.which("callgrind_control") is None,
    reason="valgrind is not installed (apt-get install valgrind; .ci/run installs it)",
)
def test_replyguards_own_share_stays_within_its_instruction_budget() -> None:
    """One run under callgrind counts the in-process verified turn, the bare agent call, the
    same turn with a loop added to its prompt build, and the turn with its logger at INFO:
    the first is within the budget, the slowed one over it (the guard sees a regression of
    that size), and the events within theirs."""
    options = ("--own-share", "--added-work", str(ADDED_WORK), "--calls", "50", "--json")
    done = subprocess.run(
        [sys.executable, str(INSTRUCTIONS), *options],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    shares = json.loads(done.stdout.strip().splitlines()[-1])["own"]
    assert 200_000 < shares["own_share"] <= OWN_SHARE_BUDGET, shares
    assert shares["slowed_own_share"] > OWN_SHARE_BUDGET, shares
    assert LOGGING_FLOOR < shares["logging_at_info"] <= LOGGING_BUDGET, shares
