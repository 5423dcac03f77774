"""Checks run on every table before it is written: the schema, and the invariants of the labels."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from schemas.tables import (
    LABEL_METHODS,
    LABEL_SOURCES,
    LABELS_SCHEMA,
    MEASURED_METHODS,
    REJECTED_SCHEMA,
    ROLLOUTS_SCHEMA,
    VERDICTS,
    SchemaError,
)


def _check_schema(table: pa.Table, expected: pa.Schema, name: str) -> None:
    if not table.schema.equals(expected, check_metadata=False):
        raise SchemaError(f"{name} table does not match schema: got {table.schema}, expected {expected}")
    for field in expected:
        if not field.nullable and table.column(field.name).null_count:
            raise SchemaError(f"{name}.{field.name} has nulls")


def validate_labels(table: pa.Table) -> None:
    _check_schema(table, LABELS_SCHEMA, "labels")
    per_step = ("soft_labels", "hard_labels", "n_correct", "n_rollouts", "n_truncated", "label_method", "unlabelled_reason")
    sources = set(pc.unique(table.column("label_source")).to_pylist())
    if not sources <= set(LABEL_SOURCES):
        raise SchemaError(f"labels.label_source has unknown values {sorted(sources - set(LABEL_SOURCES))}")
    rows = table.select(["solution_id", "steps", *per_step, "first_error"]).to_pylist()
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
        for i, (soft, hard, correct, total, cut, method, reason) in enumerate(zip(*(row[column] for column in per_step))):
            if method not in LABEL_METHODS:
                raise SchemaError(f"{where} step {i}: unknown label_method {method!r}")
            if cut < 0:
                raise SchemaError(f"{where} step {i}: n_truncated={cut}")
            if (reason is None) == (method == "unlabelled"):
                raise SchemaError(f"{where} step {i}: {'an unlabelled step needs' if reason is None else 'only an unlabelled step has'} a reason")
            if method in MEASURED_METHODS:
                if total < 1 or not 0 <= correct <= total:
                    raise SchemaError(f"{where} step {i}: n_correct={correct} n_rollouts={total}")
                expected_soft = None if method == "early_stop" else correct / total
                soft_agrees = soft is None if expected_soft is None else (soft is not None and abs(soft - expected_soft) <= 1e-9)
                if not soft_agrees or hard is None or hard != (correct > 0):
                    raise SchemaError(f"{where} step {i}: labels disagree with counts")
            else:
                if total != 0 or correct != 0 or soft is not None:
                    raise SchemaError(f"{where} step {i}: a step labelled {method} has no counted rollouts and no soft label")
                if (hard is None) != (method == "unlabelled"):
                    raise SchemaError(f"{where} step {i}: an {method} step {'has no' if hard is None else 'has a'} hard label")
        expected_first_error = next((i for i, hard in enumerate(row["hard_labels"]) if hard is False), -1)
        if row["first_error"] != expected_first_error:
            raise SchemaError(f"{where}: first_error={row['first_error']} but hard labels give {expected_first_error}")


def validate_rollouts(table: pa.Table) -> None:
    _check_schema(table, ROLLOUTS_SCHEMA, "rollouts")
    verdicts = set(pc.unique(table.column("verdict")).to_pylist())
    if not verdicts <= set(VERDICTS):
        raise SchemaError(f"rollouts.verdict has unknown values {sorted(verdicts - set(VERDICTS))}")


def validate_rejected(table: pa.Table) -> None:
    _check_schema(table, REJECTED_SCHEMA, "rejected")
