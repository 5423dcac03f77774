"""What a labeling job would do, from its plan alone (`labeler label --dry-run`): rows, solutions, steps per
solution, and the rollouts and tokens it would spend at most, before any model loads.

The bounds are exhaustive's (labeler/labeling/job.py exhaustive_rollouts): N rollouts from every step prefix, a
last step that states an answer checked by it (--final-step check: nothing generated) or by N rollouts; first-error and
adaptive sample fewer. Each rollout may spend its whole --max-new-tokens. The steps of solutions still
to be sampled (rows that carry only a problem) are not known before they are sampled: their sampling is
counted, their rollouts are not.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from labeler.labeling.config import LabelConfig
from labeler.labeling.job import ExhaustivePlan, JobPlan, exhaustive_plan, one_step_warning

HISTOGRAM_TOP = 10  # steps per solution from this many on share one bar


@dataclass
class JobEstimate:
    rows_read: int
    rows_rejected: int
    given_solutions: int
    solutions_to_sample: int
    steps: int  # of the given solutions
    steps_per_solution: dict[int, int] = field(default_factory=dict)  # steps -> given solutions with that many
    max_rollouts: int = 0  # of the given solutions, as the job counts them: sampled ones and final checks
    final_checks: int = 0  # of max_rollouts, last steps labelled by checking their stated answer (nothing generated)
    max_rollout_tokens: int = 0
    max_sampling_tokens: int = 0  # of the solutions to sample
    warnings: list[str] = field(default_factory=list)


def estimate(plan: JobPlan, config: LabelConfig) -> JobEstimate:
    rows = [row for unit in plan.units for row in unit.rows]
    given = [row.source for row in rows if not row.needs_solutions]
    to_sample = (len(rows) - len(given)) * config.solutions_per_problem
    exhaustive = ExhaustivePlan(0, 0) if config.strategy == "final-answer" else exhaustive_plan(rows, config)
    histogram = Counter(len(source.steps) for source in given)
    warnings = [warning] if (warning := one_step_warning(rows, config)) else []
    return JobEstimate(
        rows_read=plan.rows_read,
        rows_rejected=len(plan.rejected),
        given_solutions=len(given),
        solutions_to_sample=to_sample,
        steps=sum(steps * count for steps, count in histogram.items()),
        steps_per_solution=dict(sorted(histogram.items())),
        max_rollouts=exhaustive.counted,
        final_checks=exhaustive.final_checks,
        max_rollout_tokens=exhaustive.sampled * config.max_new_tokens,
        max_sampling_tokens=to_sample * config.solution_max_new_tokens,
        warnings=warnings,
    )


def format_estimate(estimate: JobEstimate) -> str:
    lines = [
        f"rows               : {estimate.rows_read} read, {estimate.rows_rejected} rejected",
        f"solutions          : {estimate.given_solutions} given, {estimate.solutions_to_sample} to sample",
        f"steps              : {estimate.steps} (of the given solutions)",
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
        f"rollouts           : at most {estimate.max_rollouts} (of the given solutions; exhaustive's count: "
        f"{estimate.max_rollouts - estimate.final_checks} sampled, {estimate.final_checks} final answers checked)",
        f"tokens             : at most {estimate.max_rollout_tokens} for rollouts, {estimate.max_sampling_tokens} to sample solutions"
        + (" (and the sampled solutions' rollouts)" if estimate.solutions_to_sample else ""),
    ]
    return "\n".join(lines)
