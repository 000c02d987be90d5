"""``run.py``'s ``chart.png``: six panels of the figures the rows carry (the hot paths, the
verified turn per pair, context assembly, concurrency, import time, fail-open and memory),
drawn when matplotlib is installed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from run_loopback import FAIL_OPEN_TIMEOUT
from run_table import Row
from sampling import median

MISS, OK = "#d9534f", "#5cb85c"


def chart(rows: list[Row], path: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no chart (pip install 'matplotlib>=3.8,<4')"

    fig, axes = plt.subplots(2, 3, figsize=(17, 9.5))
    fig.suptitle("replyguard hot-path benchmarks (medians; dashed lines are targets)")
    _hot(axes[0][0], rows)
    _verified(axes[0][1], rows)
    _context(axes[0][2], rows)
    _concurrency(axes[1][0], rows)
    _imports(axes[1][1], rows)
    _fail_open(axes[1][2], rows)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def _hot(ax: Any, rows: list[Row]) -> None:
    hot = [r for r in rows if r.data.get("kind") in ("skip", "quiet")]
    if hot:
        names = ["skip", "not triggered"]
        over = [(r.data["measured_s"] - r.data["reference_s"]) * 1e6 for r in hot]
        ax.bar(names[: len(over)], over, color=[OK if o <= 20 else MISS for o in over])
        ax.axhline(20, ls="--", color="k")
        ax.set_title("skip / not-triggered: µs over the bare agent call")
        ax.set_ylabel("µs")


def _verified(ax: Any, rows: list[Row]) -> None:
    ver = [r for r in rows if "measured_samples" in r.data]
    if ver:
        for i, r in enumerate(ver):
            diffs = [
                (a - b) * 1e3
                for a, b in zip(
                    r.data["measured_samples"], r.data["reference_samples"], strict=True
                )
            ]
            diffs.sort()
            lo, hi = int(len(diffs) * 0.05), int(len(diffs) * 0.95)
            ax.boxplot(diffs[lo:hi], positions=[i], widths=0.5, showfliers=False)
        ax.set_xticks(range(len(ver)), [r.data["wire"] for r in ver])
        ax.axhline(0.15, ls="--", color="k")
        ax.set_title("verified turn - raw litellm, per interleaved pair (ms, p5-p95)")
        ax.set_ylabel("ms")


def _context(ax: Any, rows: list[Row]) -> None:
    ctx = [r for r in rows if "chars" in r.data]
    if not ctx:
        return
    labels = [
        f"{'1M' if r.data['chars'] >= 1e6 else str(r.data['chars'] // 1000) + 'K'} {r.data['kind']}"
        for r in ctx
    ]
    values = [r.data["median_s"] * 1e3 for r in ctx]
    refs = [r.data["whole_count_s"] * 1e3 for r in ctx]
    limits = [
        10 if r.data["chars"] >= 1e6 else 5 if r.data["chars"] >= 128e3 else None for r in ctx
    ]
    xs = range(len(ctx))
    ax.bar(
        [x - 0.2 for x in xs],
        values,
        0.4,
        label="build_judge_prompt",
        color=[MISS if lim and v > lim else OK for v, lim in zip(values, limits, strict=True)],
    )
    ax.bar([x + 0.2 for x in xs], refs, 0.4, label="tiktoken of the whole turn", color="#999")
    for x, lim in zip(xs, limits, strict=True):
        if lim:
            ax.hlines(lim, x - 0.45, x + 0.45, ls="--", color="k")
    ax.set_xticks(list(xs), labels, rotation=30, ha="right")
    ax.set_yscale("log")
    ax.set_title("context assembly (ms, log)")
    ax.legend(fontsize=8)


def _concurrency(ax: Any, rows: list[Row]) -> None:
    conc = [r for r in rows if "raw_wall_s" in r.data]
    if conc:
        for r, colour in zip(conc, ("tab:blue", "tab:orange"), strict=False):
            for key, style in (("latencies_s", "-"), ("raw_latencies_s", ":")):
                lat = sorted(x * 1e3 for x in r.data[key])
                ax.plot(
                    lat,
                    [i / len(lat) for i in range(len(lat))],
                    style,
                    color=colour,
                    label=f"{r.data['wire']} {'verified' if key == 'latencies_s' else 'raw'}",
                )
        ax.set_title(f"{conc[0].name.split(' ')[0]} concurrent turns: latency CDF, last round (ms)")
        ax.set_xlabel("ms from launch")
        ax.legend(fontsize=8)


def _imports(ax: Any, rows: list[Row]) -> None:
    imp = [r for r in rows if r.data.get("pulls_litellm") is False]
    imp += [r for r in rows if r.data.get("pulls_litellm") is True]
    if imp:
        r = imp[0]
        ours, theirs = median(r.data["replyguard_s"]) * 1e3, median(r.data["litellm_s"]) * 1e3
        ax.bar(
            ["import replyguard", "import litellm"],
            [ours, theirs],
            color=[OK if ours <= theirs * 0.1 else MISS, "#999"],
        )
        ax.axhline(theirs * 0.1, ls="--", color="k")
        ax.set_title("import time (ms), target 0.1x litellm")


def _fail_open(ax: Any, rows: list[Row]) -> None:
    fo = [r for r in rows if "times_s" in r.data]
    mem = [r for r in rows if "verified_traced" in r.data]
    if fo:
        for i, r in enumerate(fo):
            ax.scatter([i] * len(r.data["times_s"]), [t * 1e3 for t in r.data["times_s"]])
        ax.axhline((FAIL_OPEN_TIMEOUT + 0.1) * 1e3, ls="--", color="k")
        ax.axhline(FAIL_OPEN_TIMEOUT * 1e3, ls=":", color="#999")
        ax.set_xticks(range(len(fo)), [r.data["wire"] for r in fo])
        title = "fail-open turn time (ms), hung judge"
        if mem:
            m = mem[0].data
            title += f"\nmemory/in-flight turn {m['verified_traced'] / 1024:.1f} KiB"
            title += f" (bare {m['bare_traced'] / 1024:.1f} KiB)"
        ax.set_title(title)
