"""The hand-drawn SVG charts of ``report.html``: the confusion matrix, FAILs by category and
the latency histogram.

A 2x2 matrix and a few bars need no plotting library: drawn by hand, the page stays small,
deterministic and readable without one. Every text from the dataset is escaped.
"""

from __future__ import annotations

import math
from html import escape

from replyguard.evaluation.wording import readable

_BINS = 10


def _svg(width: int, height: int, body: list[str], title: str) -> str:
    return (
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>{"".join(body)}</svg>'
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
        '<text x="160" y="16" text-anchor="middle">judged PASS</text>',
        '<text x="260" y="16" text-anchor="middle">judged FAIL</text>',
        '<text x="102" y="76" text-anchor="end">labelled PASS</text>',
        '<text x="102" y="176" text-anchor="end">labelled FAIL</text>',
    ]
    for index, (label, judged, count) in enumerate(cells):
        x, y = 112 + 100 * (index % 2), 26 + 100 * (index // 2)
        agree = label == judged
        fill = "#d1f0d9" if agree else "#fbd5d0"
        name = "agree" if agree else f"false {judged}"
        body.append(
            f'<rect x="{x}" y="{y}" width="96" height="96" rx="4" fill="{fill}"/>'
            f'<text x="{x + 48}" y="{y + 50}" text-anchor="middle" '
            f'style="font-size:22px;font-weight:600">{count}</text>'
            f'<text x="{x + 48}" y="{y + 72}" text-anchor="middle">{name}</text>'
        )
    return _svg(320, 228, body, "confusion matrix of the labelled records")


def categories_svg(by_category: dict[str, dict[str, int]]) -> str:
    """Per category, a bar of judged FAILs and one of labelled FAILs, with a legend."""
    if not by_category:
        return '<p class="muted">No FAIL, judged or labelled.</p>'
    most = max(max(n["judged"], n["labelled"]) for n in by_category.values()) or 1
    bar = 180
    body = [
        '<rect x="130" y="4" width="12" height="12" fill="#5c6bc0"/>'
        '<text x="147" y="14">judged FAIL</text>'
        '<rect x="240" y="4" width="12" height="12" fill="#f4a340"/>'
        '<text x="257" y="14">labelled FAIL</text>'
    ]
    for row, (name, counts) in enumerate(by_category.items()):
        y = 28 + row * 40
        body.append(f'<text x="122" y="{y + 20}" text-anchor="end">{escape(readable(name))}</text>')
        for offset, (key, fill) in enumerate((("judged", "#5c6bc0"), ("labelled", "#f4a340"))):
            width = round(bar * counts[key] / most)
            bar_y = y + offset * 16
            body.append(
                f'<rect x="130" y="{bar_y}" width="{max(width, 1)}" height="14" fill="{fill}">'
                f"<title>{escape(readable(name))}: {key} {counts[key]}</title></rect>"
                f'<text x="{135 + width}" y="{bar_y + 12}">{counts[key]}</text>'
            )
    return _svg(130 + bar + 40, 36 + 40 * len(by_category), body, "FAILs by category")


def _ticks(high: int) -> list[int]:
    """Whole-number ticks from 0 to at least ``high``, at most about five."""
    step = max(1, math.ceil(high / 5))
    return list(range(0, high + step, step))


def latency_svg(latencies: list[float]) -> str:
    """A histogram of judgement latencies, with both axes ticked and labelled."""
    if not latencies:
        return '<p class="muted">No record was judged by a model.</p>'
    bins = max(1, min(_BINS, len(latencies)))
    low, high = min(latencies), max(latencies)
    step = (high - low) / bins or 1.0
    counts = [0] * bins
    for value in latencies:
        counts[min(int((value - low) / step), bins - 1)] += 1
    ticks = _ticks(max(counts))
    top = ticks[-1]
    left, bottom, plot_w, plot_h = 56, 170, 440, 150
    width = plot_w / bins
    body = [
        f'<line x1="{left}" y1="{bottom}" x2="{left + plot_w}" y2="{bottom}" stroke="#57606a"/>',
        f'<line x1="{left}" y1="{bottom - plot_h}" x2="{left}" y2="{bottom}" stroke="#57606a"/>',
    ]
    for tick in ticks:
        y = bottom - plot_h * tick / top
        body.append(
            f'<line x1="{left - 4}" y1="{y:.1f}" x2="{left}" y2="{y:.1f}" stroke="#57606a"/>'
            f'<text x="{left - 7}" y="{y + 4:.1f}" text-anchor="end">{tick}</text>'
        )
    for index, count in enumerate(counts):
        height = plot_h * count / top
        x = left + index * width
        body.append(
            f'<rect x="{x + 1:.1f}" y="{bottom - height:.1f}" width="{width - 2:.1f}" '
            f'height="{height:.1f}" fill="#2a9d8f"><title>{low + index * step:.0f}-'
            f"{low + (index + 1) * step:.0f} ms: {count}</title></rect>"
        )
    for index in range(0, bins + 1, max(1, bins // 5)):
        x = left + index * width
        body.append(
            f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" stroke="#57606a"/>'
            f'<text x="{x:.1f}" y="{bottom + 17}" text-anchor="middle">'
            f"{low + index * step:.0f}</text>"
        )
    body.append(
        f'<text x="{left + plot_w / 2}" y="{bottom + 36}" text-anchor="middle">'
        "judgement latency (ms)</text>"
        f'<text transform="translate(14 {bottom - plot_h / 2}) rotate(-90)" '
        'text-anchor="middle">records</text>'
    )
    return _svg(left + plot_w + 24, bottom + 44, body, "histogram of judgement latencies")
