"""``report.json`` (the figures of DESIGN.md "File formats", then one row per record), the
summary table printed by ``replyguard eval``, and writing both report files.

Agreement is over labelled records. A record skipped by a pre-check, or failed open (an
unreadable verdict included), counts as judged PASS: its reply would be delivered as it is.
Latency percentiles (nearest rank) are over the records that got a verdict; under replay they
measure parsing alone (no model is called), so the page leaves them out.

Each rate and kappa carries a 95 % interval and the labels behind it (``intervals``; see
``stats``), with how many more labels would narrow each rate to +-5 points
(``labelsFor5Points``); ``verdictSource`` says what produced the verdicts (under replay the
dataset's recorded outputs, no model called) and ``syntheticRecords`` how many records are
marked synthetic.

Every key is documented in ``docs/eval-report.md``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from replyguard.evaluation.html import render_html
from replyguard.evaluation.run import RecordResult
from replyguard.evaluation.stats import (
    FAIL,
    KAPPA_RESAMPLES,
    KAPPA_SEED,
    PASS,
    Categorised,
    Confusion,
    Interval,
    accuracy,
    by_category,
    confusion,
    false_fail_rate,
    false_pass_rate,
    kappa,
    kappa_interval,
    labels_for_half_width,
    wilson,
)
from replyguard.evaluation.wording import five_points, plural, span, synthetic_note, verdict_source
from replyguard.insights.report import percentile

_DIGITS = 4


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, _DIGITS)


def _row(result: RecordResult) -> dict[str, Any]:
    record, verdict = result.record, result.judgement.verdict
    return {
        "line": result.line,
        "id": record.id,
        "userMessage": record.user_message,
        "reply": record.reply.text,
        "label": record.label,
        "labelCategory": result.labelled_category,
        "judged": result.judged,
        "awaitingUser": result.awaiting_user,
        "category": result.judged_category,
        "status": result.judgement.status,
        "mode": result.judgement.mode,
        "reason": result.judgement.reason,
        "feedback": verdict.feedback if verdict is not None else None,
        "reasoning": verdict.reasoning if verdict is not None else None,
        "costUsd": verdict.cost_usd if verdict is not None else 0.0,
        "latencyMs": round(verdict.latency_ms, 2) if verdict is not None else None,
        "agrees": None if record.label is None else record.label == result.judged,
    }


def _confusion_json(matrix: Confusion) -> dict[str, int]:
    return {
        "labelPassJudgedPass": matrix.pass_pass,
        "labelPassJudgedFail": matrix.pass_fail,
        "labelFailJudgedPass": matrix.fail_pass,
        "labelFailJudgedFail": matrix.fail_fail,
    }


def _bounds(value: float | None, interval: Interval | None, n: int) -> dict[str, Any]:
    return {
        "value": _rounded(value),
        "low": None if interval is None else _rounded(interval.low),
        "high": None if interval is None else _rounded(interval.high),
        "n": n,
    }


def _rate(part: int, whole: int) -> dict[str, Any]:
    """A rate with its Wilson interval and the labels behind it."""
    return _bounds(part / whole if whole else None, wilson(part, whole), whole)


def _counts(matrix: Confusion) -> dict[str, tuple[int, int]]:
    """Each rate's ``(part, whole)``: what it counts out of how many labels."""
    return {
        "accuracy": (matrix.pass_pass + matrix.fail_fail, matrix.total),
        "falseFailRate": (matrix.pass_fail, matrix.pass_pass + matrix.pass_fail),
        "falsePassRate": (matrix.fail_pass, matrix.fail_pass + matrix.fail_fail),
    }


