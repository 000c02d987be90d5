"""``report.html``: one self-contained page (inline CSS and SVG; no script, no external asset).

In order: a headline (the agreement sentence, a warning when records are marked synthetic, the
dataset, what produced the verdicts: live calls to the judge model, or under replay the recorded
outputs and the models that wrote them, the date and records), the trust gate's answer and the
bias probes (when the run had them), the figures with readable names, rounded values and 95 %
intervals, how many more labels would narrow them to +-5 points, a table per FAIL category with
recall and precision, the disagreements with the judge's feedback, the confusion matrix and
FAILs by category, a latency histogram with labelled axes (live runs only: under replay the
latencies measure parsing), then every record in a table that fits the page width. Long texts
are clipped in the table, with the whole text one click away (``<details>``). Every text from
the dataset or the judge is escaped.

The charts (``charts``) are drawn by hand as SVG.
"""

from __future__ import annotations

import re
from html import escape
from typing import Any

from replyguard.evaluation.charts import categories_svg, confusion_svg, latency_svg
from replyguard.evaluation.gate import describe as describe_gate
from replyguard.evaluation.probes import describe as describe_probes
from replyguard.evaluation.wording import (
    five_points,
    plural,
    readable,
    span,
    synthetic_note,
    verdict_source,
)

_CLIP = 160  # characters of a text shown in the records table before "show all"
_CSS = """
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1f2328;margin:0;
  background:#f6f8fa}
main{max-width:1200px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:1.6em;margin:0 0 .2em}h2{font-size:1.2em;margin:1.8em 0 .6em}
.lead{font-size:1.2em;margin:.4em 0 1em}
.meta{display:flex;flex-wrap:wrap;gap:.4em 1.6em;margin:0;padding:0;list-style:none;
  color:#57606a}
.meta b{color:#1f2328;font-weight:600}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(190px,1fr));gap:12px}
.card,.panel{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:12px 14px}
.card .value{font-size:1.5em;font-weight:600}.card .name{color:#57606a}
.card .note{color:#57606a;font-size:.85em}
.charts{display:flex;flex-wrap:wrap;gap:16px}.charts .panel{flex:1 1 340px}
.charts .panel.wide{flex-basis:100%}
.panel h3{margin:0 0 .4em;font-size:1em}
svg{display:block;max-width:100%;height:auto}
svg text{font:12px system-ui,sans-serif;fill:#1f2328}
.disagreement{margin:0 0 12px}
.disagreement h3{margin:0 0 .4em;font-size:1em}
.disagreement dl{display:grid;grid-template-columns:9em minmax(0,1fr);gap:.3em 1em;margin:0}
.disagreement dt{color:#57606a}.disagreement dd{margin:0}
table{width:100%;table-layout:fixed;border-collapse:collapse;background:#fff}
th,td{border:1px solid #d0d7de;padding:6px 8px;text-align:left;vertical-align:top}
th{background:#eef1f4;font-weight:600}
td,dd{overflow-wrap:anywhere;word-break:break-word}
.text{white-space:pre-wrap}
tr.disagrees td{background:#fff5f5}
details summary{cursor:pointer;list-style-position:inside}
details summary::marker{color:#0969da}.more{color:#0969da}
details[open]>summary>span{display:none}
details[open]>summary::after{content:"(show less)";color:#0969da}
details[open] summary{margin-bottom:.3em}
.FAIL{color:#b42318;font-weight:600}.PASS{color:#1a7f37;font-weight:600}
.muted{color:#57606a}
.nobreak{white-space:nowrap}
.warning{background:#fff8c5;border:1px solid #d4a72c;border-radius:8px;padding:10px 14px}
"""


def _text(value: Any) -> str:
    return "" if value is None else escape(str(value))


def clipped(value: Any, limit: int = _CLIP) -> str:
    """``value`` escaped; when longer than ``limit``, its start with the whole text behind a
    "show all" toggle."""
    if value is None or value == "":
        return '<span class="muted">-</span>'
    text = str(value)
    if len(text) <= limit:
        return f'<span class="text">{escape(text)}</span>'
    return (
        f'<details><summary><span class="text">{escape(text[:limit].rstrip())}…</span> '
        f'<span class="more">(show all {len(text)} characters)</span></summary>'
        f'<span class="text">{escape(text)}</span></details>'
    )


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


# -- sections -----------------------------------------------------------------------------------


_RANGE = re.compile(r"-?\d+(?:\.\d+)? to -?\d+(?:\.\d+)?(?: %)?")


