"""`labeler report`: one self-contained HTML page with PNG plots of a labeling job's output.

The page embeds its plots (base64 PNG), so it can be mailed or archived alone; the PNG files are
written beside it too. It is made of sections, each built from what the job holds and left out
(with one line saying so) when there is nothing to show:

    summary                    counts, and "incomplete: 8 of 20 solutions" on a job still running or interrupted;
                               rollouts as the manifest and `labeler status` count them (every one sampled),
                               those cut by the budget or ended still thinking, and those whose check timed out,
                               shown apart; a range where the job's --truncated
                               is not at hand (a folder of shards, labels a consensus read), and not known for
                               rows of shards older than schema 1.2; the manifest named only where it sampled them
    soft labels                histogram of the soft labels
    first error position       solutions by their first hard-negative step; "unknown" where an unlabelled
                               step comes before it (any step, for none); left out for an outcome-only job
    soft label by step index   mean soft label of the steps measured by rollouts (label_method "rollouts"),
                               final-answer checks left out: they are 0 or 1 by construction
    spend                      tokens and rollouts per solution
    rejected rows              by reason, and a table with every reason in full and an example row

Counts are drawn on integer axes. Other commands add sections to SECTION_BUILDERS.
"""

from __future__ import annotations

import base64
import html
import io
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean

from labeler.evaluation.metrics import first_predicted_error
from labeler.store.lock import read_lock_holder
from labeler.store.manifest import job_kind
import pyarrow as pa

from labeler.store.reader import LabelledRow, LabelsError, open_job, read_labelled_rows, read_labels_table
from labeler.store.shard_store import REJECTED_DIR

PAGE_NAME = "index.html"
NOT_SAMPLED_PREFIX = "not sampled"  # a step's unlabelled_reason when no rollout was sampled for it
MEASURED = "rollouts"  # the label_method of a step whose soft label is a Monte-Carlo estimate
LABEL_CHARS = 60  # a reason's length on the plot's axis; the table has it in full


@dataclass
class Plot:
    name: str  # file name
    title: str
    caption: str
    png: bytes
    figure: object = None  # the matplotlib Figure drawn, for tests to read its axes


@dataclass
class Section:
    title: str
    plots: list[Plot] = field(default_factory=list)
    html: str = ""  # shown under the plots: a table, or the line that says why there is no plot


@dataclass(frozen=True)
class RejectionReason:
    stage: str
    field: str
    reason: str  # numbers replaced by N, so "12034 characters" and "50321 characters" are one reason

    def label(self) -> str:
        return f"{self.stage} / {self.field}: {self.reason}"


@dataclass
class Rejections:
    counts: Counter = field(default_factory=Counter)  # RejectionReason -> rows
    examples: dict = field(default_factory=dict)  # RejectionReason -> (row_index, the reason as written)

    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class Completion:
    """How far a job is, from its manifest: None where the labels are a folder of shards without one."""

    finished: bool
    planned: int
    planned_what: str  # "solutions", or "input rows" for a job planned before units counted their solutions
    done: int  # of `planned`
    units_committed: int
    units: int
    driver: dict | None

    def line(self) -> str | None:
        if self.finished:
            return None
        if self.driver is not None and not self.driver.get("stale"):
            state = f"the job is still running (host {self.driver['host']}, pid {self.driver['pid']})"
        else:
            state = "the job was interrupted: rerun its `labeler label` command to finish it"
        progress = f"{self.done} of {self.planned} {self.planned_what} ({self.units_committed} of {self.units} units committed)"
        return f"incomplete: {progress}; {state}"


