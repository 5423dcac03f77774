"""A judge job: plan the solutions of the input into work units and run JudgingTask on them with the
labeling job's machinery (labeler/labeling/job.py: run_units), so a judge resumes, locks its output,
commits, retries failed units and reports progress exactly as labeling does.

The input is a labels output of `labeler label` (its solutions keep their solution_id, so judgments and
labels join on it) or any input `labeler label` reads, through the same presets: a row's solution_id is
then the one a labeling job of the same input gives it. Rows need steps but no reference answer; a row
with a problem alone is rejected (there is nothing to judge).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from labeler.evaluation.solutions import is_labels_input, with_placeholder_answer
from labeler.ids import stable_id
from labeler.inputs.presets import PresetOptions, to_source_row
from labeler.inputs.readers import InputError, input_fingerprint, read_rows
from labeler.judging.config import JudgeConfig
from labeler.judging.unit import JudgingTask
from labeler.labeling.job import JobPlan, UnitExecutor, input_path, normalise_rows, run_units
from labeler.labeling.planning import PlannedRow, assign_row_keys, plan_units
from labeler.records import RowError, SourceRow
from labeler.store.reader import read_labelled_rows
from labeler.store.shard_store import JUDGE_SHARD_DIRS, JUDGMENTS_DIR, REJECTED_DIR, ShardStore

JOB_KIND = "judge"
LABELS_SOURCE = "labels"  # the `source` of solutions read from labels shards


@dataclass
class JudgeSummary:
    output: str
    units_total: int
    units_run_now: int
    solutions: int  # judged
    votes: int
    critiques: int  # drawn, resamples included
    critique_resamples: int
    found_no_error: int  # solutions the judge finds all correct (first_error -1)
    mean_agreement: float | None  # share of votes that name the verdict, on average
    rejected_rows: int
    generated_tokens: int
    seconds: float
    files: dict = field(default_factory=dict)


def plan_judging(config: JudgeConfig) -> JobPlan:
    """The solutions of the input cut into units of --shard-size; InputError for an input with no rows,
    or too many rejected."""
    if is_labels_input(config.input):
        return _plan_labels(config)
    raw = read_rows(input_path(config.input), config.limit, config.trust_remote_code)
    rows = normalise_rows(raw, config, read_row=solution_row)
    if not rows.rows_read:
        raise InputError(f"{config.input}: no rows")
    return JobPlan(rows.preset, rows.rows_read, rows.rejected, plan_units(assign_row_keys(rows.sources), config.shard_size))


def solution_row(preset: str, row_index: int, row: dict, options: PresetOptions) -> SourceRow:
    """A row read as `labeler label` reads it, without needing a reference answer; RowError without steps."""
    source = to_source_row(preset, row_index, with_placeholder_answer(preset, row, options), options)
    if source.steps is None:
        raise RowError("steps", "the row has a problem but no solution steps to judge")
    return source


def _plan_labels(config: JudgeConfig) -> JobPlan:
    """Labels rows keep their solution_id: it is the row key their solution's id comes from (labeler/labeling/planning.py)."""
    rows = read_labelled_rows(config.input)[: config.limit]
    if not rows:
        raise InputError(f"{config.input}: no solutions")
    planned = [
        PlannedRow(SourceRow(index, row.problem_id, row.problem, row.reference_answer, row.steps, LABELS_SOURCE), row.solution_id)
        for index, row in enumerate(rows)
    ]
    return JobPlan(LABELS_SOURCE, len(rows), [], plan_units(planned, config.shard_size))


def fingerprint(config: JudgeConfig, plan: JobPlan) -> str:
    """The input's content as the resume check knows it: a file's fingerprint; for labels, a hash of
    every solution read (their ids alone would not tell sampled solutions apart)."""
    if not is_labels_input(config.input):
        return input_fingerprint(input_path(config.input))
    content = [(row.row_key, row.source.problem, *row.source.steps) for unit in plan.units for row in unit.rows]
    return "labels:" + stable_id(json.dumps(content))


def run_judge(
    config: JudgeConfig,
    *,
    executor: UnitExecutor,
    model_info: dict,
    overwrite: bool = False,
    progress_enabled: bool = True,
    allow_engine_change: bool = False,
    rebuild_manifest: bool = False,
    retry_rejected: bool = False,
    lock_output: bool = True,
) -> JudgeSummary:
    """Judge every unit not yet committed in `config.output`; the flags mean what they mean to `run_job`."""
    started = time.monotonic()
    plan = plan_judging(config)  # reads only the input: a bad input touches no output
    return run_units(
        JudgingTask(config, config.config_hash()),
        plan,
        executor=executor,
        model_info=model_info,
        fingerprint=fingerprint(config, plan),
        summarise=lambda store, units_run_now: summarise(store, plan, config, units_run_now, time.monotonic() - started),
        store=ShardStore(config.output, JUDGE_SHARD_DIRS),
        job_kind=JOB_KIND,
        overwrite=overwrite,
        progress_enabled=progress_enabled,
        allow_engine_change=allow_engine_change,
        rebuild_manifest=rebuild_manifest,
        retry_rejected=retry_rejected,
        lock_output=lock_output,
    )


def summarise(store: ShardStore, plan: JobPlan, config: JudgeConfig, units_run_now: int, seconds: float) -> JudgeSummary:
    solutions, no_error, agreement = 0, 0, 0.0
    rejected, resamples = 0, 0
    for unit in store.committed_units():
        stats = unit.get("stats", {})
        rejected += stats.get("rejected", 0)
        resamples += stats.get("critique_resamples", 0)
        if JUDGMENTS_DIR not in unit["files"]:
            continue
        table = store.read_table(unit["files"][JUDGMENTS_DIR], columns=["first_error", "agreement"])
        solutions += table.num_rows
        no_error += sum(1 for value in table.column("first_error").to_pylist() if value == -1)
        agreement += sum(table.column("agreement").to_pylist())
    totals = store.manifest["totals"]
    return JudgeSummary(
        output=store.location.display(),
        units_total=totals["units"],
        units_run_now=units_run_now,
        solutions=solutions,
        votes=config.votes,
        critiques=totals["rollouts"],
        critique_resamples=resamples,
        found_no_error=no_error,
        mean_agreement=agreement / solutions if solutions else None,
        rejected_rows=len(plan.rejected) + rejected,
        generated_tokens=totals["generated_tokens"],
        seconds=seconds,
        files={name: store.location.display(name) for name in (JUDGMENTS_DIR, REJECTED_DIR)} | {"manifest": store.location.display("manifest.json")},
    )
