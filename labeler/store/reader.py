"""Reading the labels shards a labeling job wrote, for training, scoring, evaluation, export and reports.

A labels path is a job's output directory (local or an object-store URI such as s3://bucket/job:
only the shards of committed units are read, so a running or interrupted job is read safely),
a local folder of Parquet shards (`labels/` itself, or any folder of shards), or one Parquet file.

Shards of schema 1.2 and older have no `label_source`: every label they hold came from Monte-Carlo
rollouts, so they read as "monte-carlo".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from labeler.store.shard_store import LABELS_DIR, ShardStore
from schemas.tables import MONTE_CARLO


class LabelsError(ValueError):
    """The labels cannot be read, or a row breaks the steps/labels alignment; the message is for the user."""


@dataclass(frozen=True)
class LabelledRow:
    """One solution with its step labels. Soft and hard labels may be None for steps a
    search strategy did not sample (`label_method` "inferred" or "unlabelled")."""

    problem_id: str
    solution_id: str
    problem: str
    reference_answer: str
    steps: tuple[str, ...]
    soft_labels: tuple[float | None, ...]
    hard_labels: tuple[bool | None, ...]
    n_correct: tuple[int, ...]
    n_rollouts: tuple[int, ...]
    label_method: tuple[str, ...]
    first_error: int
    generated_tokens: int
    label_source: str = MONTE_CARLO  # who made the labels: schemas/tables.py LABEL_SOURCES

    def soft_or_hard(self, i: int) -> float | None:
        """The soft label of step i, or its hard label as 0/1 when it has no soft label."""
        soft, hard = self.soft_labels[i], self.hard_labels[i]
        if soft is not None:
            return soft
        return None if hard is None else float(hard)


def open_job(path: str | Path) -> ShardStore | None:
    """The labeling job at `path`, its commit records folded in; None when `path` holds no job."""
    if "://" not in str(path) and Path(path).is_file():
        return None
    try:
        store = ShardStore(path)
        if not store.exists():
            return None
        store.load()
    except (ValueError, KeyError, OSError, pa.ArrowException) as error:
        raise LabelsError(f"{path}: cannot read the job's manifest: {error}") from error
    return store


def read_labels_table(path: str | Path, columns: list[str] | None = None) -> pa.Table:
    job = open_job(path)
    if job is not None:
        files = job.committed_files(LABELS_DIR)
        if not files:
            raise LabelsError(f"{path}: the job has no committed labels yet")
        read = lambda name: job.read_table(name, columns)
    else:
        files = _parquet_files(Path(path))
        read = lambda name: pq.read_table(name, columns=columns)
    tables = []
    for name in files:
        try:
            tables.append(read(name))
        except (OSError, pa.ArrowException) as error:
            raise LabelsError(f"{name}: cannot read labels shard: {error}") from error
    try:
        table = pa.concat_tables(tables, promote_options="permissive")
    except pa.ArrowException as error:
        raise LabelsError(f"{path}: labels shards have incompatible columns: {error}") from error
    return _with_label_source(table) if columns is None or "label_source" in columns else table


def _with_label_source(table: pa.Table) -> pa.Table:
    """`label_source` on every row: "monte-carlo" where a shard of schema 1.2 had none."""
    if "label_source" not in table.column_names:
        return table.append_column("label_source", pa.array([MONTE_CARLO] * table.num_rows, pa.string()))
    index = table.column_names.index("label_source")
    return table.set_column(index, "label_source", pc.fill_null(table.column("label_source"), MONTE_CARLO))


def _parquet_files(path: Path) -> list[Path]:
    if path.is_file():
        if path.suffix != ".parquet":
            raise LabelsError(f"{path}: expected a .parquet file or a labeler output directory")
        return [path]
    if not path.is_dir():
        raise LabelsError(f"{path}: no such file or directory")
    folder = path / LABELS_DIR if (path / LABELS_DIR).is_dir() else path
    files = sorted(p for p in folder.glob("*.parquet") if not p.name.startswith("."))
    if not files:
        raise LabelsError(f"{path}: no labels shards (*.parquet) found")
    return files


_ROW_COLUMNS = (
    "problem_id",
    "solution_id",
    "problem",
    "reference_answer",
    "steps",
    "soft_labels",
    "hard_labels",
    "n_correct",
    "n_rollouts",
    "label_method",
    "first_error",
    "generated_tokens",
    "label_source",
)
_PER_STEP = ("soft_labels", "hard_labels", "n_correct", "n_rollouts", "label_method")


def read_labelled_rows(path: str | Path) -> list[LabelledRow]:
    """Every solution of the labels at `path`; LabelsError when a row's lists do not line up with its steps."""
    table = read_labels_table(path)
    missing = [column for column in _ROW_COLUMNS if column not in table.column_names]
    if missing:
        raise LabelsError(f"{path}: not a labels table, missing columns {', '.join(missing)}")
    rows = []
    for row in table.select(list(_ROW_COLUMNS)).to_pylist():
        check_alignment(row)
        rows.append(LabelledRow(**{key: tuple(value) if key == "steps" or key in _PER_STEP else value for key, value in row.items()}))
    return rows


def check_alignment(row: dict) -> None:
    """Every per-step list has one entry per step, and there is at least one step."""
    steps = row.get("steps") or []
    where = f"solution {row.get('solution_id', '?')}"
    if not steps:
        raise LabelsError(f"{where}: no steps")
    for column in _PER_STEP:
        values = row.get(column)
        if values is not None and len(values) != len(steps):
            raise LabelsError(f"{where}: {column} has {len(values)} entries for {len(steps)} steps")