@dataclass
class ReportInputs:
    job_dir: str
    rows: list[LabelledRow]
    rejections: Rejections
    completion: Completion | None
    cut_rollouts: list[int | None] | None = None  # per row: rollouts cut by their budget (n_truncated); None: not known
    cut_counted: bool | list[bool | None] = False  # per row (or for all): --truncated incorrect, cut ones inside n_rollouts
    rejected_tokens: int = 0  # spent on sampled solutions that were rejected (the manifest's; in no labels row)
    manifest_rollouts: int | None = None  # the rollouts the manifest counts, where this output's job sampled them
    unlabelled_reasons: list[list[str | None]] | None = None  # per row and step; None: not read
    timed_out_rollouts: list[int] | None = None  # per row: rollouts (and final checks) whose check timed out (n_timeouts)

    def outcome_only(self) -> bool:
        """Every solution labels only its last step, the others not sampled (final-answer, best-of-N candidates)."""
        reasons = self.unlabelled_reasons or [[NOT_SAMPLED_PREFIX] * len(row.steps) for row in self.rows]
        return any(len(row.steps) > 1 for row in self.rows) and all(
            method == "unlabelled" and (reason or "").startswith(NOT_SAMPLED_PREFIX)
            for row, why in zip(self.rows, reasons)
            for method, reason in zip(row.label_method[:-1], why[:-1])
        )

    def generated_tokens(self) -> int:
        """Every token generated, as the manifest and `labeler status` count them: the labels' and the rejected solutions'."""
        return sum(row.generated_tokens for row in self.rows) + self.rejected_tokens

    def cut(self, i: int) -> int:
        """Row i's rollouts known to be cut (0 where not known: `cut_unknown`)."""
        return (self.cut_rollouts[i] or 0) if self.cut_rollouts is not None else 0

    def cut_unknown(self) -> int:
        """Rows whose cut rollouts are not known (shards older than schema 1.2, no n_truncated)."""
        return 0 if self.cut_rollouts is None else self.cut_rollouts.count(None)

    def counted_inside(self, i: int) -> bool | None:
        """Whether row i's cut rollouts are inside its n_rollouts; None: not known (the job's config is not at hand)."""
        return self.cut_counted if isinstance(self.cut_counted, bool) else self.cut_counted[i]

    def rollouts_range(self, i: int) -> tuple[int, int]:
        """Rollouts sampled for row i, cut ones too (what the manifest and `labeler status` count): equal bounds
        where it is known whether its cut rollouts are among n_rollouts, else both possibilities."""
        counted, cut = sum(self.rows[i].n_rollouts) + self.timed_out(i), self.cut(i)  # a timed-out check is never in n_rollouts
        inside = self.counted_inside(i) if cut else True
        return (counted, counted + cut) if inside is None else (counted, counted) if inside else (counted + cut, counted + cut)

    def timed_out(self, i: int) -> int:
        return self.timed_out_rollouts[i] if self.timed_out_rollouts is not None else 0

    def rollouts(self, i: int) -> int:
        return self.rollouts_range(i)[0]

    def total_rollouts(self) -> tuple[int, int]:
        ranges = [self.rollouts_range(i) for i in range(len(self.rows))]
        return sum(low for low, _ in ranges), sum(high for _, high in ranges)

    def cut_of_unknown_fate(self) -> int:
        return sum(self.cut(i) for i in range(len(self.rows)) if self.counted_inside(i) is None)


def read_inputs(job_dir: str) -> ReportInputs:
    job = open_job(job_dir)
    table = read_labels_table(job_dir)
    rows = read_labelled_rows(job_dir, corrections=False)  # the job's own labels: a report of the labeling
    policies = _truncated_policies(job_dir)
    hashes = table.column("config_hash").to_pylist() if "config_hash" in table.column_names else [None] * len(rows)
    cut_counted = [None if policies.get(h) is None else policies[h] == "incorrect" for h in hashes]
    sampled = job is not None and job_kind(job.manifest) is None  # `labeler label`: its manifest counts what it sampled
    rejected_tokens = job.manifest["totals"].get("rejected_tokens", 0) if job is not None else 0
    manifest_rollouts = job.manifest["totals"].get("rollouts") if sampled else None
    reasons = table.column("unlabelled_reason").to_pylist() if "unlabelled_reason" in table.column_names else None
    return ReportInputs(
        job_dir, rows, _rejections(job_dir), _completion(job_dir), _cut_rollouts(table), cut_counted, rejected_tokens, manifest_rollouts,
        [list(r or [None] * len(row.steps)) for r, row in zip(reasons, rows)] if reasons is not None else None,
        _timed_out_rollouts(job_dir, len(rows)),
    )  # fmt: skip


