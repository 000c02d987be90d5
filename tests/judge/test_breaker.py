"""The per-model circuit breaker: closed, open for a cool-down, one half-open probe.

A fake clock drives time: nothing here sleeps.
"""

from __future__ import annotations

import threading

import pytest

from replyguard.config import CircuitBreakerConfig
from replyguard.judge._breaker import CircuitBreaker

MODEL = "anthropic/claude-sonnet-4-5"
OTHER = "openai/gpt-4o-mini"
COOLDOWN = 32.0
TICK = 0.25  # exact in binary, so sums of times compare exactly


class FakeClock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def breaker(clock: FakeClock) -> CircuitBreaker:
    return CircuitBreaker(3, COOLDOWN, clock=clock)


def fail(breaker: CircuitBreaker, times: int, model: str = MODEL) -> None:
    for _ in range(times):
        breaker.record_failure(model)


def opened_then_cooled(breaker: CircuitBreaker, clock: FakeClock) -> None:
    """Open ``MODEL``'s circuit and let its cool-down pass: it is half-open."""
    fail(breaker, 3)
    clock.advance(COOLDOWN)


# --- closed ---------------------------------------------------------------------------------


def test_an_unknown_model_is_closed_and_allowed(breaker: CircuitBreaker) -> None:
    assert (breaker.state(MODEL), breaker.allow(MODEL)) == ("closed", True)


def test_failures_below_the_threshold_keep_the_circuit_closed(breaker: CircuitBreaker) -> None:
    fail(breaker, 2)
    assert (breaker.state(MODEL), breaker.allow(MODEL)) == ("closed", True)


def test_a_success_resets_the_count_of_consecutive_failures(breaker: CircuitBreaker) -> None:
    fail(breaker, 2)
    breaker.record_success(MODEL)
    fail(breaker, 2)
    assert breaker.state(MODEL) == "closed"


# --- open -----------------------------------------------------------------------------------


def test_threshold_consecutive_failures_open_the_circuit(breaker: CircuitBreaker) -> None:
    fail(breaker, 3)
    assert (breaker.state(MODEL), breaker.allow(MODEL)) == ("open", False)


def test_an_open_circuit_refuses_until_the_cooldown_ends(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    fail(breaker, 3)
    clock.advance(COOLDOWN - TICK)
    assert (breaker.state(MODEL), breaker.allow(MODEL)) == ("open", False)


def test_circuits_are_per_model(breaker: CircuitBreaker) -> None:
    fail(breaker, 3)
    assert (breaker.state(OTHER), breaker.allow(OTHER)) == ("closed", True)


def test_a_failure_while_open_does_not_extend_the_cooldown(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    """A straggler that started before the circuit opened reports late: time is not reset."""
    fail(breaker, 3)
    clock.advance(COOLDOWN / 2)
    fail(breaker, 1)
    clock.advance(COOLDOWN / 2)
    assert breaker.state(MODEL) == "half_open"


# --- half-open ------------------------------------------------------------------------------


def test_after_the_cooldown_the_circuit_is_half_open(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    opened_then_cooled(breaker, clock)
    assert breaker.state(MODEL) == "half_open"


def test_half_open_lets_exactly_one_probe_through(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    opened_then_cooled(breaker, clock)
    assert [breaker.allow(MODEL) for _ in range(4)] == [True, False, False, False]


def test_a_successful_probe_closes_the_circuit(breaker: CircuitBreaker, clock: FakeClock) -> None:
    opened_then_cooled(breaker, clock)
    assert breaker.allow(MODEL)
    breaker.record_success(MODEL)
    assert (breaker.state(MODEL), breaker.allow(MODEL), breaker.allow(MODEL)) == (
        "closed",
        True,
        True,
    )


def test_a_closed_circuit_after_a_probe_needs_the_full_threshold_again(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    opened_then_cooled(breaker, clock)
    breaker.allow(MODEL)
    breaker.record_success(MODEL)
    fail(breaker, 2)
    assert breaker.state(MODEL) == "closed"


def test_a_failed_probe_reopens_the_circuit_for_a_new_cooldown(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    opened_then_cooled(breaker, clock)
    breaker.allow(MODEL)
    clock.advance(5)
    breaker.record_failure(MODEL)
    clock.advance(COOLDOWN - TICK)
    assert (breaker.state(MODEL), breaker.allow(MODEL)) == ("open", False)
    clock.advance(TICK)
    assert (breaker.state(MODEL), breaker.allow(MODEL)) == ("half_open", True)


def test_a_probe_that_never_reports_blocks_only_for_one_more_cooldown(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    opened_then_cooled(breaker, clock)
    assert breaker.allow(MODEL)  # the probe's task is cancelled: it never reports
    clock.advance(COOLDOWN - TICK)
    assert breaker.allow(MODEL) is False
    clock.advance(TICK)
    assert [breaker.allow(MODEL), breaker.allow(MODEL)] == [True, False]


def test_concurrent_callers_from_many_threads_get_one_probe(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    opened_then_cooled(breaker, clock)
    start = threading.Barrier(16)
    answers: list[bool] = []

    def call() -> None:
        start.wait()
        answers.append(breaker.allow(MODEL))

    threads = [threading.Thread(target=call) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [False] * 15 + [True]


# --- construction ---------------------------------------------------------------------------


def test_from_config_takes_the_threshold_and_cooldown(clock: FakeClock) -> None:
    config = CircuitBreakerConfig(failure_threshold=2, cooldown_seconds=8)
    breaker = CircuitBreaker.from_config(config, clock=clock)
    fail(breaker, 2)
    clock.advance(8 - TICK)
    assert breaker.state(MODEL) == "open"
    clock.advance(TICK)
    assert breaker.state(MODEL) == "half_open"


@pytest.mark.parametrize(
    ("threshold", "cooldown"),
    [pytest.param(0, 1.0, id="threshold-0"), pytest.param(1, 0.0, id="cooldown-0")],
)
def test_a_threshold_or_cooldown_below_the_minimum_is_refused(
    threshold: int, cooldown: float
) -> None:
    with pytest.raises(ValueError, match="must be"):
        CircuitBreaker(threshold, cooldown)