def _unbroken(text: str) -> str:
    """``text`` (HTML of our own words) with each range ("74.2 to 97.7 %") kept on one line."""
    return _RANGE.sub(lambda found: f'<span class="nobreak">{found.group()}</span>', text)


def _header(report: dict[str, Any]) -> str:
    """The title, the agreement sentence, a warning when records are synthetic, and what
    produced the verdicts: under replay the recorded outputs (and who wrote them), never the
    configured judge, which judged nothing."""
    records = f"{report['records']} ({report['labelled']} labelled)"
    if report["replay"]:
        judging = [("Verdicts", verdict_source(report))]
    else:
        judging = [("Judge model", report["judgeModel"]), ("Judging", verdict_source(report))]
    items = [
        ("Dataset", report["dataset"]),
        *judging,
        ("Mode", report["mode"]),
        ("Date", report["createdAt"].replace("T", " ").replace("Z", " UTC")),
        ("Records", records),
    ]
    meta = "".join(f"<li>{escape(k)}: <b>{_text(v)}</b></li>" for k, v in items)
    sentence = report["headline"]
    note = synthetic_note(report)
    warning = (
        f'<p class="warning"><b>Synthetic data:</b> {escape(note)}.</p>' if note is not None else ""
    )
    return (
        f"<header><h1>replyguard eval: {escape(report['dataset'])}</h1>"
        f'<p class="lead">{_unbroken(escape(sentence[0].upper() + sentence[1:]))}.</p>{warning}'
        f'<ul class="meta">{meta}</ul></header>'
    )


def _card(name: str, value: str, note: str = "") -> str:
    """A figure's card; ``note`` is HTML (escaped by the caller)."""
    shown = f'<div class="note">{note}</div>' if note else ""
    return (
        f'<div class="card"><div class="name">{escape(name)}</div>'
        f'<div class="value">{escape(value)}</div>{shown}</div>'
    )


def _interval(entry: dict[str, Any], *, percent: bool = True, digits: int = 3) -> str:
    """A 95 % interval as HTML that a line does not break inside."""
    return f'<span class="nobreak">{escape(span(entry, percent=percent, digits=digits))}</span>'


def _sure(entry: dict[str, Any], *, percent: bool = True, digits: int = 3) -> str:
    """A card's line (HTML) on a figure's 95 % interval and the labels behind it."""
    labels = plural(entry["n"], "label")
    if entry["low"] is None:
        return f"no interval ({labels})"
    return f"95 % interval {_interval(entry, percent=percent, digits=digits)}, {labels}"


def _figures(report: dict[str, Any]) -> str:
    c, intervals = report["confusion"], report["intervals"]
    labelled_pass = c["labelPassJudgedPass"] + c["labelPassJudgedFail"]
    labelled_fail = c["labelFailJudgedPass"] + c["labelFailJudgedFail"]
    agreed = c["labelPassJudgedPass"] + c["labelFailJudgedFail"]
    kappa = report["kappa"]
    cards = [
        _card(
            "Agreement",
            _percent(report["accuracy"]),
            f"{agreed} of {report['labelled']}; {_sure(intervals['accuracy'])}",
        ),
        _card(
            "Cohen's kappa",
            "-" if kappa is None else f"{kappa:.2f}",
            f"{_sure(intervals['kappa'], percent=False, digits=2)}; 1 is perfect, 0 chance",
        ),
        _card(
            "False FAIL rate",
            _percent(report["falseFailRate"]),
            f"{c['labelPassJudgedFail']} of {labelled_pass} labelled PASS judged FAIL; "
            f"{_sure(intervals['falseFailRate'])}",
        ),
        _card(
            "False PASS rate",
            _percent(report["falsePassRate"]),
            f"{c['labelFailJudgedPass']} of {labelled_fail} labelled FAIL judged PASS; "
            f"{_sure(intervals['falsePassRate'])}",
        ),
        _card("Unreadable verdicts", str(report["unreadable"]), "counted as PASS (fail open)"),
    ]
    latency = report["latencyMs"]
    if report["replay"]:
        cards.append(_card("Judge cost", "$0", "replayed: no model called"))
    else:
        cards.append(_card("Judge cost", f"${report['costUsd']:.4f}", "all records"))
        if latency["p50"] is not None:
            cards.append(
                _card("Latency", f"{latency['p50']:.0f} ms", f"median; p95 {latency['p95']:.0f} ms")
            )
    statuses = ", ".join(f"{readable(k)} {v}" for k, v in report["statuses"].items())
    method = intervals["method"]
    notes = [
        f"95 % intervals: Wilson score intervals for the rates; for kappa a percentile bootstrap "
        f"of {method['resamples']} resamples with a fixed seed (the same labels give the same "
        "interval).",
    ]
    narrower = five_points(report)
    if narrower is not None:
        notes.append(f"{narrower[0].upper()}{narrower[1:]}.")
    notes.append(f"Outcomes: {statuses}.")
    shown = "".join(f'<p class="muted">{escape(note)}</p>' for note in notes)
    return f'<h2>Figures</h2><div class="cards">{"".join(cards)}</div>{shown}'


