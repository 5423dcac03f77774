"""`labeler import`: a dataset's own step labels written as a labels output, the way a labeling job
writes one (labeler/store/: shards per work unit, commit records, manifest, rejected/, the lock), so
`train`, `eval`, `export`, `report` and `status` read it unchanged.

Rows go through the presets that `labeler label` uses (labeler/inputs/presets.py), so an imported
solution has the problem_id and solution_id that labelling the same file would give it, and the
dataset's labels are read by labeler/inputs/human_labels.py. Each step is labelled `human`: its
hard label is the dataset's, its soft label null, its counts 0; a step the dataset does not label
is `unlabelled` with the reason. Nothing is generated, so a unit is cheap; resume works as for
labeling (committed units are skipped) and a rerun with other settings or input is refused. A unit
whose labels cannot be built (a row that trips a bug) is bisected: only the rows that fail alone go
to rejected/ (stage "import", with the error), and its stats name the failure (`labeler status`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace

import pyarrow as pa

from labeler.importing.config import ImportConfig
from labeler.inputs.answers import read_answer_book
from labeler.inputs.human_labels import StepLabel, step_labels
from labeler.inputs.presets import PresetOptions, resolve_preset, to_source_row
from labeler.inputs.readers import InputError, RawRow, input_fingerprint, read_rows
from labeler.inputs.rejection_share import JUDGED_ROWS, TooManyRejectedError, check_rejected_share, describe_rejected
from labeler.labeling.job import keep_refused_rows, package_versions
from labeler.labeling.planning import PlannedRow, WorkUnit, assign_row_keys, plan_hash, plan_units
from labeler.labeling.tables import rejected_table
from labeler.records import RejectedRow, RowError, SourceRow
from labeler.store.lock import hold_output
from labeler.store.manifest import (
    IMPORT_KIND,
    JOB_KIND_KEY,
    UNDETERMINED_KEY,
    CorruptManifestError,
    check_same_job,
    check_same_kind,
    check_same_schema,
    new_manifest,
    read_commit_records,
    rebuild_manifest,
)
from labeler.store.progress import ProgressReporter
from labeler.store.shard_store import FAILURE_KEY, LABELS_DIR, REJECTED_DIR, ShardStore
from schemas import LABELS_SCHEMA, SCHEMA_VERSION, validate_labels
from schemas.tables import UNCHECKED, first_error

IMPORT_STRATEGY = "import"  # the labels' `strategy` column

# Who made each dataset's labels: the labels' label_source, and what their `model` column and the
# manifest's model name say labelled them (no model did: a dataset's own labels).
LABEL_SOURCE = {"processbench": "human", "prm800k": "human", "math-shepherd": "monte-carlo"}
LABELLED_BY = {
    "processbench": "human: ProcessBench's expert annotators (first error only)",
    "prm800k": "human: PRM800K's raters",
    "math-shepherd": "Math-Shepherd's released automatic labels (hard estimates from its own completions), not human",
}


@dataclass
class ImportPlan:
    preset: str
    rows_read: int
    rejected: list[RejectedRow]
    units: list[WorkUnit]
    labels: dict[int, list[StepLabel]]  # by row_index

    @property
    def solutions(self) -> int:
        return sum(len(unit.rows) for unit in self.units)


@dataclass
class ImportSummary:
    output: str
    preset: str
    label_source: str
    units_total: int
    units_run_now: int
    solutions: int
    steps: int
    steps_labelled: int
    steps_positive: int
    rejected_rows: int
    seconds: float
    files: dict = field(default_factory=dict)


def plan_import(config: ImportConfig) -> ImportPlan:
    """Read every row with its labels (bad rows become RejectedRow) and cut the rest into units.
    InputError for an input that cannot be read, has no rows or too many rejected, or an --answers
    file that cannot be read."""
    answers = read_answer_book(config.answers, config.trust_remote_code) if config.answers else None
    options = PresetOptions.from_columns(config.split_rule, config.max_row_chars, config.columns, answers)
    preset = resolve_preset(config.preset, None, options)  # checks the column flags against the preset
    sources: list[SourceRow] = []
    labels: dict[int, list[StepLabel]] = {}
    rejected: list[RejectedRow] = []
    rows_read = 0
    for raw in read_rows(config.input, config.limit, config.trust_remote_code):
        rows_read += 1
        try:
            source, row_labels = _read_row(raw, preset, options, config.neutral)
            sources.append(source)
            labels[raw.row_index] = row_labels
        except RowError as error:
            row_id = (raw.data or {}).get("id")
            rejected.append(RejectedRow(raw.row_index, error.field, error.reason, None if row_id is None else str(row_id), raw.raw))
        if rows_read == JUDGED_ROWS:
            check_rejected_share(config.input, rows_read, rejected, config.max_rejected_share, preset)
    if not rows_read:
        raise InputError(f"{config.input}: no rows")
    if rows_read < JUDGED_ROWS:
        check_rejected_share(config.input, rows_read, rejected, config.max_rejected_share, preset)
    units = plan_units(assign_row_keys(sources), config.shard_size)
    return ImportPlan(preset, rows_read, rejected, units, labels)


def _read_row(raw: RawRow, preset: str, options: PresetOptions, neutral: str) -> tuple[SourceRow, list[StepLabel]]:
    if raw.error is not None:
        raise raw.error
    if preset == "prm800k" and isinstance(raw.data.get("label"), dict) and raw.data["label"].get("finish_reason") == "bad_problem":
        raise RowError("label", "finish_reason 'bad_problem': the rater flagged the problem itself, its ratings are no step labels")
    source = to_source_row(preset, raw.row_index, raw.data, options)
    if source.steps is None:
        raise RowError("steps", "the row has no solution steps to label")
    row_labels = step_labels(preset, raw.data, len(source.steps), neutral, options.solution_column or "input")
    if all(label.correct is None for label in row_labels):
        raise RowError("label", f"no step has a label ({row_labels[0].reason})")
    return source, row_labels


def run_import(
    config: ImportConfig,
    *,
    overwrite: bool = False,
    rebuild: bool = False,
    progress_enabled: bool = True,
    lock_output: bool = True,
) -> ImportSummary:
    """Write the labels of every unit not yet committed; the output's lock is held meanwhile."""
    started = time.monotonic()
    try:
        plan = plan_import(config)  # reads only the input
    except TooManyRejectedError as error:
        raise keep_refused_rows(error, config.output, lock_output) from None
    store = ShardStore(config.output)
    with hold_output(store, enabled=lock_output) as warnings:
        warnings = list(warnings) + _open_store(store, config, plan, overwrite, rebuild)
        store.remove_uncommitted()
        store.write_input_rejected(rejected_table(plan.rejected, stage="input"))
        pending = [unit for unit in plan.units if not store.is_committed(unit.unit_id)]
        progress = ProgressReporter(
            len(plan.units), plan.solutions, units_done=len(plan.units) - len(pending),
            solutions_done=plan.solutions - sum(len(unit.rows) for unit in pending), enabled=progress_enabled,
        )  # fmt: skip
        for warning in warnings:
            progress.warn(warning)
        progress.log(
            f"input {config.input}: {plan.rows_read} rows read, {len(plan.rejected)} rejected, preset {plan.preset}; "
            f"{len(plan.units)} units, {len(pending)} to write"
        )
        for line in describe_rejected(plan.rejected, store.location.display(REJECTED_DIR)):
            progress.warn(line)
        hash_of_config = config.config_hash()
        for unit in pending:
            unit_started = time.monotonic()
            tables, failed = _import_rows(unit, unit.rows, plan, hash_of_config)
            table = pa.concat_tables(tables) if tables else LABELS_SCHEMA.empty_table()
            stats = _unit_stats(table, time.monotonic() - unit_started)
            shards = {LABELS_DIR: table}
            if failed:
                progress.warn(f"unit {unit.index}: {len(failed)} of its {len(unit.rows)} rows could not be imported and go to rejected/")
                shards[REJECTED_DIR] = rejected_table(failed, stage="import")
                why = f"{len(failed)} of its {len(unit.rows)} rows could not be imported: {failed[0].reason}"
                stats |= {"rejected": len(failed), FAILURE_KEY: why}
            if store.commit_unit(unit.unit_id, unit.shard_name, shards, stats):
                progress.unit_committed(len(unit.rows), 0, 0)
        store.compact()
        return _summarise(store, plan, len(pending), time.monotonic() - started)


