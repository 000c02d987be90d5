"""``report.json`` (the figures of DESIGN.md "File formats", then one row per record), the
summary table printed by ``replyguard eval``, and writing both report files.

Agreement is over labelled records. A record skipped by a pre-check, or failed open (an
unreadable verdict included), counts as judged PASS: its reply would be delivered as it is.
Latency percentiles (nearest rank) are over the records that got a verdict; under replay they
measure parsing alone (no model is called), so the page leaves them out.

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
    PASS,
    Categorised,
    Confusion,
    accuracy,
    by_category,
    confusion,
    false_fail_rate,
    false_pass_rate,
    kappa,
)
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


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else plural or word + 's'}"


def headline(report: dict[str, Any]) -> str:
    """One sentence on how far the judge agrees with the labels (lower case, no full stop).

    "the judge agrees with the labels on 22 of 24 (kappa 0.83); 1 false FAIL, 1 false PASS"
    """
    c, labelled = report["confusion"], report["labelled"]
    if not labelled:
        failed = sum(row["judged"] == "FAIL" for row in report["results"])
        return (
            f"no record is labelled, so agreement is not measured; the judge failed "
            f"{failed} of {_plural(report['records'], 'record')}"
        )
    agreed = c["labelPassJudgedPass"] + c["labelFailJudgedFail"]
    kappa_value = report["kappa"]
    shown = (
        "kappa undefined: one answer throughout"
        if kappa_value is None
        else (f"kappa {kappa_value:.2f}")
    )
    sentence = (
        f"the judge agrees with the labels on {agreed} of {labelled} ({shown}); "
        f"{_plural(c['labelPassJudgedFail'], 'false FAIL')}, "
        f"{_plural(c['labelFailJudgedPass'], 'false PASS', 'false PASSes')}"
    )
    if report["unreadable"]:
        verdicts = _plural(report["unreadable"], "unreadable verdict")
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
    ``kappa`` (Cohen's, PASS/FAIL) and ``agreedWithPanel``."""
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
        }
    return dict(sorted(panel.items()))


def _figure(value: float | None, form: str = "{:.3f}") -> str:
    return "-" if value is None else form.format(value)


def summary(report: dict[str, Any]) -> str:
    """The short table ``replyguard eval`` prints."""
    c, latency = report["confusion"], report["latencyMs"]
    how = "replayed" if report["replay"] else f"judged live by {report['judgeModel']}"
    lines = [
        f"replyguard eval: {report['records']} records ({how}), {report['labelled']} labelled",
        f"{report['headline'][0].upper()}{report['headline'][1:]}.",
        f"{'':16}{'judged PASS':>13}{'judged FAIL':>13}",
        f"{'labelled PASS':16}{c['labelPassJudgedPass']:>13}{c['labelPassJudgedFail']:>13}",
        f"{'labelled FAIL':16}{c['labelFailJudgedPass']:>13}{c['labelFailJudgedFail']:>13}",
        f"accuracy {_figure(report['accuracy'])}  kappa {_figure(report['kappa'])}  "
        f"false FAIL rate {_figure(report['falseFailRate'])}  "
        f"false PASS rate {_figure(report['falsePassRate'])}",
        f"statuses: {', '.join(f'{k} {v}' for k, v in report['statuses'].items())}; "
        f"awaiting the user {report['awaitingUser']}; unreadable {report['unreadable']}",
        f"cost ${report['costUsd']:.6f}  latency p50 {_figure(latency['p50'], '{:.1f} ms')}  "
        f"p95 {_figure(latency['p95'], '{:.1f} ms')}",
    ]
    for name, member in report.get("panel", {}).items():
        lines.append(
            f"panel member {name}: agrees with the labels on {member['agreed']} of "
            f"{member['labelled']} (accuracy {_figure(member['accuracy'])}, kappa "
            f"{_figure(member['kappa'])}), with the panel on {member['agreedWithPanel']} of "
            f"{member['answered']}"
        )
    if report["byCategory"]:
        lines.append(f"{'category':16}{'judged':>9}{'labelled':>9}{'agreed':>9}")
        lines += [
            f"{name:16}{n['judged']:>9}{n['labelled']:>9}{n['agreed']:>9}"
            for name, n in report["byCategory"].items()
        ]
    return "\n".join(lines)


def write_reports(report: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.html`` into ``out`` (made if missing)."""
    out.mkdir(parents=True, exist_ok=True)
    json_path, html_path = out / "report.json", out / "report.html"
    json_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", "utf-8")
    html_path.write_text(render_html(report), "utf-8")
    return json_path, html_path