def _intervals(matrix: Confusion, labelled: Sequence[Categorised]) -> dict[str, Any]:
    """``intervals``: each figure's 95 % interval, and per category the share of its labelled
    FAILs the judge failed in it (``recall``) and of the labelled records the judge failed in
    it, the share labelled so (``precision``)."""
    rates = {name: _rate(*counts) for name, counts in _counts(matrix).items()}
    return {
        "level": 0.95,
        "method": {
            "rates": "wilson",
            "kappa": "percentile bootstrap",
            "resamples": KAPPA_RESAMPLES,
            "seed": KAPPA_SEED,
        },
        "accuracy": rates["accuracy"],
        "kappa": _bounds(kappa(matrix), kappa_interval(matrix), matrix.total),
        "falseFailRate": rates["falseFailRate"],
        "falsePassRate": rates["falsePassRate"],
        "byCategory": {
            name: {
                "recall": _rate(n["agreed"], n["labelled"]),
                "precision": _rate(n["agreed"], n["judged"]),
            }
            for name, n in by_category(labelled).items()
        },
    }


def _labels_for_5_points(matrix: Confusion) -> dict[str, int | None]:
    """How many more labels of the kind each rate counts (any, labelled PASS, labelled FAIL)
    would narrow its Wilson interval to +-5 points at the rate observed (None: no rate)."""
    return {
        name: labels_for_half_width(part / whole, whole) if whole else None
        for name, (part, whole) in _counts(matrix).items()
    }


def _verdict_source(
    results: Sequence[RecordResult], *, replay: bool, judge_model: str
) -> dict[str, Any]:
    """What produced the verdicts: live calls to ``modelCalled``, or the dataset's recorded
    judge outputs (no model called), counted by the model each record says wrote it."""
    if not replay:
        return {
            "kind": "live",
            "modelCalled": judge_model,
            "recordedBy": {},
            "recordedByUnknown": 0,
        }
    recorded = [r.record for r in results if r.record.judge_output is not None]
    models = Counter(r.judge_output_model for r in recorded if r.judge_output_model)
    return {
        "kind": "recorded",
        "modelCalled": None,
        "recordedBy": dict(sorted(models.items())),
        "recordedByUnknown": len(recorded) - sum(models.values()),
    }


def headline(report: dict[str, Any]) -> str:
    """One sentence on how far the judge agrees with the labels (lower case, no full stop).

    "the judge agrees with the labels on 22 of 24 (91.7 %, 95 % interval 74.2 to 97.7 %; kappa
    0.83, 95 % interval 0.57 to 1.00); 1 false FAIL, 1 false PASS"
    """
    c, labelled = report["confusion"], report["labelled"]
    if not labelled:
        failed = sum(row["judged"] == "FAIL" for row in report["results"])
        return (
            f"no record is labelled, so agreement is not measured; the judge failed "
            f"{failed} of {plural(report['records'], 'record')}"
        )
    agreed = c["labelPassJudgedPass"] + c["labelFailJudgedFail"]
    intervals = report["intervals"]
    kappa_value = report["kappa"]
    if kappa_value is None:
        shown = "kappa undefined: one answer throughout"
    elif intervals["kappa"]["low"] is None:
        shown = f"kappa {kappa_value:.2f}"
    else:
        shown = f"kappa {kappa_value:.2f}, 95 % interval {span(intervals['kappa'], digits=2)}"
    agreement = span(intervals["accuracy"], percent=True)
    rate = f"{100 * report['accuracy']:.1f} %, 95 % interval {agreement}"
    sentence = (
        f"the judge agrees with the labels on {agreed} of {labelled} ({rate}; {shown}); "
        f"{plural(c['labelPassJudgedFail'], 'false FAIL')}, "
        f"{plural(c['labelFailJudgedPass'], 'false PASS', 'false PASSes')}"
    )
    if report["unreadable"]:
        verdicts = plural(report["unreadable"], "unreadable verdict")
        sentence += f"; {verdicts} counted as PASS"
    return sentence