def write_report(job_dir: str, out_dir: str | None = None) -> Path:
    inputs = read_inputs(job_dir)
    out = Path(out_dir) if out_dir else Path(job_dir) / "report"
    out.mkdir(parents=True, exist_ok=True)
    sections = [section for build in SECTION_BUILDERS if (section := build(inputs)) is not None]
    for section in sections:
        for plot in section.plots:
            (out / plot.name).write_bytes(plot.png)
    page = out / PAGE_NAME
    page.write_text(_page(inputs, sections), encoding="utf-8")
    return page


# --- what the page reads ---------------------------------------------------------------------


def _rejections(job_dir: str) -> Rejections:
    import pyarrow.parquet as pq

    job = open_job(job_dir)
    columns = ["row_index", "stage", "field", "reason"]
    if job is not None:
        tables = [job.read_table(name, columns) for name in job.committed_files(REJECTED_DIR)]
    else:
        folder = Path(job_dir) / REJECTED_DIR
        files = sorted(f for f in folder.glob("*.parquet") if not f.name.startswith(".")) if folder.is_dir() else []
        tables = [pq.read_table(f, columns=columns) for f in files]
    rejections = Rejections()
    for table in tables:
        for row in table.to_pylist():
            key = RejectionReason(row["stage"], row["field"], re.sub(r"\d+", "N", row["reason"]))
            rejections.counts[key] += 1
            rejections.examples.setdefault(key, (row["row_index"], row["reason"]))
    return rejections


def _cut_rollouts(table: pa.Table) -> list[int | None]:
    """Per labels row (in read_labelled_rows' order), its rollouts cut by their token budget; None for a row of a
    shard older than schema 1.2 (no n_truncated: cut rollouts were not counted apart)."""
    if "n_truncated" not in table.column_names:
        return [None] * table.num_rows
    return [None if per_step is None else sum(cut or 0 for cut in per_step) for per_step in table.column("n_truncated").to_pylist()]


def _truncated_policies(job_dir: str) -> dict[str, str]:
    """config hash -> the --truncated of the labeling job with that config, from the manifests at hand: this
    output's and, for an output made from labels (`labeler consensus`), those of the labels it read, if still there.
    A row whose config hash is not among them (a folder of shards, labels moved) has no known policy."""
    policies, seen, folder = {}, set(), job_dir
    while folder is not None and folder not in seen:
        seen.add(folder)
        try:
            job = open_job(folder)
        except (LabelsError, OSError, ValueError):
            break
        if job is None:
            break
        config = job.manifest.get("config", {})
        if job_kind(job.manifest) is None and "truncated" in config:
            policies[job.manifest["config_hash"]] = config["truncated"]
        labels = config.get("labels")
        folder = labels if isinstance(labels, str) else None
    return policies


def _timed_out_rollouts(job_dir: str, n_rows: int) -> list[int]:
    """Per labels row (in read_labelled_rows' order), its rollouts and final checks whose check timed out. The
    shards are read whole, so a shard older than schema 1.5 (no n_timeouts: none counted apart) reads as 0 beside newer ones."""
    table = read_labels_table(job_dir)
    if "n_timeouts" not in table.column_names:
        return [0] * n_rows
    return [sum(n or 0 for n in (per_step or ())) for per_step in table.column("n_timeouts").to_pylist()]


def _completion(job_dir: str) -> Completion | None:
    job = open_job(job_dir)
    if job is None:
        return None
    units = job.manifest["units"]
    committed = [unit for unit in units if unit["state"] == "committed"]
    labelled = sum(unit.get("stats", {}).get("solutions", 0) for unit in committed)
    if all("n_solutions" in unit for unit in units):
        planned, done, what = sum(u["n_solutions"] for u in units), labelled, "solutions"
    else:
        planned, done, what = sum(u["n_rows"] for u in units), sum(u["n_rows"] for u in committed), "input rows"
    return Completion(len(committed) == len(units), planned, what, done, len(committed), len(units), read_lock_holder(job.location))


# --- sections ----------------------------------------------------------------------------------


