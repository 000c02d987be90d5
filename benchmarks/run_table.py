"""``run.py``'s table: a row, how its cells are written, and the markdown table of the rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sampling import Pair, median


@dataclass
class Row:
    """One line of the table."""

    name: str
    value: str
    reference: str = "—"
    ratio: str = "—"
    difference: str = "—"
    target: str = "—"
    result: str = "info"
    data: dict[str, Any] = field(default_factory=dict)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "**MISS**"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs"


def ms(seconds: float, digits: int = 2) -> str:
    return f"{seconds * 1e3:.{digits}f} ms"


def signed_ms(seconds: float, digits: int = 2) -> str:
    return f"{seconds * 1e3:+.{digits}f} ms"


def pair_cells(
    pair: Pair, ratio_digits: int, ms_digits: int | None = None
) -> tuple[str, str, str, str]:
    """A pair's cells: the measured side's median, the reference's, their ratio and their
    difference; in µs (the difference always added), or in ms with ``ms_digits`` decimals."""
    measured, reference = median(pair.measured), median(pair.reference)
    ratio = f"{pair.ratio:.{ratio_digits}f}x"
    if ms_digits is None:
        return us(measured), us(reference), ratio, f"+{us(pair.difference)}"
    shown = ms(measured, ms_digits), ms(reference, ms_digits)
    return *shown, ratio, signed_ms(pair.difference, ms_digits)


def table(rows: list[Row]) -> str:
    head = "| measurement | replyguard | reference | ratio | difference | target | result |"
    lines = [head, "|" + "---|" * 7]
    for r in rows:
        lines.append(
            f"| {r.name} | {r.value} | {r.reference} | {r.ratio} | {r.difference} | {r.target}"
            f" | {r.result} |"
        )
    return "\n".join(lines)
