"""`labeler export`: labels shards in the formats other PRM trainers read.

- `trl`: TRL's PRMTrainer stepwise format, one row per solution:
  {"prompt": problem, "completions": [step, ...], "labels": [bool, ...]}. Labels are booleans
  because PRMTrainer turns each label into int(label): a soft label such as 0.75 would become 0.
  PRMTrainer is in trl.experimental.prm up to trl 1.13 and gone from 1.14 on.
- `openrlhf`: OpenRLHF's process reward dataset (its ProcessRewardDataset, read by
  `openrlhf.cli.train_prm`, which OpenRLHF has up to 0.9.5 and removed in 0.9.6):
  {"input": text, "label": ["+", "-", ...]}, the fields its --input_key and --label_key default to.
  `input` is the Math-Shepherd layout below with the placeholder (`ки` unless --placeholder says
  otherwise) after each step, `label` one reward token per placeholder: "+" for a right step, "-"
  for a wrong one (train_prm's --placeholder_token ки --reward_tokens + -). Its reader tokenizes
  `input` without special tokens and puts the i-th label at the i-th placeholder token, so the
  placeholder must appear nowhere else and must be one token of the model's tokenizer (--tokenizer
  checks every row as that reader will read it). Labels are tokens, not numbers: its reader writes
  float labels into an integer tensor and fails.
- `math-shepherd`: {"input", "label"}: the problem, a space, then "Step k: text ки" per step joined
  by newlines; `label` is the same text with each `ки` replaced by `+` or `-`. Steps that do not
  start with a "Step k:" marker get one.
- `jsonl`: the labels table's label columns as they are (soft labels, counts, methods, reasons, label_source);
  a count column a shard of an older schema lacks (n_timeouts before 1.5) is null, not 0. Its first_error
  is the labels table's: null where it is not known, an unlabelled step before the first hard 0 (any step,
  when there is none).

Booleans (and OpenRLHF's +/-) are the hard labels, or soft >= --threshold when given. A step whose label was
not measured at N rollouts of its own prefix (schemas/tables.py NOT_MEASURED_AT_N: `early_stop`, `inferred`,
`retraced`, which a search strategy writes with a hard label and no soft one) is written with its hard label,
under --threshold too (there is no soft label to compare); the summary counts such steps by method
(`not_measured`), so that a reader knows how many of the booleans did not come from N rollouts. A step without
a label (a search strategy left it unlabelled, or ProcessBench stops judging after the first error)
is never written as a label: in the boolean formats (trl, math-shepherd, openrlhf) the solution is
cut before it, and a solution whose first step has no label is left out; both are counted. (Writing
the step on without a tag would show the PRM steps it is never scored after, and OpenRLHF's reader
cannot take a row without labels.) Every row's steps and label lists must line up, checked for all rows before anything is written.
The output is `.jsonl` or `.parquet`, by its extension, written to a temporary name then renamed.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from labeler.evaluation.metrics import first_predicted_error
from labeler.store.reader import LabelledRow, read_labelled_rows
from labeler.inputs.splitting import KI_TAG
from schemas.tables import NOT_MEASURED_AT_N

EXPORT_FORMATS = ("trl", "math-shepherd", "openrlhf", "jsonl")
# OpenRLHF's train_prm: the text field, the labels field (its --input_key and --label_key defaults) and
# the reward tokens of a right and a wrong step (its --reward_tokens, the positive first)
OPENRLHF_INPUT, OPENRLHF_LABEL = "input", "label"
OPENRLHF_POSITIVE, OPENRLHF_NEGATIVE = "+", "-"
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
    solutions_skipped: int  # left out: their first step is unlabelled (later steps may have labels)
    # steps written whose label was not measured at N (early_stop, inferred, retraced), by method: their hard label
    not_measured: dict[str, int] = field(default_factory=dict)


def export_labels(
    labels: str, format: str, out: str, threshold: float | None = None, placeholder: str = KI_TAG, tokenizer: str | None = None
) -> ExportSummary:
    """`tokenizer` (openrlhf only): a model's tokenizer (hub id or folder) to read every row with as
    OpenRLHF's reader will, before anything is written."""
    if format not in EXPORT_FORMATS:
        raise ExportError(f"unknown format {format!r}; expected one of {', '.join(EXPORT_FORMATS)}")
    if format != "openrlhf" and (placeholder != KI_TAG or tokenizer is not None):
        raise ExportError("--placeholder and --tokenizer are for --format openrlhf")
    if not placeholder.strip() or placeholder in (OPENRLHF_POSITIVE, OPENRLHF_NEGATIVE):
        raise ExportError(f"--placeholder {placeholder!r}: give a token other than the reward tokens + and -")
    out_path = Path(out)
    if out_path.suffix not in OUTPUT_SUFFIXES:
        raise ExportError(f"{out}: the output must end in {' or '.join(OUTPUT_SUFFIXES)}")
    rows = read_labelled_rows(labels)  # raises LabelsError on any misaligned row, before writing
    if format == "trl":
        log.warning("TRL's PRMTrainer truncates float labels (int(0.75) == 0): writing boolean labels (%s)", _label_rule(threshold))
    records, written, steps_written, cut, skipped = [], [], 0, 0, 0  # written: the solution id of each record
    not_measured: dict[str, int] = {}
    for row in rows:
        if format == "jsonl":
            records.append(_jsonl_record(row))
            steps_written += len(row.steps)
            _count_not_measured(not_measured, row, len(row.steps))
            continue
        labels_kept = _boolean_labels(row, threshold)
        if not labels_kept:
            skipped += 1
            continue
        cut += len(labels_kept) < len(row.steps)
        steps = row.steps[: len(labels_kept)]
        steps_written += len(steps)
        _count_not_measured(not_measured, row, len(steps))
        written.append(row.solution_id)
        if format == "trl":
            records.append(_trl_record(row, steps, labels_kept))
        elif format == "openrlhf":
            records.append(_openrlhf_record(row, steps, labels_kept, placeholder))
        else:
            records.append(_math_shepherd_record(row, steps, labels_kept))
    if tokenizer is not None:
        check_openrlhf_tokens(records, written, tokenizer, placeholder)
    write_records(records, out_path)
    return ExportSummary(str(out_path), format, len(records), steps_written, cut, skipped, not_measured)