def summary_section(inputs: ReportInputs) -> Section:
    rows = inputs.rows
    soft = [s for row in rows for s in row.soft_labels if s is not None]
    hard = [h for row in rows for h in row.hard_labels if h is not None]
    cut = sum(inputs.cut(i) for i in range(len(rows)))
    timed_out = sum(inputs.timed_out(i) for i in range(len(rows)))
    methods = Counter(method for row in rows for method in row.label_method)
    steps = sum(len(row.steps) for row in rows)
    positions = [known_first_error(row) for row in rows]
    with_error = sum(p is not None and p >= 0 for p in positions)
    unknown = positions.count(None)
    known = len(rows) - unknown
    low, high = inputs.total_rollouts()
    lines = [
        ("solutions", f"{len(rows)}"),
        ("label sources", ", ".join(f"{source}: {count}" for source, count in sorted(Counter(row.label_source for row in rows).items()))),
        ("problems", f"{len({row.problem_id for row in rows})}"),
        ("steps", f"{steps}"),
        ("steps by label method", ", ".join(f"{method} {count}" for method, count in methods.most_common())),
        ("steps without a label", f"{steps - len(hard)}"),
        ("mean soft label", f"{mean(soft):.3f}" if soft else "n/a"),
        ("steps hard-positive", f"{sum(hard) / len(hard):.1%}" if hard else "n/a"),
        ("solutions with a first error", _share(with_error, known, "whose first error is known")),
        ("solutions whose first error is unknown", f"{unknown} (an unlabelled step before it)" if unknown else "0"),
        ("rollouts", f"{low}" if low == high else f"{low} to {high}"),
        ("rollouts cut by the budget or ended still thinking", f"{cut}"),
        ("rollouts whose check timed out", f"{timed_out}"),
        ("generated tokens", f"{inputs.generated_tokens()}"),
        ("of them on rejected solutions", f"{inputs.rejected_tokens}"),
        ("rejected rows", f"{inputs.rejections.total()}"),
    ]
    if inputs.completion is not None:
        c = inputs.completion
        lines.insert(0, ("job", "finished" if c.finished else f"incomplete: {c.done} of {c.planned} {c.planned_what}"))
    table = "\n".join(f"<tr><th>{html.escape(k)}</th><td class=number>{html.escape(v)}</td></tr>" for k, v in lines)
    notes = [_note(line) for line in rollout_notes(inputs)]
    return Section("Summary", html=f"<table>{table}</table>" + "".join(notes))


def _share(count: int, of: int, which: str) -> str:
    return f"{count} ({count / of:.1%} of the {of} {which})" if of else f"{count}"


def rollout_notes(inputs: ReportInputs) -> list[str]:
    """What the rollout counts rest on: where the cut ones are, what is not known, whether the manifest agrees."""
    n = len(inputs.rows)
    cut, unknown_fate = sum(inputs.cut(i) for i in range(n)), inputs.cut_of_unknown_fate()
    low, high = inputs.total_rollouts()
    notes = []
    if cut:
        fates = Counter(inputs.counted_inside(i) for i in range(n) if inputs.cut(i))
        known = {True: "checked as they stand (--truncated incorrect)", False: "left out of the soft labels (--truncated excluded)"}
        parts = [f"{sum(inputs.cut(i) for i in range(n) if inputs.counted_inside(i) is f)} {known[f]}" for f in (True, False) if fates[f]]
        if unknown_fate:
            parts.append(
                f"{unknown_fate} of solutions whose labeling job's config is not at hand: whether they are among the counted "
                f"rollouts is not known, so the count is {low} to {high}"
            )
        notes.append(f"Rollouts: every one sampled, cut and timed-out ones too; the {cut} cut by the budget or ended still thinking: "
                     + "; ".join(parts) + ".")
    if inputs.cut_unknown():
        notes.append(
            f"{inputs.cut_unknown()} solutions come from shards older than schema 1.2 (no n_truncated): their cut rollouts are not "
            "known (those jobs checked them as they stood, among their rollouts)."
        )
    if inputs.manifest_rollouts is not None and (cut or inputs.cut_unknown()):
        if low == high == inputs.manifest_rollouts:
            notes.append(f"The {low} rollouts agree with the manifest and `labeler status`.")
        else:
            notes.append(f"The manifest and `labeler status` count {inputs.manifest_rollouts} rollouts.")
    return notes


