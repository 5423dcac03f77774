"""Checks run on every table before it is written: the schema, and the invariants of the labels and judgments."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from schemas.judgments import JUDGMENTS_SCHEMA, NO_ERROR, majority
from schemas.tables import (
    LABEL_METHODS,
    LABEL_SOURCES,
    LABELS_SCHEMA,
    MEASURED_METHODS,
    REJECTED_SCHEMA,
    ROLLOUTS_SCHEMA,
    TRAJECTORY_VERDICTS,
    UNCHECKED,
    VERDICTS,
    SchemaError,
    first_error,
)


def _check_schema(table: pa.Table, expected: pa.Schema, name: str) -> None:
    if not table.schema.equals(expected, check_metadata=False):
        raise SchemaError(f"{name} table does not match schema: got {table.schema}, expected {expected}")
    for field in expected:
        if not field.nullable and table.column(field.name).null_count:
            raise SchemaError(f"{name}.{field.name} has nulls")


def validate_labels(table: pa.Table) -> None:
    _check_schema(table, LABELS_SCHEMA, "labels")
    per_step = ("soft_labels", "hard_labels", "n_correct", "n_rollouts", "n_truncated", "n_timeouts", "label_method", "unlabelled_reason")
    sources = set(pc.unique(table.column("label_source")).to_pylist())
    if not sources <= set(LABEL_SOURCES):
        raise SchemaError(f"labels.label_source has unknown values {sorted(sources - set(LABEL_SOURCES))}")
    trajectory = ("thinking_steps", "trajectory_verdict", "trajectory_label")
    rows = table.select(["solution_id", "steps", *per_step, "first_error", *trajectory, "label_source"]).to_pylist()
    seen: set[str] = set()
    for row in rows:
        where = f"labels row solution_id={row['solution_id']}"
        if row["solution_id"] in seen:
            raise SchemaError(f"{where}: duplicate solution_id")
        seen.add(row["solution_id"])
        k = len(row["steps"])
        if k == 0:
            raise SchemaError(f"{where}: no steps")
        for column in per_step:
            if len(row[column]) != k:
                raise SchemaError(f"{where}: {column} has {len(row[column])} entries for {k} steps")
        for i, (soft, hard, correct, total, cut, timeouts, method, reason) in enumerate(zip(*(row[column] for column in per_step))):
            if method not in LABEL_METHODS:
                raise SchemaError(f"{where} step {i}: unknown label_method {method!r}")
            if cut < 0 or timeouts < 0:
                raise SchemaError(f"{where} step {i}: n_truncated={cut} n_timeouts={timeouts}")
            if (reason is None) == (method == "unlabelled"):
                raise SchemaError(f"{where} step {i}: {'an unlabelled step needs' if reason is None else 'only an unlabelled step has'} a reason")
            if method in MEASURED_METHODS:
                if total < 1 or not 0 <= correct <= total:
                    raise SchemaError(f"{where} step {i}: n_correct={correct} n_rollouts={total}")
                expected_soft = None if method == "early_stop" else correct / total
                soft_agrees = soft is None if expected_soft is None else (soft is not None and abs(soft - expected_soft) <= 1e-9)
                if not soft_agrees or hard is None or hard != (correct > 0):
                    raise SchemaError(f"{where} step {i}: labels disagree with counts")
            elif method == "unlabelled":  # it may hold counted rollouts, too few to call it wrong (none correct)
                if total < 0 or correct != 0 or soft is not None or hard is not None:
                    raise SchemaError(f"{where} step {i}: an unlabelled step has no correct rollout and no label (n_correct={correct})")
            else:
                if total != 0 or correct != 0 or soft is not None:
                    raise SchemaError(f"{where} step {i}: a step labelled {method} has no counted rollouts and no soft label")
                if (hard is None) != (method == "unlabelled"):
                    raise SchemaError(f"{where} step {i}: an {method} step {'has no' if hard is None else 'has a'} hard label")
                if method == "retraced" and hard is not True:  # passed on rollouts that wrote it and reached the answer
                    raise SchemaError(f"{where} step {i}: a retraced step is labelled right (hard true, soft null), got hard {hard}")
        expected_first_error = first_error(row["hard_labels"])
        if row["first_error"] != expected_first_error:
            given = "null (an unlabelled step comes before any hard-negative one)" if expected_first_error is None else expected_first_error
            raise SchemaError(f"{where}: first_error={row['first_error']} but hard labels give {given}")
        if not 0 <= row["thinking_steps"] <= k:
            raise SchemaError(f"{where}: thinking_steps={row['thinking_steps']} for {k} steps")
        verdict, label = row["trajectory_verdict"], row["trajectory_label"]
        if verdict not in TRAJECTORY_VERDICTS:
            raise SchemaError(f"{where}: unknown trajectory_verdict {verdict!r}")
        if label != (None if verdict in ("timeout", UNCHECKED) else verdict == "correct"):
            raise SchemaError(f"{where}: trajectory_label={label} disagrees with trajectory_verdict {verdict!r}")
        _check_label_source(row, where)


def _check_label_source(row: dict, where: str) -> None:
    """Judge labels (label_method "judge") on every step of a row whose label_source is "judge", and on no
    other, but a judge's row a reviewer corrected (label_source "human", its steps judge or human)."""
    source = row["label_source"]
    judged = [method == "judge" for method in row["label_method"]]
    if source == "judge" and not all(judged):
        raise SchemaError(f"{where}: a row with label_source judge has steps labelled otherwise")
    if source not in ("judge", "human") and any(judged):
        raise SchemaError(f"{where}: a step labelled judge in a row with label_source {source}")