def _categories(report: dict[str, Any]) -> str:
    """Per category: FAILs judged and labelled, and over the labelled records recall (of its
    labelled FAILs, the share the judge failed in it) and precision (of the labelled records
    the judge failed in it, the share labelled so), each with its 95 % interval."""
    if not report["byCategory"]:
        return ""
    rates = report["intervals"]["byCategory"]

    def rate(agreed: int, entry: dict[str, Any] | None) -> str:
        if entry is None or not entry["n"]:
            return '<span class="muted">-</span>'
        return (
            f"{agreed} of {entry['n']}: {_percent(entry['value'])} "
            f'<span class="muted">({_interval(entry)})</span>'
        )

    rows = "".join(
        f"<tr><td>{escape(readable(name))}</td><td>{n['judged']}</td><td>{n['labelled']}</td>"
        f"<td>{n['agreed']}</td><td>{rate(n['agreed'], rates.get(name, {}).get('recall'))}</td>"
        f"<td>{rate(n['agreed'], rates.get(name, {}).get('precision'))}</td></tr>"
        for name, n in report["byCategory"].items()
    )
    return (
        '<h2>By category</h2><table><thead><tr><th style="width:22%">Category</th>'
        '<th style="width:12%">Judged FAIL</th><th style="width:12%">Labelled FAIL</th>'
        '<th style="width:12%">Agreed</th><th style="width:21%">Recall (95 % interval)</th>'
        f'<th style="width:21%">Precision (95 % interval)</th></tr></thead><tbody>{rows}</tbody>'
        "</table>"
        '<p class="muted">Judged FAIL counts every record, the rest the labelled ones. Recall: '
        "of the records labelled FAIL in the category, the share the judge failed in it. "
        "Precision: of the labelled records the judge failed in the category, the share "
        "labelled so.</p>"
    )


def _verdict(value: Any, category: Any = None) -> str:
    if value not in ("PASS", "FAIL"):
        return '<span class="muted">unlabelled</span>'
    shown = f' <span class="muted">({escape(readable(category))})</span>' if category else ""
    return f'<span class="{value}">{value}</span>{shown}'


def _name(row: dict[str, Any]) -> str:
    return f"{row['id']} (line {row['line']})" if row["id"] else f"line {row['line']}"


def _disagreements(rows: list[dict[str, Any]]) -> str:
    wrong = [row for row in rows if row["agrees"] is False]
    if not wrong:
        return "<h2>Disagreements</h2><p>None: the judge agrees with every labelled record.</p>"
    cards = []
    for row in wrong:
        kind = "false FAIL" if row["judged"] == "FAIL" else "false PASS"
        said = row["feedback"] or (f"({readable(row['reason'])})" if row["reason"] else None)
        status = row["status"]
        shown = "" if status in ("passed", "failed") else escape(readable(status))
        cards.append(
            f'<section class="panel disagreement"><h3>{escape(_name(row))}: {kind}</h3><dl>'
            f"<dt>Label</dt><dd>{_verdict(row['label'], row['labelCategory'])}</dd>"
            f"<dt>Judged</dt><dd>{_verdict(row['judged'], row['category'])} "
            f'<span class="muted">{shown}</span></dd>'
            f"<dt>Judge feedback</dt><dd>{clipped(said, 600)}</dd>"
            f"<dt>Judge reasoning</dt><dd>{clipped(row['reasoning'], 600)}</dd>"
            f"<dt>User message</dt><dd>{clipped(row['userMessage'], 400)}</dd>"
            f"<dt>Reply</dt><dd>{clipped(row['reply'], 400)}</dd></dl></section>"
        )
    return f"<h2>Disagreements ({len(wrong)})</h2>{''.join(cards)}"