def soft_label_section(inputs: ReportInputs) -> Section:
    soft = [s for row in inputs.rows for s in row.soft_labels if s is not None]
    if not soft:
        return Section("Soft labels", html=_note("No step has a soft label (every step is inferred, retraced, stopped early or unlabelled)."))
    figure = _figure()
    axes = figure.add_subplot()
    axes.hist(soft, bins=[i / 20 for i in range(21)], color="#4c72b0", edgecolor="white")
    axes.set_xlabel("soft label (share of rollouts that reached the answer)")
    axes.set_ylabel("steps")
    _integer_axis(axes.yaxis)
    axes.set_title("Soft labels")
    caption = "Near 0: the prefix rarely reaches the answer; near 1: it almost always does (final-answer checks are 0 or 1)."
    return Section("Soft labels", [Plot("soft_labels.png", "Soft labels", caption, _png(figure), figure)])


def known_first_error(row: LabelledRow) -> int | None:
    """The row's first hard-negative step, -1 for none; None (unknown) when an unlabelled step comes before it."""
    return first_predicted_error(row.hard_labels)


def first_error_section(inputs: ReportInputs) -> Section:
    if inputs.outcome_only():
        return Section(
            "First error position",
            html=_note(
                "No first-error plot: only their last step is labelled (an outcome-only job, such as best-of-N candidates "
                "checked by their final answer), so no solution of more than one step has a known first error."
            ),
        )
    counts = Counter(known_first_error(row) for row in inputs.rows)
    unknown = counts.pop(None, 0)
    figure = _figure()
    axes = figure.add_subplot()
    positions = sorted(p for p in counts if p >= 0)
    labels = ["none"] + (["unknown"] if unknown else []) + [str(p) for p in positions]
    values = [counts.get(-1, 0)] + ([unknown] if unknown else []) + [counts[p] for p in positions]
    axes.bar(labels, values, color=["#55a868"] + (["#999999"] if unknown else []) + ["#c44e52"] * len(positions))
    axes.set_xlabel("first wrong step (from 0, as first_error); none: every step labelled positive; unknown: an unlabelled step before it")
    axes.set_ylabel("solutions")
    _integer_axis(axes.yaxis)
    axes.set_title("First error position")
    caption = "Where solutions go wrong, by their first hard-negative step."
    if unknown:
        caption += f" unknown: {unknown} solutions with a step without a label (cut, not sampled) before any step labelled negative."
    return Section("First error position", [Plot("first_error.png", "First error position", caption, _png(figure), figure)])


def measured_soft_labels_by_step(rows: list[LabelledRow]) -> tuple[dict[int, list[float]], int]:
    """Soft labels measured by rollouts, by 0-based step index; and how many soft labels of other
    methods (final-answer checks) were left out."""
    by_index: dict[int, list[float]] = {}
    left_out = 0
    for row in rows:
        for i, (soft, method) in enumerate(zip(row.soft_labels, row.label_method)):
            if soft is None:
                continue
            if method == MEASURED:
                by_index.setdefault(i, []).append(soft)
            else:
                left_out += 1
    return by_index, left_out


def soft_label_by_step_section(inputs: ReportInputs) -> Section:
    title = "Mean soft label by step index"
    by_index, checks = measured_soft_labels_by_step(inputs.rows)
    left_out = (
        f"; {checks} final-answer checks are left out (0 or 1 by construction, they would mix a check into an estimate)" if checks else ""
    )
    if not by_index:
        return Section(title, html=_note(f"No step was measured by rollouts{left_out}."))
    indices = sorted(by_index)
    figure = _figure()
    axes = figure.add_subplot()
    axes.plot(indices, [mean(by_index[i]) for i in indices], marker="o", color="#4c72b0")
    axes.set_ylim(0, 1.05)
    axes.set_xlabel("step index (from 0)")
    axes.set_ylabel("mean soft label")
    _integer_axis(axes.xaxis)
    counts = axes.twinx()
    counts.bar(indices, [len(by_index[i]) for i in indices], alpha=0.2, color="grey")
    counts.set_ylabel("steps measured", color="grey")
    _integer_axis(counts.yaxis)
    axes.set_zorder(counts.get_zorder() + 1)  # the line above the bars
    axes.patch.set_visible(False)
    axes.set_title(title)
    caption = (
        f'Mean soft label of the steps measured by rollouts (label_method "{MEASURED}"), by their position in the solution{left_out}. '
        "Grey bars: how many steps each point averages; a point over few steps is noisy."
    )
    return Section(title, [Plot("soft_label_by_step.png", title, caption, _png(figure), figure)])


