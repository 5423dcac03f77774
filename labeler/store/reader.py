"""Reading the labels shards a labeling job wrote, for training, scoring, evaluation, export and reports
(and the judgments shards of a judge job, the same way).

A labels path is a job's output directory (local or an object-store URI such as s3://bucket/job:
only the shards of committed units are read, so a running or interrupted job is read safely),
a local folder of Parquet shards (`labels/` itself, or any folder of shards), or one Parquet file.

Shards of schema 1.2 and older have no `label_source`: every label they hold came from Monte-Carlo
rollouts, so they read as "monte-carlo". Shards older than 1.6 have a first_error that may be -1 or a step
behind an unlabelled one: it is recomputed on read, null where it is not known (schemas/tables.py first_error).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from labeler.store.manifest import JOB_KIND_KEY
from labeler.store.shard_store import JUDGMENTS_DIR, LABELS_DIR, ShardStore
from schemas.tables import MONTE_CARLO, first_error


class ShardsError(ValueError):
    """Shards that cannot be read; the message is for the user."""


class LabelsError(ShardsError):
    """The labels cannot be read, or a row breaks the steps/labels alignment; the message is for the user."""


class JudgmentsError(ShardsError):
    """The judgments (`labeler judge`'s output) cannot be read; the message is for the user."""


@dataclass(frozen=True)
class LabelledRow:
    """One solution with its step labels. Soft and hard labels may be None for steps a
    search strategy did not sample (`label_method` "inferred", "retraced" or "unlabelled"); an "early_stop" step has its
    hard label and no soft one."""

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
    first_error: int | None  # None: not known (an unlabelled step comes before the first hard-negative one, or any step)
    generated_tokens: int
    label_source: str = MONTE_CARLO  # who made the labels: schemas/tables.py LABEL_SOURCES
    # Trajectory-level (schema 1.4; shards written before it read as a plain solution with no label):
    thinking_steps: int = 0  # steps[:thinking_steps] are a reasoning trace's thinking
    trajectory_label: bool | None = None  # its stated final answer (a trace: its response) is right
    # Per step, None for a row of a shard without the column (n_truncated and unlabelled_reason: before 1.2,
    # n_timeouts: before 1.5): not known, not 0.
    n_truncated: tuple[int, ...] | None = None
    n_timeouts: tuple[int, ...] | None = None
    unlabelled_reason: tuple[str | None, ...] | None = None
    strategy: str | None = None  # the labeling strategy that wrote it (None: not a labels shard, e.g. TRL stepwise rows)

    def soft_or_hard(self, i: int) -> float | None:
        """The soft label of step i, or its hard label as 0/1 when it has no soft label."""
        soft, hard = self.soft_labels[i], self.hard_labels[i]
        if soft is not None:
            return soft
        return None if hard is None else float(hard)


def open_job(path: str | Path, error: type[ShardsError] = LabelsError) -> ShardStore | None:
    """The job at `path`, its commit records folded in; None when `path` holds no job."""
    if "://" not in str(path) and Path(path).is_file():
        return None
    try:
        store = ShardStore(path)
        if not store.exists():
            return None
        store.load()
    except (ValueError, KeyError, OSError, pa.ArrowException) as cause:
        raise error(f"{path}: cannot read the job's manifest: {cause}") from cause
    return store


# The jobs whose output holds each kind of shards (the manifest's JOB_KIND_KEY; None: `labeler label`).
_WRITTEN_BY = {LABELS_DIR: (None, "import", "consensus"), JUDGMENTS_DIR: ("judge",)}


def read_labels_table(path: str | Path, columns: list[str] | None = None) -> pa.Table:
    """The labels at `path`, every shard with its label_source: a shard of schema 1.2, which has none,
    reads as "monte-carlo" (only `labeler label` wrote labels then); and the first_error of schema 1.6,
    recomputed for the rows of older shards (null where an unlabelled step comes first)."""
    wanted = columns
    if columns is not None and LABEL_SOURCE in columns:
        wanted = None  # a 1.2 shard has none to read
    elif columns is not None and FIRST_ERROR in columns:
        wanted = [*columns, *(name for name in _FIRST_ERROR_FROM if name not in columns)]
    tables = [with_first_error(with_label_source(table)) for table in _read_shards(path, LABELS_DIR, wanted, LabelsError, "labels")]
    table = _concat(tables, path, LabelsError, "labels")
    return table if columns is None else table.select(columns)


LABEL_SOURCE = "label_source"
FIRST_ERROR = "first_error"
_FIRST_ERROR_FROM = ("hard_labels", "schema_version")  # what a row's first_error is recomputed from, and whether
FIRST_ERROR_DETERMINED_SINCE = (1, 6)  # the schema whose first_error is null where it is not known


def with_first_error(table: pa.Table) -> pa.Table:
    """A labels table whose first_error follows schema 1.6 on every row: the rows of an older schema (whose column
    read -1 or the first hard-negative step even behind an unlabelled step) get it recomputed from their hard labels."""
    if FIRST_ERROR not in table.column_names or "hard_labels" not in table.column_names:
        return table
    has_versions = "schema_version" in table.column_names
    if has_versions and all(_version(v) >= FIRST_ERROR_DETERMINED_SINCE for v in pc.unique(table.column("schema_version")).to_pylist()):
        return table
    versions = table.column("schema_version").to_pylist() if has_versions else [None] * table.num_rows
    hard = table.column("hard_labels").to_pylist()
    old = table.column(FIRST_ERROR).to_pylist()
    values = [first_error(h) if _version(v) < FIRST_ERROR_DETERMINED_SINCE else f for v, h, f in zip(versions, hard, old)]
    index = table.column_names.index(FIRST_ERROR)
    return table.set_column(index, pa.field(FIRST_ERROR, pa.int32(), nullable=True), pa.array(values, pa.int32()))


def _version(text: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in str(text).split("."))
    except ValueError:
        return (0,)  # no readable version: older than any, recomputed


def with_label_source(table: pa.Table) -> pa.Table:
    """A labels table with its label_source on every row: "monte-carlo" where the shard predates it (schema 1.2)."""
    if LABEL_SOURCE not in table.column_names:
        return table.append_column(pa.field(LABEL_SOURCE, pa.string(), nullable=False), pa.array([MONTE_CARLO] * table.num_rows, pa.string()))
    index = table.column_names.index(LABEL_SOURCE)
    return table.set_column(index, LABEL_SOURCE, pc.fill_null(table.column(LABEL_SOURCE), MONTE_CARLO))


def read_judgments_table(path: str | Path) -> pa.Table:
    """The judgments at `path`: a `labeler judge` output directory (committed units only), a folder
    of judgments shards (`judgments/` itself, or any folder of shards), or one Parquet file."""
    return _concat(_read_shards(path, JUDGMENTS_DIR, None, JudgmentsError, "judgments"), path, JudgmentsError, "judgments")


def _read_shards(path: str | Path, directory: str, columns: list[str] | None, error: type[ShardsError], what: str) -> list[pa.Table]:
    job = open_job(path, error)
    if job is not None:
        kind = job.manifest.get(JOB_KIND_KEY)
        if kind not in _WRITTEN_BY[directory]:
            raise error(f"{path}: holds the output of `labeler {kind or 'label'}`, which has no {what}")
        files = job.committed_files(directory)
        if not files:
            raise error(f"{path}: the job has no committed {what} yet")
        read = lambda name: job.read_table(name, columns)
    else:
        files = _parquet_files(Path(path), directory, error, what)
        read = lambda name: pq.read_table(name, columns=columns)
    tables = []
    for name in files:
        try:
            tables.append(read(name))
        except (OSError, pa.ArrowException) as cause:
            raise error(f"{name}: cannot read {what} shard: {cause}") from cause
    return tables


def _concat(tables: list[pa.Table], path, error: type[ShardsError], what: str) -> pa.Table:
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except pa.ArrowException as cause:
        raise error(f"{path}: {what} shards have incompatible columns: {cause}") from cause


def _parquet_files(path: Path, directory: str = LABELS_DIR, error: type[ShardsError] = LabelsError, what: str = "labels") -> list[Path]:
    if path.is_file():
        if path.suffix != ".parquet":
            raise error(f"{path}: expected a .parquet file or a labeler output directory")
        return [path]
    if not path.is_dir():
        raise error(f"{path}: no such file or directory")
    folder = path / directory if (path / directory).is_dir() else path
    files = sorted(p for p in folder.glob("*.parquet") if not p.name.startswith("."))
    if not files:
        raise error(f"{path}: no {what} shards (*.parquet) found")
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
_OPTIONAL_COLUMNS = ("thinking_steps", "trajectory_label", "n_truncated", "n_timeouts", "unlabelled_reason", "strategy")  # absent in older schemas
_OPTIONAL_PER_STEP = ("n_truncated", "n_timeouts", "unlabelled_reason")


def read_labelled_rows(path: str | Path, corrections: bool = True) -> list[LabelledRow]:
    """Every solution of the labels at `path`; LabelsError when a row's lists do not line up with its steps.

    With `corrections`, a labels output's human corrections (OUT/corrections/, made in `labeler view`)
    are applied over its labels (labeler/store/corrections.py)."""
    table = read_labels_table(path)
    missing = [column for column in _ROW_COLUMNS if column not in table.column_names]
    if missing:
        raise LabelsError(f"{path}: not a labels table, missing columns {', '.join(missing)}")
    optional = [column for column in _OPTIONAL_COLUMNS if column in table.column_names]
    rows = []
    for row in table.select([*_ROW_COLUMNS, *optional]).to_pylist():
        check_alignment(row)
        if row.get("thinking_steps") is None:  # a shard of schema 1.3 or older among newer ones
            row["thinking_steps"] = 0
        per_step = ("steps", *_PER_STEP, *_OPTIONAL_PER_STEP)
        rows.append(LabelledRow(**{key: tuple(value) if key in per_step and value is not None else value for key, value in row.items()}))
    if corrections:
        from labeler.store.corrections import corrected_rows  # it reads LabelledRow from this module

        rows = corrected_rows(path, rows, LabelsError)
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
