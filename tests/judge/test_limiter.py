"""The concurrency limiter: a hard limit, FIFO waiting, cancellation, and many event loops.

Concurrency is proven with gates (a slot holder waits on a future the test resolves), never by
timing. ``until`` only waits for a condition the test knows will come.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import random
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any

import pytest

from replyguard.judge._limiter import ConcurrencyLimiter

PATIENCE = 10.0  # seconds before a condition that must come is declared missing


async def until(condition: Callable[[], bool]) -> None:
    """Yield to other tasks and threads until ``condition`` holds."""
    async with asyncio.timeout(PATIENCE):
        # The limiter has no event to wait on, and the condition may change in other threads.
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.001)


async def finished(*work: Awaitable[Any]) -> list[Any]:
    """Await every piece of ``work`` (exceptions returned, not raised), or fail: never hang."""
    async with asyncio.timeout(PATIENCE):
        return await asyncio.gather(*work, return_exceptions=True)


class Occupancy:
    """How many tasks are inside their slot now, and the most there ever were (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self.most = 0

    def enter(self) -> None:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def leave(self) -> None:
        with self._lock:
            self.now -= 1


async def hold(
    limiter: ConcurrencyLimiter, occupancy: Occupancy, gate: concurrent.futures.Future[None]
) -> None:
    """Take a slot and keep it until ``gate`` is resolved (from any thread)."""
    async with limiter.slot():
        occupancy.enter()
        try:
            await asyncio.wrap_future(gate)
        finally:
            occupancy.leave()


class LoopThread:
    """An event loop running in a thread of its own; submit coroutines to it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> LoopThread:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=PATIENCE)
            self.loop.close()


@pytest.fixture
def loop_threads() -> Iterator[Callable[[], LoopThread]]:
    started: list[LoopThread] = []

    def start() -> LoopThread:
        thread = LoopThread().__enter__()
        started.append(thread)
        return thread

    yield start
    for thread in started:
        thread.stop()


# --- the limit ------------------------------------------------------------------------------


async def test_no_more_than_limit_tasks_hold_a_slot_at_once() -> None:
    limiter, occupancy, gate = ConcurrencyLimiter(3), Occupancy(), concurrent.futures.Future()
    tasks = [asyncio.create_task(hold(limiter, occupancy, gate)) for _ in range(10)]
    await until(lambda: occupancy.now == 3 and limiter.waiting == 7)
    gate.set_result(None)
    await finished(*tasks)
    assert (occupancy.most, limiter.in_use, limiter.waiting) == (3, 0, 0)


async def test_waiters_get_their_slot_in_arrival_order() -> None:
    limiter = ConcurrencyLimiter(1)
    order: list[int] = []

    async def take(number: int) -> None:
        async with limiter.slot():
            order.append(number)

    async with limiter.slot():
        tasks = []
        for number in range(5):
            tasks.append(asyncio.create_task(take(number)))
            await until(lambda n=number: limiter.waiting == n + 1)
    await finished(*tasks)
    assert order == [0, 1, 2, 3, 4]


async def test_a_newcomer_does_not_jump_the_queue_of_waiters() -> None:
    limiter = ConcurrencyLimiter(1)
    order: list[str] = []

    async def take(name: str) -> None:
        async with limiter.slot():
            order.append(name)

    async with limiter.slot():
        waiter = asyncio.create_task(take("waiter"))
        await until(lambda: limiter.waiting == 1)
    # The slot is on its way to the waiter, who has not run yet; a newcomer arrives first.
    await finished(take("newcomer"), waiter)
    assert order == ["waiter", "newcomer"]


async def test_a_slot_is_released_when_the_body_raises() -> None:
    limiter = ConcurrencyLimiter(1)
    with pytest.raises(ZeroDivisionError):
        async with limiter.slot():
            1 / 0  # noqa: B018
    assert limiter.in_use == 0


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ConcurrencyLimiter(0)


# --- cancellation ---------------------------------------------------------------------------


async def test_a_cancelled_waiter_leaves_the_queue_and_takes_no_slot() -> None:
    limiter = ConcurrencyLimiter(1)
    async with limiter.slot():
        waiter = asyncio.create_task(limiter.slot().__aenter__())
        await until(lambda: limiter.waiting == 1)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert (limiter.in_use, limiter.waiting) == (1, 0)
    assert limiter.in_use == 0


async def test_a_waiter_timed_out_by_asyncio_timeout_takes_no_slot() -> None:
    limiter = ConcurrencyLimiter(1)
    async with limiter.slot():
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01), limiter.slot():
                pytest.fail("the slot was held: the waiter must not get it")
        assert (limiter.in_use, limiter.waiting) == (1, 0)
    assert limiter.in_use == 0


async def test_a_waiter_cancelled_as_the_slot_reaches_it_passes_the_slot_on() -> None:
    limiter = ConcurrencyLimiter(1)
    entered = asyncio.Event()

    async def take() -> None:
        async with limiter.slot():
            entered.set()

    async with limiter.slot():
        doomed = asyncio.create_task(take())
        await until(lambda: limiter.waiting == 1)
        patient = asyncio.create_task(take())
        await until(lambda: limiter.waiting == 2)
    doomed.cancel()  # the slot was just handed to ``doomed``, which has not woken yet
    await finished(doomed, patient)
    assert doomed.cancelled()
    assert entered.is_set()
    assert limiter.in_use == 0


async def test_a_waiter_cancelled_as_the_last_slot_reaches_it_frees_the_slot() -> None:
    limiter = ConcurrencyLimiter(1)
    async with limiter.slot():
        doomed = asyncio.create_task(limiter.slot().__aenter__())
        await until(lambda: limiter.waiting == 1)
    doomed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await doomed
    assert limiter.in_use == 0


async def test_many_cancellations_never_leak_a_slot() -> None:
    limiter, occupancy = ConcurrencyLimiter(3), Occupancy()
    chance = random.Random(20240611)

    async def work() -> None:
        async with limiter.slot():
            occupancy.enter()
            try:
                for _ in range(chance.randint(0, 3)):
                    await asyncio.sleep(0)
            finally:
                occupancy.leave()

    for _ in range(20):
        tasks = [asyncio.create_task(work()) for _ in range(50)]
        for _ in range(chance.randint(0, 4)):
            await asyncio.sleep(0)
        for task in chance.sample(tasks, 25):
            task.cancel()
        await finished(*tasks)
    assert (limiter.in_use, limiter.waiting, occupancy.most) == (0, 0, 3)


# --- many event loops -----------------------------------------------------------------------


async def test_a_task_on_another_loop_waits_for_a_slot_held_here(
    loop_threads: Callable[[], LoopThread],
) -> None:
    limiter, other = ConcurrencyLimiter(1), loop_threads()
    entered = threading.Event()

    async def take() -> None:
        async with limiter.slot():
            entered.set()

    async with limiter.slot():
        done = other.submit(take())
        await until(lambda: limiter.waiting == 1)
        assert not entered.is_set()
    await finished(asyncio.wrap_future(done))
    assert entered.is_set()
    assert limiter.in_use == 0


async def test_two_loops_in_two_threads_share_one_limit(
    loop_threads: Callable[[], LoopThread],
) -> None:
    limiter, occupancy, gate = ConcurrencyLimiter(2), Occupancy(), concurrent.futures.Future()

    async def crowd() -> None:
        await asyncio.gather(*(hold(limiter, occupancy, gate) for _ in range(6)))

    runs = [thread.submit(crowd()) for thread in (loop_threads(), loop_threads())]
    await until(lambda: occupancy.now == 2 and limiter.waiting == 10)
    gate.set_result(None)
    await finished(*map(asyncio.wrap_future, runs))
    assert (occupancy.most, limiter.in_use, limiter.waiting) == (2, 0, 0)


async def test_cancellations_across_loops_never_leak_a_slot(
    loop_threads: Callable[[], LoopThread],
) -> None:
    limiter, occupancy = ConcurrencyLimiter(2), Occupancy()

    async def churn(seed: int) -> None:
        chance = random.Random(seed)

        async def work() -> None:
            async with limiter.slot():
                occupancy.enter()
                try:
                    await asyncio.sleep(0)
                finally:
                    occupancy.leave()

        for _ in range(30):
            tasks = [asyncio.create_task(work()) for _ in range(20)]
            await asyncio.sleep(0)
            for task in chance.sample(tasks, 10):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    runs = [loop_threads().submit(churn(seed)) for seed in (1, 2, 3)]
    await finished(churn(4), *map(asyncio.wrap_future, runs))
    assert (limiter.in_use, limiter.waiting, occupancy.most) == (0, 0, 2)


async def test_a_waiter_whose_loop_closed_is_skipped(
    loop_threads: Callable[[], LoopThread],
) -> None:
    limiter, doomed, patient = ConcurrencyLimiter(1), loop_threads(), loop_threads()
    entered = threading.Event()

    async def take() -> None:
        async with limiter.slot():
            entered.set()

    async def abandon() -> None:
        await limiter.slot().__aenter__()

    async with limiter.slot():
        doomed.submit(abandon())
        await until(lambda: limiter.waiting == 1)
        done = patient.submit(take())
        await until(lambda: limiter.waiting == 2)
        doomed.stop()  # its loop closes with the waiter still parked
    await finished(asyncio.wrap_future(done))
    assert entered.is_set()
    assert limiter.in_use == 0
    # The abandoned task is garbage now: collect it here, so that asyncio's "Task was
    # destroyed but it is pending!" goes to this test's captured log, not to stderr at exit.
    gc.collect()
