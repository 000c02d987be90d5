"""Every way the judge's provider can fail delivers the reply, fails open, and leaves nothing.

The fault table and the harness live in ``fault_matrix`` (``scripts/reliability.py`` reports on
the same table). Each case is a fault x a wire format (an OpenAI judge, an Anthropic judge) x
the attempt it hits (the first judgement, or a retry's after a FAIL), run once through
``Verifier(config).run`` against a loopback provider with ``timeoutSeconds=1``; the tests below
each check one property of every case's result. The streaming cases (``stream_cuts``) play a
stream cut by an incremental check, and a retry that fails after it, through ``run`` and
``stream`` against the same kind of provider.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from conftest import API_KEY, SecretsGuard
from support.fault_matrix import (
    CASES,
    FAULTS_BY_NAME,
    SMUGGLED,
    WIRES,
    Case,
    Matrix,
    Result,
    Smuggled,
    run_matrix,
    run_smuggled,
)
from support.host_faults import HOST_FAULTS, LINUX_ONLY, run_host_fault
from support.provider_server import Wire
from support.stream_cuts import FRAGMENT, CutResult, expected, run_cuts
from support.stream_cuts import SCENARIOS as CUT_SCENARIOS
from support.stream_cuts import Scenario as CutScenario

pytestmark = pytest.mark.timing  # scripts/under_load.sh runs these beside CPU-bound work

CASE_PARAMS = [pytest.param(case, id=case.id) for case in CASES]


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    """Every case, run once (on a loop of its own) for all the tests of this module."""
    return asyncio.run(run_matrix())


@pytest.fixture
def result(matrix: Matrix, case: Case) -> Result:
    return matrix.results[case.id]


def test_a_fault_free_judgement_is_lost_at_most_rarely(matrix: Matrix) -> None:
    """A retry case whose first, fault-free judgement failed open is run once more (a loaded
    machine can stall a loopback call); more than two of them in one matrix is a defect."""
    assert len(matrix.repeated) <= 2, matrix.repeated


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_no_exception_escapes_run(result: Result) -> None:
    assert result.escaped is None


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_best_reply_so_far_is_delivered(result: Result, case: Case) -> None:
    assert result.response == case.expected_response, (result.status, result.requests, result.error)


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_turn_fails_open_with_the_faults_reason(result: Result, case: Case) -> None:
    assert (result.status, result.reason) == case.expected_status, result.error


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_turn_fails_open_by_the_deadline(result: Result) -> None:
    assert result.in_time, (result.judged_seconds, result.late)


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_faulty_judgement_is_not_retried_beyond_the_known_requests(
    result: Result, case: Case
) -> None:
    """One request per judgement (``max_retries=0``), but where litellm retries on its own.

    At most: litellm now reuses its pooled connection across judgements (one constant
    timeout), and a connection the previous fault left half-dead can fail before the request
    reaches the server — still a fail-open, never an extra request.
    """
    assert 0 <= result.requests <= case.expected_requests


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_no_task_is_left_behind_after_aclose(result: Result) -> None:
    assert result.tasks_left == []


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_no_connection_stays_open_after_aclose(result: Result) -> None:
    assert result.connections_left == 0


TIMEOUT_STATUSES = [
    pytest.param(case, id=case.id)
    for case in CASES
    if case.fault in (FAULTS_BY_NAME["http-408"], FAULTS_BY_NAME["http-504"])
]


@pytest.mark.parametrize("case", TIMEOUT_STATUSES)
def test_provider_timeout_status_is_reported_with_the_providers_error(
    result: Result, case: Case
) -> None:
    """A 408 / 504 arrives in milliseconds: the verdict must say what the provider said, not
    that our own deadline ran out."""
    status = case.fault.name.removeprefix("http-")
    assert f"status {status}" in (result.error or "")


def test_no_task_is_pending_on_the_loop_once_every_verifier_is_closed(matrix: Matrix) -> None:
    """``aclose()`` is the shutdown call: litellm's logging worker must not outlive it."""
    assert matrix.tasks_on_the_loop == []


# -- smuggling: content that must not make a turn worse -------------------------------------------

SMUGGLED_PARAMS = [
    pytest.param(case, wire, id=f"{case.name}-{wire.name}") for case in SMUGGLED for wire in WIRES
]


@pytest.mark.parametrize(("case", "wire"), SMUGGLED_PARAMS)
def test_smuggled_content_is_judged_and_keeps_no_key(
    case: Smuggled, wire: Wire, tmp_path: Path, secrets_guard: SecretsGuard
) -> None:
    """The key an answer echoes reaches no outcome, agent message, ledger line or replyguard
    log record (litellm's own DEBUG records of the raw answer are outside its reach: see
    ``test_secrets_guard``)."""
    ledger = tmp_path / "ledger.jsonl"
    result = asyncio.run(run_smuggled(case, wire, str(ledger)))
    assert {leak.logger for leak in secrets_guard.forgive()} <= {"LiteLLM"}
    assert (result.status, result.attempts) == (case.status, case.attempts)
    assert len(result.prompts) == case.attempts  # every attempt was judged
    if case.attempts > 1:
        assert result.first_verdict_passed is False  # the forged PASS did not count
    if case.prompt_holds is not None:
        assert case.prompt_holds in result.prompts[0]
    assert not [text for text in [*result.texts, ledger.read_text()] if API_KEY in text]


# -- the host's faults (``host_faults``): a careless host never makes a turn worse ---------------


# Killing a detached child is promised on Linux only (a child subreaper); elsewhere the
# documented promise is the process group, which the command check tests cover.
HOST_CASES = [
    name for name in HOST_FAULTS if sys.platform.startswith("linux") or name not in LINUX_ONLY
]


@pytest.mark.parametrize("wire", WIRES, ids=lambda wire: wire.name)
@pytest.mark.parametrize("name", HOST_CASES)
async def test_a_careless_host_gets_every_turn_judged_and_nothing_left_behind(
    name: str, wire: Wire
) -> None:
    result = await run_host_fault(name, wire)
    assert result.outcomes and set(result.outcomes) == {("passed", None)}, result.outcomes
    assert result.connections_left == 0
    assert result.processes_left == []


# -- streams cut short (``stream_cuts``): never a fragment, the same outcome as run --------------


@pytest.fixture(scope="module", params=WIRES, ids=lambda wire: wire.name)
def cuts(request: pytest.FixtureRequest) -> dict[str, CutResult]:
    """Every cut scenario through ``run`` and ``stream`` on one wire (a loop of its own)."""
    return asyncio.run(run_cuts(request.param))


@pytest.mark.parametrize("scenario", CUT_SCENARIOS, ids=lambda scenario: scenario.name)
def test_a_stream_cut_short_ends_as_run_and_delivers_no_fragment(
    cuts: dict[str, CutResult], scenario: CutScenario
) -> None:
    result = cuts[scenario.name]
    assert result.escaped is None
    assert result.ran is not None and result.streamed is not None
    assert result.streamed == expected(scenario, result.ran)
    assert result.streamed[2] != FRAGMENT
    assert result.connections_left == 0
    assert result.tasks_left == []