def build_report(
    results: Sequence[RecordResult],
    *,
    dataset: str,
    replay: bool,
    mode: str,
    judge_model: str,
    created: datetime | None = None,
) -> dict[str, Any]:
    """The ``report.json`` document (``created``: now, unless given)."""
    labelled = [r for r in results if r.record.label is not None]
    matrix = confusion((r.record.label, r.judged) for r in labelled if r.record.label)
    latencies = [r.judgement.verdict.latency_ms for r in results if r.judgement.verdict]
    categories = [Categorised(r.judged_category, r.labelled_category) for r in results]
    labelled_categories = [Categorised(r.judged_category, r.labelled_category) for r in labelled]
    statuses = Counter(r.judgement.status for r in results)
    reasons = Counter(r.judgement.reason for r in results if r.judgement.reason is not None)
    p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
    when = (created or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    report: dict[str, Any] = {
        "records": len(results),
        "labelled": len(labelled),
        "accuracy": _rounded(accuracy(matrix)),
        "kappa": _rounded(kappa(matrix)),
        "falseFailRate": _rounded(false_fail_rate(matrix)),
        "falsePassRate": _rounded(false_pass_rate(matrix)),
        "byCategory": by_category(categories),
        "intervals": _intervals(matrix, labelled_categories),
        "labelsFor5Points": _labels_for_5_points(matrix),
        "unreadable": sum(r.unreadable for r in results),
        "awaitingUser": sum(r.awaiting_user for r in results),
        "costUsd": round(
            sum(r.judgement.verdict.cost_usd for r in results if r.judgement.verdict), 8
        ),
        "latencyMs": {
            "p50": None if p50 is None else round(p50, 2),
            "p95": None if p95 is None else round(p95, 2),
        },
        "confusion": _confusion_json(matrix),
        "statuses": dict(sorted(statuses.items())),
        "reasons": dict(sorted(reasons.items())),
        "dataset": dataset,
        "replay": replay,
        "mode": mode,
        "judgeModel": judge_model,
        "verdictSource": _verdict_source(results, replay=replay, judge_model=judge_model),
        "syntheticRecords": sum(r.record.synthetic for r in results),
        "createdAt": when.isoformat().replace("+00:00", "Z"),
        "results": [_row(r) for r in results],
    }
    panel = _panel_json(results)
    if panel:
        report["panel"] = panel
    report["headline"] = headline(report)
    return report


def _panel_json(results: Sequence[RecordResult]) -> dict[str, dict[str, Any]]:
    """Each judge panel member's agreement with the labels (and with the panel), by name:
    ``answered`` records, ``labelled`` of those, ``agreed`` with the label, ``accuracy``,
    ``kappa`` (Cohen's, PASS/FAIL), ``agreedWithPanel`` and ``intervals`` (``accuracy`` and
    ``kappa``, each ``{"value", "low", "high", "n"}``)."""
    votes: dict[str, list[tuple[str, str | None, str]]] = {}
    for r in results:
        verdict = r.judgement.verdict
        if verdict is None:
            continue
        for member in verdict.members:
            if member.readable and member.fail_open_reason is None:
                said = FAIL if not member.passed else PASS
                votes.setdefault(member.model or "?", []).append((said, r.record.label, r.judged))
    panel = {}
    for name, rows in votes.items():
        matrix = confusion((label, said) for said, label, _ in rows if label is not None)
        panel[name] = {
            "answered": len(rows),
            "labelled": matrix.total,
            "agreed": matrix.pass_pass + matrix.fail_fail,
            "accuracy": _rounded(accuracy(matrix)),
            "kappa": _rounded(kappa(matrix)),
            "agreedWithPanel": sum(said == judged for said, _, judged in rows),
            "intervals": {
                "accuracy": _rate(matrix.pass_pass + matrix.fail_fail, matrix.total),
                "kappa": _bounds(kappa(matrix), kappa_interval(matrix), matrix.total),
            },
        }
    return dict(sorted(panel.items()))


def _figure(value: float | None, form: str = "{:.3f}") -> str:
    return "-" if value is None else form.format(value)


def _sentence(text: str) -> str:
    return f"{text[0].upper()}{text[1:]}."


_FIGURES = (
    ("accuracy", "accuracy"),
    ("kappa", "kappa"),
    ("falseFailRate", "false FAIL rate"),
    ("falsePassRate", "false PASS rate"),
)


def _figure_rows(report: dict[str, Any]) -> list[str]:
    """Each figure with its 95 % interval and the labels behind it."""
    intervals = report["intervals"]
    rows = [f"{'':16}{'value':>8}{'95 % interval':>16}{'labels':>8}"]
    for key, name in _FIGURES:
        entry = intervals[key]
        rows.append(f"{name:16}{_figure(report[key]):>8}{span(entry):>16}{entry['n']:>8}")
    method = intervals["method"]
    rows.append(
        f"(Wilson intervals; kappa's: bootstrap, {method['resamples']} resamples, fixed seed)"
    )
    return rows


def _category_rows(report: dict[str, Any]) -> list[str]:
    """The FAILs per category; recall and precision over the labelled records, each as
    agreed/labels with its 95 % interval."""
    if not report["byCategory"]:
        return []
    rates = report["intervals"]["byCategory"]

    def rate(agreed: int, entry: dict[str, Any] | None) -> str:
        if entry is None or not entry["n"]:
            return "-"
        return f"{agreed}/{entry['n']} {span(entry)}"

    rows = [f"{'category':16}{'judged':>7}{'labelled':>9}{'agreed':>7}  {'recall':22}precision"]
    for name, n in report["byCategory"].items():
        shown = rates.get(name, {})
        rows.append(
            f"{name:16}{n['judged']:>7}{n['labelled']:>9}{n['agreed']:>7}  "
            f"{rate(n['agreed'], shown.get('recall')):22}"
            f"{rate(n['agreed'], shown.get('precision'))}"
        )
    return rows


def summary(report: dict[str, Any]) -> str:
    """The short table ``replyguard eval`` prints."""
    c, latency = report["confusion"], report["latencyMs"]
    how = "replayed" if report["replay"] else f"judged live by {report['judgeModel']}"
    lines = [
        f"replyguard eval: {plural(report['records'], 'record')} ({how}), "
        f"{report['labelled']} labelled",
        _sentence(report["headline"]),
        _sentence(f"verdicts: {verdict_source(report)}"),
    ]
    warning = synthetic_note(report)
    if warning:
        lines.append(f"SYNTHETIC DATA: {warning}.")
    lines += [
        f"{'':16}{'judged PASS':>13}{'judged FAIL':>13}",
        f"{'labelled PASS':16}{c['labelPassJudgedPass']:>13}{c['labelPassJudgedFail']:>13}",
        f"{'labelled FAIL':16}{c['labelFailJudgedPass']:>13}{c['labelFailJudgedFail']:>13}",
        *_figure_rows(report),
    ]
    narrower = five_points(report)
    if narrower:
        lines.append(_sentence(narrower))
    lines += [
        f"statuses: {', '.join(f'{k} {v}' for k, v in report['statuses'].items())}; "
        f"awaiting the user {report['awaitingUser']}; unreadable {report['unreadable']}",
        f"cost ${report['costUsd']:.6f}  latency p50 {_figure(latency['p50'], '{:.1f} ms')}  "
        f"p95 {_figure(latency['p95'], '{:.1f} ms')}",
    ]
    for name, member in report.get("panel", {}).items():
        sure = member["intervals"]
        lines.append(
            f"panel member {name}: agrees with the labels on {member['agreed']} of "
            f"{member['labelled']} (accuracy {_figure(member['accuracy'])}, 95 % "
            f"{span(sure['accuracy'])}; kappa {_figure(member['kappa'])}, 95 % "
            f"{span(sure['kappa'])}), with the panel on {member['agreedWithPanel']} of "
            f"{member['answered']}"
        )
    lines += _category_rows(report)
    return "\n".join(lines)


def write_reports(report: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.html`` into ``out`` (made if missing)."""
    out.mkdir(parents=True, exist_ok=True)
    json_path, html_path = out / "report.json", out / "report.html"
    json_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", "utf-8")
    html_path.write_text(render_html(report), "utf-8")
    return json_path, html_path