def _panel(report: dict[str, Any]) -> str:
    """Each judge panel member's agreement with the labels and with the panel (when judged
    by a panel)."""
    members = report.get("panel") or {}
    if not members:
        return ""

    def figure(entry: dict[str, Any]) -> str:
        if entry["value"] is None:
            return "-"
        return f'{entry["value"]:.3f} <span class="muted">({_interval(entry)})</span>'

    rows = "".join(
        f"<tr><td>{escape(name)}</td><td>{m['agreed']} of {m['labelled']}</td>"
        f"<td>{figure(m['intervals']['accuracy'])}</td><td>{figure(m['intervals']['kappa'])}</td>"
        f"<td>{m['agreedWithPanel']} of {m['answered']}</td></tr>"
        for name, m in members.items()
    )
    return (
        "<h2>Judge panel members</h2><table><thead><tr><th>Member</th>"
        "<th>Agrees with the labels</th><th>Accuracy (95 % interval)</th>"
        "<th>Kappa (95 % interval)</th>"
        f"<th>Agrees with the panel</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _charts(report: dict[str, Any]) -> str:
    panels = [
        ("Confusion matrix (labelled records)", confusion_svg(report["confusion"])),
        ("FAILs by category", categories_svg(report["byCategory"])),
    ]
    if not report["replay"]:
        latencies = [r["latencyMs"] for r in report["results"] if r["latencyMs"] is not None]
        panels.append(("Judgement latency", latency_svg(latencies)))
    shown = "".join(
        f'<div class="panel{" wide" if index == 2 else ""}"><h3>{escape(title)}</h3>{svg}</div>'
        for index, (title, svg) in enumerate(panels)
    )
    return f'<h2>Charts</h2><div class="charts">{shown}</div>'


# (heading, width) of each column of the records table
_COLUMNS = (
    ("Record", "12%"),
    ("Label", "11%"),
    ("Judged", "11%"),
    ("Outcome", "9%"),
    ("User message", "19%"),
    ("Reply", "19%"),
    ("Judge feedback", "19%"),
)


def _records(rows: list[dict[str, Any]]) -> str:
    head = "".join(f'<th style="width:{w}">{escape(name)}</th>' for name, w in _COLUMNS)
    body = []
    for row in sorted(rows, key=lambda r: (r["agrees"] is not False, r["line"])):
        outcome = readable(row["status"]) + (
            f": {readable(row['reason'])}" if row["reason"] else ""
        )
        cells = [
            _text(_name(row)),
            _verdict(row["label"], row["labelCategory"]),
            _verdict(row["judged"], row["category"]),
            escape(outcome),
            clipped(row["userMessage"]),
            clipped(row["reply"]),
            clipped(row["feedback"]),
        ]
        mark = ' class="disagrees"' if row["agrees"] is False else ""
        body.append(f"<tr{mark}>{''.join(f'<td>{cell}</td>' for cell in cells)}</tr>")
    return (
        f"<h2>Records ({len(rows)})</h2>"
        '<p class="muted">Disagreements first (shaded), then in dataset order. Long texts are '
        "clipped: open one to read it all.</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def _trust(report: dict[str, Any]) -> str:
    """The trust gate's answer and the bias probes, when the run had them."""
    parts = []
    gate = report.get("trust")
    if gate is not None:
        first, *rest = describe_gate(gate)
        items = "".join(f"<li>{_unbroken(escape(line.strip()))}</li>" for line in rest)
        tone = "PASS" if gate["verdict"] == "TRUSTED" else "FAIL"
        parts.append(
            f'<div class="panel" id="trust"><h3 class="{tone}">{escape(first)}</h3>'
            f"<ul>{items}</ul></div>"
        )
    probes = report.get("biasProbes")
    if probes is not None:
        first, *rest = describe_probes(probes)
        items = "".join(f"<li>{_unbroken(escape(line.strip()))}</li>" for line in rest)
        parts.append(
            f'<div class="panel" id="probes"><h3>{escape(first)}</h3><ul>{items}</ul></div>'
        )
    return f"<h2>Trust</h2>{''.join(parts)}" if parts else ""


def render_html(report: dict[str, Any]) -> str:
    """The whole page for ``report`` (as built by ``build_report``)."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>replyguard eval: {escape(report['dataset'])}</title><style>{_CSS}</style>"
        f"</head><body><main>{_header(report)}{_trust(report)}{_figures(report)}"
        f"{_categories(report)}{_disagreements(report['results'])}{_panel(report)}"
        f"{_charts(report)}"
        f"{_records(report['results'])}"
        "</main></body></html>\n"
    )