def _count_not_measured(counts: dict[str, int], row: LabelledRow, steps: int) -> None:
    """Count the written steps (the first `steps` of `row`) whose label was not measured at N, by method."""
    for method in row.label_method[:steps]:
        if method in NOT_MEASURED_AT_N:
            counts[method] = counts.get(method, 0) + 1


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
    tagged = _tagged_steps(row, steps, KI_TAG, "Math-Shepherd's format")
    marks = iter("+" if label else "-" for label in labels)
    labelled = re.sub(KI_TAG, lambda _: next(marks), tagged)
    return {"input": f"{row.problem} {tagged}", "label": f"{row.problem} {labelled}"}


def _openrlhf_record(row: LabelledRow, steps: tuple[str, ...], labels: list[bool], placeholder: str) -> dict:
    tagged = _tagged_steps(row, steps, placeholder, "OpenRLHF's process reward dataset")
    marks = [OPENRLHF_POSITIVE if label else OPENRLHF_NEGATIVE for label in labels]
    text = f"{row.problem} {tagged}"
    if text.count(placeholder) != len(marks):  # a placeholder inside the "Step k:" markers or the separators we add
        raise ExportError(
            f"solution {row.solution_id}: the placeholder {placeholder!r} occurs {text.count(placeholder)} times in the exported "
            f"text for {len(marks)} labels (it is part of the text around the steps): choose another --placeholder"
        )
    return {OPENRLHF_INPUT: text, OPENRLHF_LABEL: marks}


def _tagged_steps(row: LabelledRow, steps: tuple[str, ...], tag: str, format: str) -> str:
    """Math-Shepherd's layout of the steps: "Step k: text TAG" lines (a step that starts with its own
    "Step k:" keeps it); ExportError when the tag occurs in the text itself (it would read as a step's end)."""
    if any(tag in text for text in (row.problem, *steps)):
        raise ExportError(f"solution {row.solution_id}: its text contains the step tag {tag!r}, which {format} cannot hold")
    if "Step 1:" in row.problem:
        raise ExportError(f"solution {row.solution_id}: the problem text contains 'Step 1:', where {format} starts the steps")
    lines = [step if _STEP_MARKER.match(step) else f"Step {i}: {step}" for i, step in enumerate(steps, start=1)]
    return "\n".join(f"{line} {tag}" for line in lines)


def check_openrlhf_tokens(records: list[dict], solution_ids: list[str], tokenizer_name: str, placeholder: str) -> None:
    """Each openrlhf row as its reader tokenizes it (no special tokens): the placeholder and both reward
    tokens one token each, and as many placeholder tokens in `input` as labels; ExportError naming the
    first row that breaks this (its reader would fail on it, or put labels at the wrong steps)."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_name)
    except (OSError, ValueError) as error:
        raise ExportError(f"--tokenizer {tokenizer_name}: cannot load it: {str(error).splitlines()[0]}") from error
    ids = {}
    for token in (placeholder, OPENRLHF_POSITIVE, OPENRLHF_NEGATIVE):
        encoded = tokenizer.encode(token, add_special_tokens=False)
        if len(encoded) != 1:
            raise ExportError(
                f"--tokenizer {tokenizer_name} reads {token!r} as {len(encoded)} tokens; OpenRLHF needs one"
                + (": choose another --placeholder" if token == placeholder else "")
            )
        ids[token] = encoded[0]
    for record, solution_id in zip(records, solution_ids):
        found = tokenizer(record[OPENRLHF_INPUT], add_special_tokens=False)["input_ids"].count(ids[placeholder])
        labels = len(record[OPENRLHF_LABEL])
        if found != labels:
            why = " (after a space it reads as another token)" if found < labels else ""
            raise ExportError(
                f"solution {solution_id}: --tokenizer {tokenizer_name} finds {found} placeholder tokens {placeholder!r} "
                f"in its input for {labels} labels{why}: choose another --placeholder"
            )


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
