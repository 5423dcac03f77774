"""What `labeler train --labels` reads: our labels shards, or TRL's stepwise-supervision format.

TRL's stepwise supervision (the format of its PRMTrainer, removed from TRL in 1.14; the datasets its
scripts built, trl-lib/math_shepherd and trl-lib/prm800k, are in it) holds one solution a row:

    {"prompt": "problem text", "completions": ["step 1", "step 2"], "labels": [true, false]}

one boolean per step (true: the step is right). Where it is read from:

- a `.jsonl` file, or a `.parquet` file whose columns are TRL's (a labels shard has `steps`);
- a local folder of such files (its `*.jsonl` and `*.parquet`, not its subfolders, read in name order);
- `hf:NAME[:CONFIG][@SPLIT]` (split "train" when not given), loaded by the `datasets` library:
  `hf:trl-lib/math_shepherd@train`. NAME may be a local folder that `datasets.load_dataset` reads.

Anything else is a labels output (a job's directory, a folder of shards, one shard) and goes to
`labeler.store.reader`. The format is told from the columns: a file with `steps` is a labels shard,
one with any of `prompt`, `completions`, `labels` is TRL's (the missing ones are named).

Each row becomes a `LabelledRow` of label_source "trl-stepwise": its hard labels are the row's
booleans, it has no soft labels (TRL's format holds no Monte-Carlo fraction), so `--target soft`
trains on the hard label as 0/1, as for imported human labels; no counts, no trajectory label. The
problem id is a hash of the prompt, so all solutions of one prompt are on the same side of the split
by problem; the solution id adds the row's position, so a file read in another order is other data
to a resumed run.

A bad row (a missing or null field, a prompt that is not text, no completions, a completion that is
not text, text that is not valid Unicode, a label that is not a boolean, as many labels as completions not) is never dropped: as
the labels shards reader refuses a row whose labels do not line up with its steps, the whole source
is refused, before any model loads, with the number of bad rows and the first ones named by file,
row and field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from labeler.ids import stable_id
from labeler.inputs.readers import HF_PREFIX, parse_hub_spec
from labeler.store.manifest import MANIFEST_NAME
from labeler.store.reader import LabelledRow, LabelsError, read_labelled_rows

TRL_STEPWISE = "trl-stepwise"  # the label_source of rows read from TRL's format
TRL_COLUMNS = ("prompt", "completions", "labels")
STEPWISE_SUFFIXES = (".jsonl", ".parquet")
ERRORS_SHOWN = 3


@dataclass(frozen=True)
class BadRow:
    where: str  # file (or hub spec) and row: "math.jsonl row 4"
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.where}: {self.field}: {self.reason}"


def read_training_rows(path: str) -> list[LabelledRow]:
    """The solutions of one --labels source: TRL stepwise-supervision rows or labels shards (module docstring)."""
    files = stepwise_files(path)
    if files is None:
        return read_labelled_rows(path)
    return read_stepwise(path, files)


def stepwise_files(path: str) -> list[str] | None:
    """The files (or the hub spec) to read as TRL stepwise supervision; None when `path` holds labels shards."""
    if path.startswith(HF_PREFIX):
        return [path]
    if "://" in path:  # an object-store URI: a labeling job's output
        return None
    local = Path(path)
    if local.is_file():
        if local.suffix not in STEPWISE_SUFFIXES:
            raise LabelsError(
                f"{path}: expected labels (a labeling job's output directory, a folder of shards, one .parquet shard) "
                f"or TRL stepwise supervision (.jsonl, .parquet, a folder of them, {HF_PREFIX}NAME)"
            )
        if local.suffix == ".jsonl" or _is_stepwise_parquet(local):
            return [str(local)]
        return None
    if not local.is_dir() or (local / "labels").is_dir() or (local / MANIFEST_NAME).is_file():
        return None  # missing (the shards reader says so), or a job's output
    files = sorted(p for p in local.iterdir() if p.suffix in STEPWISE_SUFFIXES and p.is_file() and not p.name.startswith("."))
    if not files:
        return None
    if any(p.suffix == ".jsonl" for p in files) or any(_is_stepwise_parquet(p) for p in files):
        return [str(p) for p in files]
    return None


def _is_stepwise_parquet(path: Path) -> bool:
    import pyarrow.parquet as pq

    try:
        names = set(pq.read_schema(path).names)
    except Exception:  # not readable as Parquet: the shards reader names the file and the cause
        return False
    return "steps" not in names and bool(names & set(TRL_COLUMNS))


def read_stepwise(path: str, files: list[str]) -> list[LabelledRow]:
    """Every row of `files` as a LabelledRow; LabelsError naming the bad rows when any row is bad."""
    rows: list[LabelledRow] = []
    bad: list[BadRow] = []
    index = 0  # over all files, in order: part of each solution id
    for name in files:
        for where, record in _records(name):
            row = _labelled_row(record, index, where, bad)
            if row is not None:
                rows.append(row)
            index += 1
    if bad:
        shown = "; ".join(str(row) for row in bad[:ERRORS_SHOWN])
        more = f"; and {len(bad) - ERRORS_SHOWN} more" if len(bad) > ERRORS_SHOWN else ""
        raise LabelsError(
            f"{path}: {len(bad)} of {index} rows are not TRL stepwise-supervision rows "
            f"(prompt: text, completions: a list of steps, labels: one true/false per step): {shown}{more}"
        )
    if not rows:
        raise LabelsError(f"{path}: no rows")
    return rows


def _records(name: str) -> Iterator[tuple[str, object]]:
    """(where, record) for each row of one file or hub dataset; LabelsError when the whole input cannot be read."""
    if name.startswith(HF_PREFIX):
        yield from _hub_records(name)
    elif name.endswith(".jsonl"):
        yield from _jsonl_records(Path(name))
    else:
        yield from _parquet_records(Path(name))


def _jsonl_records(path: Path) -> Iterator[tuple[str, object]]:
    try:
        with open(path, "rb") as handle:
            lines = handle.read().splitlines()
    except OSError as error:
        raise LabelsError(f"{path}: cannot read: {error.strerror or error}") from error
    row = 0
    for line in lines:
        if not line.strip():  # blank lines are not rows (as for every JSON Lines input of the labeler)
            continue
        where = f"{path.name} row {row}"
        try:
            yield where, json.loads(line.decode("utf-8").removeprefix("\ufeff"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            yield where, _Unreadable(f"not valid JSON: {error}")
        row += 1


def _parquet_records(path: Path) -> Iterator[tuple[str, object]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as error:
        raise LabelsError(f"{path}: cannot read as Parquet: {error}") from error
    missing = [column for column in TRL_COLUMNS if column not in table.column_names]
    if missing:
        raise LabelsError(f"{path}: not TRL stepwise supervision: no column {', '.join(missing)} (it needs {', '.join(TRL_COLUMNS)})")
    for row, record in enumerate(table.select(list(TRL_COLUMNS)).to_pylist()):
        yield f"{path.name} row {row}", record


def _hub_records(spec: str) -> Iterator[tuple[str, object]]:
    name, config, split = parse_hub_spec(spec)
    try:
        import datasets

        dataset = datasets.load_dataset(name, config, split=split)
    except Exception as error:  # datasets raises many types: not found, offline, bad config or split
        first_line = (str(error).splitlines() or [""])[0]
        raise LabelsError(f"{spec}: cannot load dataset: {type(error).__name__}: {first_line}") from error
    missing = [column for column in TRL_COLUMNS if column not in dataset.column_names]
    if missing:
        raise LabelsError(f"{spec}: not TRL stepwise supervision: no column {', '.join(missing)} (it needs {', '.join(TRL_COLUMNS)})")
    row = 0
    for batch in dataset.select_columns(list(TRL_COLUMNS)).iter(batch_size=1024):
        for values in zip(*(batch[column] for column in TRL_COLUMNS)):
            yield f"{spec} row {row}", dict(zip(TRL_COLUMNS, values))
            row += 1


@dataclass(frozen=True)
class _Unreadable:
    reason: str


def _labelled_row(record: object, index: int, where: str, bad: list[BadRow]) -> LabelledRow | None:
    """The row as a LabelledRow, or None with the reason appended to `bad`."""
    problem = _row_problem(record)
    if problem is not None:
        bad.append(BadRow(where, *problem))
        return None
    prompt, completions, labels = (record[column] for column in TRL_COLUMNS)
    # the id a labeling job gives a problem read without an id column: the same problem from a job of ours
    # and from TRL's format lands on one side of the validation split
    problem_id = stable_id(prompt.strip())  # the presets strip the problem text before its id
    steps = len(completions)
    return LabelledRow(
        problem_id=problem_id,
        solution_id=f"{problem_id}-row{index}",
        problem=prompt,
        reference_answer="",
        steps=tuple(completions),
        soft_labels=(None,) * steps,  # no Monte-Carlo fraction: --target soft reads the hard label as 0/1
        hard_labels=tuple(labels),
        n_correct=(0,) * steps,
        n_rollouts=(0,) * steps,
        label_method=(TRL_STEPWISE,) * steps,
        first_error=next((i for i, label in enumerate(labels) if not label), -1),
        generated_tokens=0,
        label_source=TRL_STEPWISE,
    )


def _row_problem(record: object) -> tuple[str, str] | None:
    """(field, reason) for the first thing wrong with a row, None when it is a stepwise-supervision row."""
    if isinstance(record, _Unreadable):
        return "row", record.reason
    if not isinstance(record, dict):
        return "row", f"expected an object with {', '.join(TRL_COLUMNS)}, got {type(record).__name__}"
    for column in TRL_COLUMNS:
        if record.get(column) is None:
            return column, "missing" if column not in record else "null"
    prompt, completions, labels = (record[column] for column in TRL_COLUMNS)
    if not isinstance(prompt, str):
        return "prompt", f"expected text, got {type(prompt).__name__}"
    if not _is_unicode(prompt):
        return "prompt", "not valid Unicode (a lone surrogate)"
    if not isinstance(completions, list):
        return "completions", f"expected a list of steps, got {type(completions).__name__}"
    if not completions:
        return "completions", "no steps"
    for i, step in enumerate(completions):
        if not isinstance(step, str):
            return "completions", f"step {i} is {type(step).__name__}, not text"
        if not _is_unicode(step):
            return "completions", f"step {i} is not valid Unicode (a lone surrogate)"
    if not isinstance(labels, list):
        return "labels", f"expected a list of true/false, got {type(labels).__name__}"
    for i, label in enumerate(labels):
        if not isinstance(label, bool):
            return "labels", f"label {i} is {label!r}, not true/false"
    if len(labels) != len(completions):
        return "labels", f"{len(labels)} labels for {len(completions)} completions"
    return None


def _is_unicode(text: str) -> bool:
    """Whether the text encodes as UTF-8 (JSON can carry lone surrogates, which no tokenizer takes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