def spend_section(inputs: ReportInputs) -> Section:
    rows = inputs.rows
    figure = _figure(9.6, 3.6)
    tokens_axes, rollouts_axes = figure.subplots(1, 2)
    tokens_axes.hist([row.generated_tokens for row in rows], bins=20, color="#8172b2", edgecolor="white")
    tokens_axes.set_xlabel("generated tokens per solution")
    tokens_axes.set_ylabel("solutions")
    rollouts = [inputs.rollouts(i) for i in range(len(rows))]  # the lower bound where a row's is not known
    cut = sum(inputs.cut(i) for i in range(len(rows)))
    low, high = inputs.total_rollouts()
    rollouts_axes.hist(rollouts, bins=_integer_bins(rollouts), color="#937860", edgecolor="white")
    rollouts_axes.set_xlabel("rollouts per solution (cut and timed-out ones too)")
    rollouts_axes.set_ylabel("solutions")
    for axis in (tokens_axes.yaxis, rollouts_axes.yaxis, rollouts_axes.xaxis):
        _integer_axis(axis)
    rejected = f", {inputs.rejected_tokens} on rejected solutions" if inputs.rejected_tokens else ""
    tokens_axes.set_title(f"Tokens spent: {inputs.generated_tokens()} in all{rejected}")
    spent = f"{low} in all" if low == high else f"{low} to {high} (not known whether cut ones are counted)"
    timed_out = sum(inputs.timed_out(i) for i in range(len(inputs.rows)))
    apart = [f"{cut} cut by the budget or ended still thinking"] if cut else []
    apart += [f"{timed_out} whose check timed out"] if timed_out else []
    rollouts_axes.set_title(f"Rollouts spent: {spent}" + "".join(f", {part}" for part in apart))
    return Section(
        "Tokens and rollouts spent",
        [Plot("spend.png", "Tokens and rollouts spent", "The cost of the labels, per solution.", _png(figure), figure)],
    )


def rejected_section(inputs: ReportInputs) -> Section:
    rejections = inputs.rejections
    title = "Rejected rows"
    if not rejections.counts:
        return Section(title, html=_note("No rejected rows."))
    top = rejections.counts.most_common(12)
    figure = _figure(9.6, max(2.4, 0.45 * len(top) + 1.2))
    axes = figure.add_subplot()
    names = [_shorten(reason.label(), LABEL_CHARS) for reason, _ in reversed(top)]
    axes.barh(range(len(top)), [count for _, count in reversed(top)], color="#dd8452", tick_label=names)
    axes.set_xlabel("rows")
    _integer_axis(axes.xaxis)
    axes.tick_params(axis="y", labelsize=8)
    axes.set_title("Rejected rows by reason")
    caption = "Rows the job refused (stage / field: reason), the most frequent first; the table below gives every reason in full."
    escape = html.escape
    lines = "\n".join(
        f"<tr><td>{escape(reason.stage)}</td><td>{escape(reason.field)}</td><td>{escape(reason.reason)}</td>"
        f"<td class=number>{count}</td><td>row {rejections.examples[reason][0]}: {escape(rejections.examples[reason][1])}</td></tr>"
        for reason, count in rejections.counts.most_common()
    )
    table = f"<table><tr><th>stage</th><th>field</th><th>reason</th><th>rows</th><th>example</th></tr>{lines}</table>"
    return Section(title, [Plot("rejected.png", "Rejected rows by reason", caption, _png(figure), figure)], table)


def best_of_n_section(inputs: ReportInputs) -> Section | None:
    """The best-of-N curves, in the output of `labeler bon` or `labeler search`; left out elsewhere."""
    plots = best_of_n_plots(inputs.job_dir)
    return Section("Best-of-N", plots) if plots else None


# The page's sections, in order: each returns a Section, or None to leave itself out.
SECTION_BUILDERS: list[Callable[[ReportInputs], Section | None]] = [
    summary_section,
    soft_label_section,
    first_error_section,
    soft_label_by_step_section,
    spend_section,
    rejected_section,
    best_of_n_section,
]