def validate_rollouts(table: pa.Table) -> None:
    _check_schema(table, ROLLOUTS_SCHEMA, "rollouts")
    verdicts = set(pc.unique(table.column("verdict")).to_pylist())
    if not verdicts <= set(VERDICTS):
        raise SchemaError(f"rollouts.verdict has unknown values {sorted(verdicts - set(VERDICTS))}")


def validate_rejected(table: pa.Table) -> None:
    _check_schema(table, REJECTED_SCHEMA, "rejected")


def validate_judgments(table: pa.Table) -> None:
    _check_schema(table, JUDGMENTS_SCHEMA, "judgments")
    per_vote = ("critiques", "critique_indices", "critique_seeds", "critique_samples")
    rows = table.select(["solution_id", "steps", *per_vote, "first_error", "agreement", "votes"]).to_pylist()
    seen: set[str] = set()
    for row in rows:
        where = f"judgments row solution_id={row['solution_id']}"
        if row["solution_id"] in seen:
            raise SchemaError(f"{where}: duplicate solution_id")
        seen.add(row["solution_id"])
        if not row["steps"]:
            raise SchemaError(f"{where}: no steps")
        if row["votes"] < 1:
            raise SchemaError(f"{where}: votes={row['votes']}")
        for column in per_vote:
            if len(row[column]) != row["votes"]:
                raise SchemaError(f"{where}: {column} has {len(row[column])} entries for {row['votes']} votes")
        wrong = [index for index in row["critique_indices"] if not NO_ERROR <= index < len(row["steps"])]
        if wrong:
            raise SchemaError(f"{where}: critique index {wrong[0]} is not a step of its {len(row['steps'])} steps, nor -1")
        if any(samples < 1 for samples in row["critique_samples"]):
            raise SchemaError(f"{where}: a vote with no sample")
        verdict, agreement = majority(row["critique_indices"])
        if row["first_error"] != verdict or abs(row["agreement"] - agreement) > 1e-9:
            raise SchemaError(
                f"{where}: first_error={row['first_error']} agreement={row['agreement']} but the votes give {verdict} and {agreement}"
            )
