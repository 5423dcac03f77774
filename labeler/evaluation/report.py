"""`labeler report`: one self-contained HTML page with PNG plots of a labeling job's output.

The page embeds its plots (base64 PNG), so it can be mailed or archived alone; the PNG files are
written beside it too. Plots: soft labels, first-error positions, mean soft label by step index,
tokens and rollouts spent per solution, rejected rows by reason.
"""

from __future__ import annotations

import base64
import html
import io
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from statistics import mean

from labeler.store.reader import LabelledRow, open_job, read_labelled_rows
from labeler.store.shard_store import REJECTED_DIR

PAGE_NAME = "index.html"


@dataclass
class Plot:
    name: str  # file name
    title: str
    caption: str
    png: bytes


def write_report(job_dir: str, out_dir: str | None = None) -> Path:
    rows = read_labelled_rows(job_dir)
    rejected = _rejected_reasons(job_dir)
    out = Path(out_dir) if out_dir else Path(job_dir) / "report"
    out.mkdir(parents=True, exist_ok=True)
    plots = [
        _soft_label_histogram(rows),
        _first_error_histogram(rows),
        _soft_label_by_step(rows),
        _spend(rows),
        _rejected_by_reason(rejected),
    ]
    for plot in plots:
        (out / plot.name).write_bytes(plot.png)
    page = out / PAGE_NAME
    page.write_text(_page(job_dir, _summary(rows, rejected), plots, rejected), encoding="utf-8")
    return page


def _summary(rows: list[LabelledRow], rejected: Counter) -> list[tuple[str, str]]:
    soft = [s for row in rows for s in row.soft_labels if s is not None]
    hard = [h for row in rows for h in row.hard_labels if h is not None]
    steps = sum(len(row.steps) for row in rows)
    with_error = sum(row.first_error >= 0 for row in rows)
    return [
        ("solutions", f"{len(rows)}"),
        ("label sources", ", ".join(f"{source}: {count}" for source, count in sorted(Counter(row.label_source for row in rows).items()))),
        ("problems", f"{len({row.problem_id for row in rows})}"),
        ("steps", f"{steps}"),
        ("steps without a label", f"{steps - len(hard)}"),
        ("mean soft label", f"{mean(soft):.3f}" if soft else "n/a"),
        ("steps hard-positive", f"{sum(hard) / len(hard):.1%}" if hard else "n/a"),
        ("solutions with a first error", f"{with_error} ({with_error / len(rows):.1%})" if rows else "0"),
        ("rollouts", f"{sum(sum(row.n_rollouts) for row in rows)}"),
        ("generated tokens", f"{sum(row.generated_tokens for row in rows)}"),
        ("rejected rows", f"{sum(rejected.values())}"),
    ]


def _rejected_reasons(job_dir: str) -> Counter:
    """Rejected rows counted by stage, field and reason, numbers in reasons replaced by N so
    that "12034 characters" and "50321 characters" count as one reason."""
    import pyarrow.parquet as pq

    job = open_job(job_dir)
    if job is not None:
        tables = [job.read_table(name, ["stage", "field", "reason"]) for name in job.committed_files(REJECTED_DIR)]
    else:
        folder = Path(job_dir) / REJECTED_DIR
        files = sorted(f for f in folder.glob("*.parquet") if not f.name.startswith(".")) if folder.is_dir() else []
        tables = [pq.read_table(f, columns=["stage", "field", "reason"]) for f in files]
    reasons: Counter = Counter()
    for table in tables:
        for row in table.to_pylist():
            reason = re.sub(r"\d+", "N", row["reason"])
            reasons[f"{row['stage']} / {row['field']}: {reason}"[:90]] += 1
    return reasons


# --- plots ---------------------------------------------------------------------------------


def _figure(width: float = 6.4, height: float = 3.6):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _no_data(axes, message: str) -> None:
    axes.text(0.5, 0.5, message, ha="center", va="center", transform=axes.transAxes, color="grey")
    axes.set_xticks([])
    axes.set_yticks([])


def _soft_label_histogram(rows: list[LabelledRow]) -> Plot:
    figure = _figure()
    axes = figure.add_subplot()
    soft = [s for row in rows for s in row.soft_labels if s is not None]
    if soft:
        axes.hist(soft, bins=[i / 20 for i in range(21)], color="#4c72b0", edgecolor="white")
        axes.set_xlabel("soft label (share of rollouts that reached the answer)")
        axes.set_ylabel("steps")
    else:
        _no_data(axes, "no soft labels")
    axes.set_title("Soft labels")
    caption = "Near 0: the prefix rarely reaches the answer; near 1: it almost always does."
    return Plot("soft_labels.png", "Soft labels", caption, _png(figure))


def _first_error_histogram(rows: list[LabelledRow]) -> Plot:
    figure = _figure()
    axes = figure.add_subplot()
    counts = Counter(row.first_error for row in rows)
    if rows:
        positions = sorted(p for p in counts if p >= 0)
        labels = ["none"] + [str(p + 1) for p in positions]
        values = [counts.get(-1, 0)] + [counts[p] for p in positions]
        axes.bar(labels, values, color=["#55a868"] + ["#c44e52"] * len(positions))
        axes.set_xlabel("first wrong step (1-based); none: every step positive")
        axes.set_ylabel("solutions")
    else:
        _no_data(axes, "no solutions")
    axes.set_title("First error position")
    return Plot("first_error.png", "First error position", "Where solutions go wrong, by their first hard-negative step.", _png(figure))


