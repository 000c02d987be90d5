"""``report.html``: one self-contained page (inline CSS and SVG, no script, no external asset).

Charts: the confusion matrix, judged and labelled FAILs per category, and a latency
histogram; then a table of every record. Every text from the dataset or the judge is escaped.
"""

from __future__ import annotations

from html import escape
from typing import Any

_BINS = 10
_BAR = 200  # width in pixels of the longest bar
_CSS = (
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
    "text-align:left;vertical-align:top}td.text{max-width:32em;white-space:pre-wrap}"
    ".FAIL{color:#b00020}.PASS{color:#1b5e20}svg{display:block;margin:1em 0}"
    "svg text{font-size:12px;font-family:system-ui,sans-serif}"
)


def _text(value: Any) -> str:
    return "" if value is None else escape(str(value))


def _svg(width: int, height: int, body: list[str], title: str) -> str:
    return (
        f'<svg width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(title)}">{"".join(body)}</svg>'
    )


def confusion_svg(confusion: dict[str, int]) -> str:
    """A 2x2 matrix: rows labelled PASS/FAIL, columns judged PASS/FAIL; agreement in green."""
    cells = [
        ("PASS", "PASS", confusion["labelPassJudgedPass"]),
        ("PASS", "FAIL", confusion["labelPassJudgedFail"]),
        ("FAIL", "PASS", confusion["labelFailJudgedPass"]),
        ("FAIL", "FAIL", confusion["labelFailJudgedFail"]),
    ]
    body = [
        '<text x="110" y="15">judged PASS</text><text x="210" y="15">judged FAIL</text>',
        '<text x="0" y="65">labelled PASS</text><text x="0" y="165">labelled FAIL</text>',
    ]
    for index, (label, judged, count) in enumerate(cells):
        x, y = 100 + 100 * (index % 2), 25 + 100 * (index // 2)
        fill = "#c8e6c9" if label == judged else "#ffcdd2"
        body.append(
            f'<rect x="{x}" y="{y}" width="96" height="96" fill="{fill}"/>'
            f'<text x="{x + 40}" y="{y + 52}">{count}</text>'
        )
    return _svg(300, 225, body, "confusion matrix")


def categories_svg(by_category: dict[str, dict[str, int]]) -> str:
    """Per category, a bar of judged FAILs and one of labelled FAILs."""
    most = max((max(n["judged"], n["labelled"]) for n in by_category.values()), default=0)
    body: list[str] = []
    for row, (name, counts) in enumerate(by_category.items()):
        y = 10 + row * 40
        body.append(f'<text x="0" y="{y + 12}">{escape(name)}</text>')
        for offset, (key, fill) in enumerate((("judged", "#5c6bc0"), ("labelled", "#ffa726"))):
            width = round(_BAR * counts[key] / most) if most else 0
            bar_y = y + offset * 16
            body.append(
                f'<rect x="140" y="{bar_y}" width="{width}" height="14" fill="{fill}"/>'
                f'<text x="{145 + width}" y="{bar_y + 12}">{key} {counts[key]}</text>'
            )
    return _svg(140 + _BAR + 110, 20 + 40 * len(by_category), body, "FAILs by category")


def latency_svg(latencies: list[float]) -> str:
    """A histogram of judgement latencies in ``_BINS`` equal bins."""
    if not latencies:
        return "<p>No judgement latencies.</p>"
    low, high = min(latencies), max(latencies)
    step = (high - low) / _BINS or 1.0
    counts = [0] * _BINS
    for value in latencies:
        counts[min(int((value - low) / step), _BINS - 1)] += 1
    most = max(counts)
    body = []
    for index, count in enumerate(counts):
        height = round(120 * count / most)
        x = 10 + index * 30
        body.append(
            f'<rect x="{x}" y="{130 - height}" width="26" height="{height}" fill="#26a69a">'
            f"<title>{low + index * step:.1f}-{low + (index + 1) * step:.1f} ms: {count}</title>"
            "</rect>"
        )
    body.append(f'<text x="10" y="148">{low:.1f} ms</text>')
    body.append(f'<text x="{10 + 30 * _BINS - 60}" y="148">{high:.1f} ms</text>')
    return _svg(20 + 30 * _BINS, 155, body, "latency histogram")


def _figures(report: dict[str, Any]) -> str:
    keys = ("records", "labelled", "accuracy", "kappa", "falseFailRate", "falsePassRate")
    rows = [(key, report[key]) for key in keys]
    rows += [("unreadable", report["unreadable"]), ("costUsd", report["costUsd"])]
    rows += [(f"latencyMs {p}", report["latencyMs"][p]) for p in ("p50", "p95")]
    shown = "".join(
        f"<tr><th>{escape(k)}</th><td>{'-' if v is None else _text(v)}</td></tr>" for k, v in rows
    )
    return f"<table>{shown}</table>"


def _verdict_class(value: Any) -> str:
    return f' class="{value}"' if value in ("PASS", "FAIL") else ""


_COLUMNS = ("line", "id", "label", "judged", "category", "status", "reason")
_TEXTS = ("userMessage", "reply", "feedback")


def _records(rows: list[dict[str, Any]]) -> str:
    head = "".join(f"<th>{name}</th>" for name in (*_COLUMNS, *_TEXTS))
    body = []
    for row in rows:
        cells = [f"<td{_verdict_class(row[c])}>{_text(row[c])}</td>" for c in _COLUMNS]
        cells += [f'<td class="text">{_text(row[c])}</td>' for c in _TEXTS]
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def render_html(report: dict[str, Any]) -> str:
    """The whole page for ``report`` (as built by ``build_report``)."""
    latencies = [r["latencyMs"] for r in report["results"] if r["latencyMs"] is not None]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>replyguard eval: {escape(report['dataset'])}</title><style>{_CSS}</style>"
        f"</head><body><h1>replyguard eval</h1><p>{escape(report['dataset'])}</p>"
        f"{_figures(report)}<h2>Confusion matrix (labelled records)</h2>"
        f"{confusion_svg(report['confusion'])}<h2>FAILs by category</h2>"
        f"{categories_svg(report['byCategory'])}<h2>Judgement latency</h2>"
        f"{latency_svg(latencies)}<h2>Records</h2>{_records(report['results'])}"
        "</body></html>\n"
    )
