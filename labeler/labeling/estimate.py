"""What a labeling job would do, from its plan and what --output already holds (`labeler label --dry-run`): rows,
solutions, steps per solution, the units a rerun would skip, and the rollouts and tokens it would spend at most,
before any model loads; nothing is written.

The bounds are exhaustive's (labeler/labeling/job.py exhaustive_plan): N rollouts from every step prefix, a
last step that states an answer checked by it (--final-step check: nothing generated) or by N rollouts; first-error and
adaptive sample fewer. Each rollout may spend its whole --max-new-tokens. The steps of solutions still
to be sampled (rows that carry only a problem) are not known before they are sampled: their sampling is
counted, their rollouts are not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field

from labeler.inputs.readers import input_fingerprint
from labeler.labeling.config import FINAL_ANSWER, LabelConfig
from labeler.labeling.job import ExhaustivePlan, JobPlan, exhaustive_plan, input_path, one_step_warning
from labeler.labeling.planning import plan_hash
from labeler.store.location import OutputLocation
from labeler.store.manifest import MANIFEST_NAME, check_same_job, check_same_kind, check_same_schema, load_manifest
from labeler.store.shard_store import reopened_by_a_rerun
from schemas.manifest import UNIT_COMMITTED

HISTOGRAM_TOP = 10  # steps per solution from this many on share one bar


@dataclass
class JobEstimate:
    rows_read: int
    rows_rejected: int
    given_solutions: int
    solutions_to_sample: int
    steps: int  # of the given solutions
    steps_per_solution: dict[int, int] = field(default_factory=dict)  # steps -> given solutions with that many
    units_total: int = 0
    units_committed: int = 0  # in --output already: a rerun skips them, and the counts below leave them out
    max_rollouts: int = 0  # of the given solutions, as the job counts them: sampled ones and final checks
    final_checks: int = 0  # of max_rollouts, last steps labelled by checking their stated answer (nothing generated)
    max_rollout_tokens: int = 0
    max_sampling_tokens: int = 0  # of the solutions to sample
    warnings: list[str] = field(default_factory=list)


def estimate(plan: JobPlan, config: LabelConfig, committed: Collection[str] = ()) -> JobEstimate:
    """`committed`: the ids of the units --output holds committed (committed_in_output): a rerun skips them, so
    their sampling and rollouts are not counted; the rows, solutions and steps are the whole input's."""
    rows = [row for unit in plan.units for row in unit.rows]
    pending = [row for unit in plan.units if unit.unit_id not in committed for row in unit.rows]
    given = [row.source for row in rows if not row.needs_solutions]
    to_sample = sum(row.needs_solutions for row in pending) * config.solutions_per_problem
    exhaustive = ExhaustivePlan(0, 0) if config.strategy == FINAL_ANSWER else exhaustive_plan(pending, config)
    histogram = Counter(len(source.steps) for source in given)
    warnings = [warning] if (warning := one_step_warning(rows, config)) else []
    return JobEstimate(
        rows_read=plan.rows_read,
        rows_rejected=len(plan.rejected),
        given_solutions=len(given),
        solutions_to_sample=to_sample,
        steps=sum(steps * count for steps, count in histogram.items()),
        steps_per_solution=dict(sorted(histogram.items())),
        units_total=len(plan.units),
        units_committed=sum(unit.unit_id in committed for unit in plan.units),
        max_rollouts=exhaustive.counted,
        final_checks=exhaustive.final_checks,
        max_rollout_tokens=exhaustive.sampled * config.max_new_tokens,
        max_sampling_tokens=to_sample * config.solution_max_new_tokens,
        warnings=warnings,
    )


def committed_in_output(plan: JobPlan, config: LabelConfig, retry_rejected: bool = False) -> tuple[set[str], list[str]]:
    """What a rerun would find in --output, read without taking its lock or writing: the ids of the units it would
    skip (committed; not those failed by their machine, which every rerun redoes, nor with `retry_rejected` those
    failed by their rows), and its notices. ConfigMismatchError, as the real run gives it, for an output of another
    job, schema, config, input or plan; CorruptManifestError for a manifest that cannot be read."""
    location = OutputLocation(config.output)
    manifest = load_manifest(location) if location.exists(MANIFEST_NAME) else None
    if manifest is None:
        return set(), []
    check_same_kind(manifest, None, config.output)
    notices = check_same_schema(manifest, config.output)
    fingerprint = input_fingerprint(input_path(config.input))
    check_same_job(manifest, config.output_settings(), config.config_hash(), plan_hash(plan.units), fingerprint, config.output)
    committed = [unit for unit in manifest["units"] if unit["state"] == UNIT_COMMITTED]
    return {unit["unit_id"] for unit in committed if not reopened_by_a_rerun(unit.get("stats", {}), not retry_rejected)}, notices


def format_estimate(estimate: JobEstimate) -> str:
    lines = [
        f"rows               : {estimate.rows_read} read, {estimate.rows_rejected} rejected",
        f"solutions          : {estimate.given_solutions} given, {estimate.solutions_to_sample} to sample",
        f"steps              : {estimate.steps} (of the given solutions)",
        f"units              : {estimate.units_total}, {estimate.units_committed} committed in --output (a rerun skips them), "
        f"{estimate.units_total - estimate.units_committed} to run",
        "steps per solution :",
    ]
    bars = Counter()
    for steps, count in estimate.steps_per_solution.items():
        bars[min(steps, HISTOGRAM_TOP)] += count
    widest = max(bars.values(), default=0)
    for steps, count in sorted(bars.items()):
        label = f"{steps}+" if steps == HISTOGRAM_TOP else str(steps)
        lines.append(f"  {label:>3} : {count:>6} {'#' * max(1, round(40 * count / widest))}")
    lines += [
        f"rollouts           : at most {estimate.max_rollouts} (of the given solutions of the units to run; exhaustive's count: "
        f"{estimate.max_rollouts - estimate.final_checks} sampled, {estimate.final_checks} final answers checked)",
        f"tokens             : at most {estimate.max_rollout_tokens} for rollouts, {estimate.max_sampling_tokens} to sample solutions"
        + (" (and the sampled solutions' rollouts)" if estimate.solutions_to_sample else ""),
    ]
    return "\n".join(lines)
