"""How many samples each of ``run.py``'s sections takes: a full run and a quick one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Sizes:
    hot_pairs: int
    verified_pairs: int
    cold_pairs: int
    context_reps: dict[int, int]
    concurrent: int
    concurrent_rounds: int
    import_runs: int
    memory_turns: int
    fail_open_runs: int
    big_pairs: int = 60
    cold_runs: int = 7
    cli_runs: int = 11
    log_pairs: int = 3000
    stream_runs: int = 200
    panel_pairs: int = 200


FULL = Sizes(
    20000, 2000, 1000, {8_000: 300, 32_000: 150, 128_000: 60, 1_000_000: 20}, 1000, 3, 7, 1000, 5
)
QUICK = Sizes(
    3000,
    300,
    200,
    {8_000: 60, 32_000: 30, 128_000: 15, 1_000_000: 5},
    1000,
    1,
    3,
    200,
    3,
    big_pairs=20,
    cold_runs=3,
    cli_runs=5,
    log_pairs=1000,
    stream_runs=40,
    panel_pairs=40,
)