# --- drawing -------------------------------------------------------------------------------


def _figure(width: float = 6.4, height: float = 3.6):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _integer_axis(axis) -> None:
    """Ticks at whole numbers only: an axis of counts."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _integer_bins(values: list[int]) -> list[float]:
    """One bin per whole number when there are few, else about 20 bins with whole-number edges."""
    low, high = min(values), max(values)
    step = max(1, -(-(high - low + 1) // 20))
    return [low - 0.5 + step * k for k in range((high - low) // step + 2)]


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _note(text: str) -> str:
    return f"<p class=note>{html.escape(text)}</p>"


# --- page ----------------------------------------------------------------------------------

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1000px; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; }
td, th { padding: 0.25rem 0.8rem; border-bottom: 1px solid #ddd; text-align: left; vertical-align: top; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1rem 0 2rem; }
figcaption, p.note { color: #555; font-size: 0.9rem; }
p.incomplete { background: #fff3cd; border: 1px solid #e0c060; padding: 0.6rem 0.8rem; font-weight: 600; }
img { max-width: 100%; }
"""


def _page(inputs: ReportInputs, sections: list[Section]) -> str:
    escape = html.escape
    incomplete = inputs.completion.line() if inputs.completion is not None else None
    banner = f"<p class=incomplete>{escape(incomplete)}</p>" if incomplete else ""
    body = []
    for section in sections:
        figures = "".join(
            f'<figure><img alt="{escape(p.title)}" src="data:image/png;base64,{base64.b64encode(p.png).decode()}">'
            f"<figcaption>{escape(p.caption)}</figcaption></figure>"
            for p in section.plots
        )
        body.append(f"<section><h2>{escape(section.title)}</h2>{figures}{section.html}</section>")
    sections_html = "\n".join(body)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Labels report: {escape(inputs.job_dir)}</title><style>{_STYLE}</style></head>
<body>
<h1>Labels report</h1>
<p>{escape(str(Path(inputs.job_dir).resolve()))}</p>
{banner}
{sections_html}
</body></html>
"""


# --- best-of-N and beam search (labeler bon, labeler search) --------------------------------


def best_of_n_plots(job_dir: str) -> list[Plot]:
    """The best-of-N curves when `labeler bon` or `labeler search` wrote results into this output
    (the candidates of best-of-N are the job the rest of the page shows); none otherwise."""
    import json

    from labeler.evaluation.bon_plot import BON_RESULTS, SEARCH_RESULTS, curves_png, search_point
    from labeler.store.location import OutputLocation

    if "://" not in str(job_dir) and not Path(job_dir).is_dir():
        return []  # one labels shard: no output folder around it
    location = OutputLocation(job_dir)
    bon, search = (location.read_bytes(name) for name in (BON_RESULTS, SEARCH_RESULTS))
    bon, search = (json.loads(data) if data is not None else None for data in (bon, search))
    curves = (search or {}).get("best_of_n") or {}
    point = None
    if search is not None and "curves" in curves:
        point = search_point(search)
        if bon is None or point["spec"] not in {prm["spec"] for prm in bon["prms"]}:
            bon = curves["curves"]  # the search's own best-of-N, of its PRM
    if bon is None:
        return []
    caption = (
        f"Accuracy of each method at N candidates per problem ({bon['problems']} problems, pools of "
        f"{bon['pool_size']['min']} to {bon['pool_size']['max']}): {bon['estimator']['how']}."
    )
    if point is not None:
        caption += f" The star: {point['label']}, {point['accuracy']:.3f} at {point['tokens_per_problem']:.0f} tokens per problem."
    unchecked = sum(bon.get("candidates_unchecked", {}).values())
    if unchecked:
        caption += f" {unchecked} candidates whose answer was not checked count as wrong (bon/results.json: counted_wrong_unchecked)."
    for prm in bon["prms"]:
        if prm.get("candidates_unscored"):
            caption += f" {prm['name']} could not fully score {prm['candidates_unscored']} candidates: they rank below every scored one."
    return [Plot("best_of_n.png", "Best-of-N", caption, curves_png(bon, search=point))]
