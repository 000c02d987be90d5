"""``report.json`` (the figures of DESIGN.md "File formats", then one row per record), the
summary table printed by ``replyguard eval``, and writing both report files.

Agreement is over labelled records. A record skipped by a pre-check, or failed open (an
unreadable verdict included), counts as judged PASS: its reply would be delivered as it is.
Latency percentiles (nearest rank) are over the records that got a verdict.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from replyguard.evaluation.html import render_html
from replyguard.evaluation.run import RecordResult
from replyguard.evaluation.stats import (
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
        "category": result.judged_category,
        "status": result.judgement.status,
        "mode": result.judgement.mode,
        "reason": result.judgement.reason,
        "feedback": verdict.feedback if verdict is not None else None,
        "costUsd": verdict.cost_usd if verdict is not None else 0.0,
        "latencyMs": round(verdict.latency_ms, 2) if verdict is not None else None,
    }


def _confusion_json(matrix: Confusion) -> dict[str, int]:
    return {
        "labelPassJudgedPass": matrix.pass_pass,
        "labelPassJudgedFail": matrix.pass_fail,
        "labelFailJudgedPass": matrix.fail_pass,
        "labelFailJudgedFail": matrix.fail_fail,
    }


def build_report(
    results: Sequence[RecordResult], *, dataset: str, replay: bool, mode: str
) -> dict[str, Any]:
    """The ``report.json`` document."""
    labelled = [r for r in results if r.record.label is not None]
    matrix = confusion((r.record.label, r.judged) for r in labelled if r.record.label)
    latencies = [r.judgement.verdict.latency_ms for r in results if r.judgement.verdict]
    categories = [Categorised(r.judged_category, r.labelled_category) for r in results]
    statuses = Counter(r.judgement.status for r in results)
    p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
    return {
        "records": len(results),
        "labelled": len(labelled),
        "accuracy": _rounded(accuracy(matrix)),
        "kappa": _rounded(kappa(matrix)),
        "falseFailRate": _rounded(false_fail_rate(matrix)),
        "falsePassRate": _rounded(false_pass_rate(matrix)),
        "byCategory": by_category(categories),
        "unreadable": sum(r.unreadable for r in results),
        "costUsd": round(
            sum(r.judgement.verdict.cost_usd for r in results if r.judgement.verdict), 8
        ),
        "latencyMs": {
            "p50": None if p50 is None else round(p50, 2),
            "p95": None if p95 is None else round(p95, 2),
        },
        "confusion": _confusion_json(matrix),
        "statuses": dict(sorted(statuses.items())),
        "dataset": dataset,
        "replay": replay,
        "mode": mode,
        "results": [_row(r) for r in results],
    }


def _figure(value: float | None, form: str = "{:.3f}") -> str:
    return "-" if value is None else form.format(value)


def summary(report: dict[str, Any]) -> str:
    """The short table ``replyguard eval`` prints."""
    c, latency = report["confusion"], report["latencyMs"]
    how = "replayed" if report["replay"] else "judged live"
    lines = [
        f"replyguard eval: {report['records']} records ({how}), {report['labelled']} labelled",
        f"{'':16}{'judged PASS':>13}{'judged FAIL':>13}",
        f"{'labelled PASS':16}{c['labelPassJudgedPass']:>13}{c['labelPassJudgedFail']:>13}",
        f"{'labelled FAIL':16}{c['labelFailJudgedPass']:>13}{c['labelFailJudgedFail']:>13}",
        f"accuracy {_figure(report['accuracy'])}  kappa {_figure(report['kappa'])}  "
        f"false FAIL rate {_figure(report['falseFailRate'])}  "
        f"false PASS rate {_figure(report['falsePassRate'])}",
        f"statuses: {', '.join(f'{k} {v}' for k, v in report['statuses'].items())}; "
        f"unreadable {report['unreadable']}",
        f"cost ${report['costUsd']:.6f}  latency p50 {_figure(latency['p50'], '{:.1f} ms')}  "
        f"p95 {_figure(latency['p95'], '{:.1f} ms')}",
    ]
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
