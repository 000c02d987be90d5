"""The words the summary and the page share: readable names for statuses and categories, and
the sentences that say where the verdicts came from, whether the data is synthetic, and how
sure the figures are.
"""

from __future__ import annotations

from typing import Any

_STATUS_NAMES = {
    "passed": "passed",
    "failed": "failed",
    "flagged": "flagged (shadow)",
    "failed_open": "failed open",
    "skipped": "skipped",
    "exhausted": "exhausted",
    "not_triggered": "not triggered",
    "disabled": "disabled",
}


def readable(value: Any) -> str:
    """A status, category or reason for people: ``failed_open`` as "failed open"."""
    if value is None:
        return ""
    return _STATUS_NAMES.get(str(value), str(value).replace("_", " "))