def _soft_label_by_step(rows: list[LabelledRow]) -> Plot:
    figure = _figure()
    axes = figure.add_subplot()
    by_index: dict[int, list[float]] = {}
    for row in rows:
        for i, soft in enumerate(row.soft_labels):
            if soft is not None:
                by_index.setdefault(i, []).append(soft)
    if by_index:
        indices = sorted(by_index)
        axes.plot([i + 1 for i in indices], [mean(by_index[i]) for i in indices], marker="o", color="#4c72b0")
        axes.set_ylim(0, 1.05)
        axes.set_xlabel("step index (1-based)")
        axes.set_ylabel("mean soft label")
        axes.xaxis.get_major_locator().set_params(integer=True)
        counts = axes.twinx()
        counts.bar([i + 1 for i in indices], [len(by_index[i]) for i in indices], alpha=0.2, color="grey")
        counts.set_ylabel("steps labelled", color="grey")
        axes.set_zorder(counts.get_zorder() + 1)  # the line above the bars
        axes.patch.set_visible(False)
    else:
        _no_data(axes, "no soft labels")
    axes.set_title("Mean soft label by step index")
    caption = "A falling line: later prefixes reach the answer less often. Grey bars: how many steps each point averages."
    return Plot("soft_label_by_step.png", "Mean soft label by step index", caption, _png(figure))


def _spend(rows: list[LabelledRow]) -> Plot:
    figure = _figure(9.6, 3.6)
    tokens_axes, rollouts_axes = figure.subplots(1, 2)
    if rows:
        tokens_axes.hist([row.generated_tokens for row in rows], bins=20, color="#8172b2", edgecolor="white")
        tokens_axes.set_xlabel("generated tokens per solution")
        tokens_axes.set_ylabel("solutions")
        rollouts_axes.hist([sum(row.n_rollouts) for row in rows], bins=20, color="#937860", edgecolor="white")
        rollouts_axes.set_xlabel("rollouts per solution")
    else:
        _no_data(tokens_axes, "no solutions")
        _no_data(rollouts_axes, "no solutions")
    tokens_axes.set_title(f"Tokens spent: {sum(row.generated_tokens for row in rows)} in all")
    rollouts_axes.set_title(f"Rollouts spent: {sum(sum(row.n_rollouts) for row in rows)} in all")
    return Plot("spend.png", "Tokens and rollouts spent", "The cost of the labels, per solution.", _png(figure))


def _rejected_by_reason(reasons: Counter) -> Plot:
    top = reasons.most_common(12)
    figure = _figure(9.6, max(2.4, 0.45 * len(top) + 1.2))
    axes = figure.add_subplot()
    if top:
        names = [name for name, _ in reversed(top)]
        axes.barh(names, [count for _, count in reversed(top)], color="#dd8452")
        axes.set_xlabel("rows")
        axes.xaxis.get_major_locator().set_params(integer=True)
        axes.tick_params(axis="y", labelsize=8)
    else:
        _no_data(axes, "no rejected rows")
    axes.set_title("Rejected rows by reason")
    caption = "Rows the job refused (stage / field: reason), the most frequent first; the table below lists all."
    return Plot("rejected.png", "Rejected rows by reason", caption, _png(figure))


# --- page ----------------------------------------------------------------------------------

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1000px; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; }
td, th { padding: 0.25rem 0.8rem; border-bottom: 1px solid #ddd; text-align: left; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 2rem 0; }
figcaption { color: #555; font-size: 0.9rem; }
img { max-width: 100%; }
"""


def _page(job_dir: str, summary: list[tuple[str, str]], plots: list[Plot], rejected: Counter) -> str:
    escape = html.escape
    summary_rows = "\n".join(f"<tr><th>{escape(k)}</th><td class=number>{escape(v)}</td></tr>" for k, v in summary)
    figures = "\n".join(
        f'<figure><h2>{escape(p.title)}</h2><img alt="{escape(p.title)}" src="data:image/png;base64,{base64.b64encode(p.png).decode()}">'
        f"<figcaption>{escape(p.caption)}</figcaption></figure>"
        for p in plots
    )
    rejected_rows = "\n".join(
        f"<tr><td>{escape(reason)}</td><td class=number>{count}</td></tr>" for reason, count in rejected.most_common()
    )
    rejected_table = f"<table><tr><th>reason</th><th>rows</th></tr>{rejected_rows}</table>" if rejected else "<p>No rejected rows.</p>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Labels report: {escape(job_dir)}</title><style>{_STYLE}</style></head>
<body>
<h1>Labels report</h1>
<p>{escape(str(Path(job_dir).resolve()))}</p>
<table>{summary_rows}</table>
{figures}
<h2>Rejected rows</h2>
{rejected_table}
</body></html>
"""