def _import_rows(
    unit: WorkUnit, rows: tuple[PlannedRow, ...], plan: ImportPlan, config_hash: str
) -> tuple[list[pa.Table], list[RejectedRow]]:
    """The labels tables of `rows` (of `unit`), and the rows rejected: when building the table fails
    (a row that trips a bug), each half is built on its own, down to the rows that fail alone."""
    try:
        table = imported_labels_table(replace(unit, rows=rows), plan.labels, plan.preset, config_hash)
        validate_labels(table)
        return [table], []
    except Exception as error:  # not a KeyboardInterrupt: that stops the import, a rerun resumes
        if len(rows) > 1:
            first, second = (_import_rows(unit, half, plan, config_hash) for half in (rows[: len(rows) // 2], rows[len(rows) // 2 :]))
            return first[0] + second[0], first[1] + second[1]
        source = rows[0].source
        reason = f"cannot be imported: {type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"[:300]
        raw = json.dumps({"problem": source.problem, "steps": list(source.steps) if source.steps is not None else None})[:2000]
        return [], [RejectedRow(source.row_index, "row", reason, source.problem_id, raw)]


def imported_labels_table(unit: WorkUnit, labels: dict[int, list[StepLabel]], preset: str, config_hash: str) -> pa.Table:
    rows = [_labels_row(planned, unit.unit_id, labels[planned.source.row_index], preset, config_hash) for planned in unit.rows]
    return pa.Table.from_pylist(rows, schema=LABELS_SCHEMA)


def _labels_row(planned: PlannedRow, unit_id: str, labels: list[StepLabel], preset: str, config_hash: str) -> dict:
    solution = planned.given_solution()
    hard = [label.correct for label in labels]
    k = len(hard)
    return {
        "problem_id": solution.problem_id,
        "solution_id": solution.solution_id,
        "problem": solution.problem,
        "reference_answer": solution.reference_answer,
        "steps": list(solution.steps),
        "soft_labels": [None] * k,
        "hard_labels": hard,
        "n_correct": [0] * k,
        "n_rollouts": [0] * k,
        "n_truncated": [0] * k,
        "n_timeouts": [0] * k,
        "label_method": ["unlabelled" if label.correct is None else "human" for label in labels],
        "unlabelled_reason": [label.reason if label.correct is None else None for label in labels],
        "first_error": first_error(hard),  # null where an unlabelled step comes first
        "thinking_steps": solution.thinking_steps,
        "trajectory_verdict": UNCHECKED,  # an import checks no answer: no trajectory label
        "trajectory_label": None,
        "generated_tokens": 0,
        "solution_tokens": 0,
        "solution_truncated": False,
        "row_index": solution.row_index,
        "unit_id": unit_id,
        "source": preset,
        "model": LABELLED_BY[preset],
        "strategy": IMPORT_STRATEGY,
        "seed": 0,
        "config_hash": config_hash,
        "schema_version": SCHEMA_VERSION,
        "label_source": LABEL_SOURCE[preset],
    }


def _unit_stats(table: pa.Table, seconds: float) -> dict:
    steps = sum(len(steps) for steps in table.column("steps").to_pylist())
    return {
        "solutions": table.num_rows, "steps": steps, "rollouts": 0, "generated_tokens": 0, "rejected": 0, "seconds": round(seconds, 3),
        UNDETERMINED_KEY: table.column("first_error").null_count,  # an unlabelled step first (its first error unknown)
    }  # fmt: skip


def _open_store(store: ShardStore, config: ImportConfig, plan: ImportPlan, overwrite: bool, rebuild: bool) -> list[str]:
    """Start the output's manifest afresh, resume the one there, or rebuild a lost one; the warnings to show."""
    hash_of_config, hash_of_plan = config.config_hash(), plan_hash(plan.units)
    fingerprint = input_fingerprint(config.input)
    existing, corrupt = None, False
    if overwrite:
        store.wipe()
    else:
        try:
            existing = store.load() if store.exists() else None
        except CorruptManifestError:
            if not rebuild:
                raise
            corrupt = True
    if existing is not None:
        check_same_kind(existing, IMPORT_KIND, config.output)  # before its settings: a label job's are all "changed"
        notices = check_same_schema(existing, config.output)
        check_same_job(existing, config.output_settings(), hash_of_config, hash_of_plan, fingerprint, config.output)
        store.start(existing)
        return notices + store.redo_unreadable_units()
    input_info = {"spec": config.input, "fingerprint": fingerprint, "preset": plan.preset, "rows_read": plan.rows_read, "rows_rejected": len(plan.rejected)}
    if config.answers:
        input_info["answers"] = {"spec": config.answers, "fingerprint": input_fingerprint(config.answers)}
    manifest = new_manifest(
        config=config.output_settings(),
        config_hash=hash_of_config,
        plan_hash=hash_of_plan,
        versions=package_versions(),
        model={"name": LABELLED_BY[plan.preset], "label_source": LABEL_SOURCE[plan.preset]},
        input_info=input_info,
        units=[{"unit_id": u.unit_id, "index": u.index, "n_rows": len(u.rows), "shard": u.shard_name} for u in plan.units],
    )
    manifest[JOB_KIND_KEY] = IMPORT_KIND  # what `view` and `status` say wrote the output
    warnings = []
    if rebuild:
        folded = rebuild_manifest(manifest, read_commit_records(store.location), config.output, IMPORT_KIND, store.location)
        if corrupt or folded:
            warnings.append(f"{store.location.display('manifest.json')} rebuilt from the {folded} commit records in commits/; the other units are written again")
    store.start(manifest)
    return warnings + store.redo_unreadable_units()


def _summarise(store: ShardStore, plan: ImportPlan, units_run_now: int, seconds: float) -> ImportSummary:
    solutions = steps = labelled = positive = 0
    for name in store.committed_files(LABELS_DIR):
        for hard in store.read_table(name, columns=["hard_labels"]).column("hard_labels").to_pylist():
            solutions += 1
            steps += len(hard)
            labelled += sum(value is not None for value in hard)
            positive += sum(value is True for value in hard)
    return ImportSummary(
        output=store.location.display(),
        preset=plan.preset,
        label_source=LABEL_SOURCE[plan.preset],
        units_total=len(plan.units),
        units_run_now=units_run_now,
        solutions=solutions,
        steps=steps,
        steps_labelled=labelled,
        steps_positive=positive,
        rejected_rows=len(plan.rejected) + sum(unit.get("stats", {}).get("rejected", 0) for unit in store.committed_units()),
        seconds=seconds,
        files={name: store.location.display(name) for name in (LABELS_DIR, REJECTED_DIR)} | {"manifest": store.location.display("manifest.json")},
    )
