"""`labeler export`: labels shards in the formats other PRM trainers read.

- `trl`: TRL's PRMTrainer stepwise format, one row per solution:
  {"prompt": problem, "completions": [step, ...], "labels": [bool, ...]}. Labels are booleans
  because PRMTrainer turns each label into int(label): a soft label such as 0.75 would become 0.
- `math-shepherd`: {"input", "label"}: the problem, a space, then "Step k: text ки" per step joined
  by newlines; `label` is the same text with each `ки` replaced by `+` or `-`. Steps that do not
  start with a "Step k:" marker get one.
- `jsonl`: the labels table's label columns as they are (soft labels, counts, methods, reasons, label_source);
  a count column a shard of an older schema lacks (n_timeouts before 1.5) is null, not 0. Its first_error
  is null where it is not known: an unlabelled step comes before the first hard 0 (any step, when there is
  none), where the labels table's own first_error reads the first hard 0 or -1.

Booleans are the hard labels, or soft >= --threshold when given. A step without a label (a search
strategy left it unlabelled) cannot be written in the boolean formats: the solution is cut before
it. Every row's steps and label lists must line up, checked for all rows before anything is written.
The output is `.jsonl` or `.parquet`, by its extension, written to a temporary name then renamed.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from labeler.evaluation.metrics import first_predicted_error
from labeler.store.reader import LabelledRow, read_labelled_rows
from labeler.inputs.splitting import KI_TAG

EXPORT_FORMATS = ("trl", "math-shepherd", "jsonl")
OUTPUT_SUFFIXES = (".jsonl", ".parquet")
_STEP_MARKER = re.compile(r"^Step\s+\d+\s*:")

log = logging.getLogger("labeler.prm.export")


class ExportError(ValueError):
    """The labels cannot be written in the requested format; the message is for the user."""


@dataclass
class ExportSummary:
    path: str
    format: str
    solutions: int
    steps: int
    solutions_cut: int  # cut before their first unlabelled step
    solutions_skipped: int  # no labelled step at all


def export_labels(labels: str, format: str, out: str, threshold: float | None = None) -> ExportSummary:
    if format not in EXPORT_FORMATS:
        raise ExportError(f"unknown format {format!r}; expected one of {', '.join(EXPORT_FORMATS)}")
    out_path = Path(out)
    if out_path.suffix not in OUTPUT_SUFFIXES:
        raise ExportError(f"{out}: the output must end in {' or '.join(OUTPUT_SUFFIXES)}")
    rows = read_labelled_rows(labels)  # raises LabelsError on any misaligned row, before writing
    if format == "trl":
        log.warning("TRL's PRMTrainer truncates float labels (int(0.75) == 0): writing boolean labels (%s)", _label_rule(threshold))
    records, steps_written, cut, skipped = [], 0, 0, 0
    for row in rows:
        if format == "jsonl":
            records.append(_jsonl_record(row))
            steps_written += len(row.steps)
            continue
        labels_kept = _boolean_labels(row, threshold)
        if not labels_kept:
            skipped += 1
            continue
        cut += len(labels_kept) < len(row.steps)
        steps = row.steps[: len(labels_kept)]
        steps_written += len(steps)
        records.append(_trl_record(row, steps, labels_kept) if format == "trl" else _math_shepherd_record(row, steps, labels_kept))
    write_records(records, out_path)
    return ExportSummary(str(out_path), format, len(records), steps_written, cut, skipped)


def _label_rule(threshold: float | None) -> str:
    return "hard labels" if threshold is None else f"soft label >= {threshold}"


def _boolean_labels(row: LabelledRow, threshold: float | None) -> list[bool]:
    """One boolean per step, up to the first step that has none."""
    labels = []
    for i in range(len(row.steps)):
        if threshold is None:
            value = row.hard_labels[i]
        else:
            score = row.soft_or_hard(i)
            value = None if score is None else score >= threshold
        if value is None:
            break
        labels.append(bool(value))
    return labels


def _trl_record(row: LabelledRow, steps: tuple[str, ...], labels: list[bool]) -> dict:
    return {"prompt": row.problem, "completions": list(steps), "labels": labels}


def _math_shepherd_record(row: LabelledRow, steps: tuple[str, ...], labels: list[bool]) -> dict:
    if any(KI_TAG in text for text in (row.problem, *steps)):
        raise ExportError(
            f"solution {row.solution_id}: its text contains the step tag {KI_TAG!r}, which Math-Shepherd's format cannot hold"
        )
    if "Step 1:" in row.problem:
        raise ExportError(f"solution {row.solution_id}: the problem text contains 'Step 1:', where Math-Shepherd's format starts the steps")
    lines = [step if _STEP_MARKER.match(step) else f"Step {i}: {step}" for i, step in enumerate(steps, start=1)]
    tagged = "\n".join(f"{line} {KI_TAG}" for line in lines)
    marks = iter("+" if label else "-" for label in labels)
    labelled = re.sub(KI_TAG, lambda _: next(marks), tagged)
    return {"input": f"{row.problem} {tagged}", "label": f"{row.problem} {labelled}"}


def _jsonl_record(row: LabelledRow) -> dict:
    return {
        "problem_id": row.problem_id,
        "solution_id": row.solution_id,
        "problem": row.problem,
        "reference_answer": row.reference_answer,
        "steps": list(row.steps),
        "soft_labels": list(row.soft_labels),
        "hard_labels": list(row.hard_labels),
        "n_correct": list(row.n_correct),
        "n_rollouts": list(row.n_rollouts),
        "n_truncated": _listed(row.n_truncated),
        "n_timeouts": _listed(row.n_timeouts),
        "label_method": list(row.label_method),
        "unlabelled_reason": _listed(row.unlabelled_reason),
        "first_error": first_predicted_error(row.hard_labels),  # None: not known (an unlabelled step before it)
        "label_source": row.label_source,
        "thinking_steps": row.thinking_steps,
        "trajectory_label": row.trajectory_label,
    }


def _listed(per_step: tuple | None) -> list | None:
    return None if per_step is None else list(per_step)


def write_records(records: list[dict], path: Path) -> None:
    """`records` as .jsonl or .parquet (by `path`'s suffix), written to a temporary name then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(records), temp)
    else:
        with open(temp, "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    os.replace(temp, path)
