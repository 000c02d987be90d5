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


def plural(count: int, word: str, many: str | None = None) -> str:
    """``count`` and the noun: "1 record", "2 records", "2 false PASSes"."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def span(entry: dict[str, Any], *, percent: bool = False, digits: int = 3) -> str:
    """A figure's 95 % interval from its ``intervals`` entry: "0.742 to 0.977" (``digits``
    decimals), or as percentages "74.2 to 97.7 %"; "-" when it has none."""
    low, high = entry["low"], entry["high"]
    if low is None or high is None:
        return "-"
    if percent:
        return f"{100 * low:.1f} to {100 * high:.1f} %"
    return f"{low:.{digits}f} to {high:.{digits}f}"


def verdict_source(report: dict[str, Any]) -> str:
    """What produced the verdicts, for the summary and the page (lower case, no full stop)."""
    source = report["verdictSource"]
    if source["kind"] == "live":
        return f"live calls to the judge model {source['modelCalled']}"
    named = ", ".join(f"{model} ({count})" for model, count in source["recordedBy"].items())
    unknown = source["recordedByUnknown"]
    if not named:
        who = "the dataset does not say which model wrote them"
    elif unknown:
        verb = "names" if unknown == 1 else "name"
        who = f"written by {named}; {plural(unknown, 'record')} {verb} no model"
    else:
        who = f"written by {named}"
    return (
        "recorded judge outputs from the dataset (judgeOutput), parsed here; no model was "
        f"called; {who}"
    )


def synthetic_note(report: dict[str, Any]) -> str | None:
    """What the records marked synthetic mean (lower case, no full stop), or None: none is.

    Replayed, written judge texts measure no model; live, the judge was measured on written
    turns and labels, not on real traffic."""
    count, records = report["syntheticRecords"], report["records"]
    if not count:
        return None
    if count < records:
        verb = "is" if count == 1 else "are"
        return (
            f"{count} of {plural(records, 'record')} {verb} marked synthetic "
            "(written, not recorded): the figures mix them with recorded ones"
        )
    every = "the one record is" if records == 1 else f"all {records} records are"
    if report["replay"]:
        return (
            f"{every} marked synthetic (written, not recorded "
            "from real conversations and a real judge): the figures show the format and "
            "measure no model"
        )
    return (
        f"{every} marked synthetic (written, not recorded from "
        "real conversations): the figures measure the judge on these examples, not on real "
        "traffic"
    )


_FOR_5_POINTS = (
    ("accuracy", "agreement", "labelled records"),
    ("falseFailRate", "the false FAIL rate", "labelled PASS"),
    ("falsePassRate", "the false PASS rate", "labelled FAIL"),
)


def five_points(report: dict[str, Any]) -> str | None:
    """How many more labels would narrow each rate's 95 % interval to +-5 points (lower case,
    no full stop); None without labels."""
    more, intervals = report["labelsFor5Points"], report["intervals"]
    if more["accuracy"] is None:
        return None
    parts = []
    for key, name, kind in _FOR_5_POINTS:
        if more[key] is None:
            continue
        if more[key] == 0:
            parts.append(f"{name} is there already ({intervals[key]['n']} {kind})")
        else:
            total = intervals[key]["n"] + more[key]
            parts.append(f"{name} needs {more[key]} more {kind} ({total} in all)")
    return "for a 95 % interval of ±5 points at the rates observed, " + "; ".join(parts)
