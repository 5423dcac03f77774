"""Labelling one work unit, in two halves an executor can overlap or place on different machines:

- `generate_unit`: the engine's work (sample solutions for problem-only rows, then rollouts);
- `finish_unit`: check, count, label and build the unit's tables (no I/O: the executor commits).

`LabelingTask` is the two as the task that executors run (labeler/labeling/job.py: UnitTask).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import pyarrow as pa

from labeler.labeling.checker_watch import MIN_TIMEOUTS, TimeoutWatch, unhealthy_error
from labeler.labeling.config import LabelConfig
from labeler.labeling.generation import Generator
from labeler.labeling import strategies
from labeler.labeling.rollouts import Checker
from labeler.labeling.planning import WorkUnit
from labeler.records import RejectedRow
from labeler.store.manifest import UNDETERMINED_KEY
from labeler.store.shard_store import LABELS_DIR, REJECTED_DIR, ROLLOUTS_DIR
from labeler.labeling.solution_sampling import sample_solutions
from labeler.labeling.tables import Provenance, labels_table, rejected_table, rollouts_table


@dataclass
class GeneratedUnit:
    unit: WorkUnit
    pending: strategies.PendingLabels
    rejected: list[RejectedRow]
    rejected_tokens: int  # spent on sampled solutions that were rejected
    started: float
    watch: TimeoutWatch


@dataclass
class UnitResult:
    """Everything a unit commits: its tables by output folder, and its stats for the manifest."""

    unit_id: str
    shard_name: str
    tables: dict[str, pa.Table]
    stats: dict
    engine: dict | None = None  # the engine record of what labelled it (labeling/engine_record.py); None: no engine ran


@dataclass(frozen=True)
class LabelingTask:
    """Labeling as a unit task (labeler/labeling/job.py: UnitTask): rollouts from every step prefix."""

    config: LabelConfig
    config_hash: str
    samples_name = "rollouts"

    def planned_solutions(self, unit: WorkUnit) -> int:
        """The solutions a unit is to label: its given ones, and M sampled for each problem-only row."""
        return sum(self.config.solutions_per_problem if row.needs_solutions else 1 for row in unit.rows)

    def generate(self, unit: WorkUnit, generator: Generator, checker: Checker | None) -> GeneratedUnit:
        return generate_unit(unit, self.config, generator, checker)

    def finish(self, generated: GeneratedUnit, checker: Checker | None, engine: dict | None) -> UnitResult:
        assert checker is not None, "labeling checks answers: its executor needs an answer checker"
        return finish_unit(generated, self.config, checker, self.config_hash, engine)


def strategy_settings(config: LabelConfig) -> strategies.StrategySettings:
    return config.strategy_settings


def generate_unit(unit: WorkUnit, config: LabelConfig, generator: Generator, checker: Checker | None = None) -> GeneratedUnit:
    """Round-based strategies check between rounds and need the checker here; exhaustive does not."""
    started = time.monotonic()
    given = [row.given_solution() for row in unit.rows if not row.needs_solutions]
    problem_only = [row for row in unit.rows if row.needs_solutions]
    sampled, rejected, rejected_tokens = sample_solutions(
        problem_only,
        generator,
        per_problem=config.solutions_per_problem,
        sampling=config.solution_sampling,
        seed=config.seed,
        split_rule=config.split_rule,
        max_steps=config.max_steps,
    )
    watch = TimeoutWatch()
    watched = None if checker is None else watch.wrap(checker)
    pending = strategies.start(config.strategy, given + sampled, generator, watched, strategy_settings(config))
    return GeneratedUnit(unit, pending, rejected, rejected_tokens, started, watch)


def finish_unit(
    generated: GeneratedUnit, config: LabelConfig, checker: Checker, config_hash: str, engine: dict | None = None
) -> UnitResult:
    unit, rejected = generated.unit, list(generated.rejected)
    outcome = generated.pending.finish(generated.watch.wrap(checker))
    rejected_tokens = generated.rejected_tokens + outcome.failed_tokens
    # no labels from a checker that could not check: the unit fails, to be retried, then bisected (a piece of
    # a unit bisected for that is judged on its share alone, so that one row whose answers always time out is found)
    unhealthy = generated.watch.verdict(config.max_timeout_share, 1 if unit.strict_timeouts else MIN_TIMEOUTS)
    if unhealthy is not None:
        raise unhealthy_error(unhealthy, checker)  # CheckerSickError when the checker, not the rows, is at fault
    for solution, reason in outcome.failed:
        steps_json = json.dumps(list(solution.steps))[:2000]
        rejected.append(
            RejectedRow(solution.row_index, "steps", f"solution {solution.solution_id}: {reason}", solution.problem_id, steps_json)
        )
    provenance = Provenance(unit.unit_id, config.model, config.strategy, config.seed, config_hash)
    tables = {LABELS_DIR: labels_table(outcome.labelled, provenance)}
    if config.write_rollouts:
        problem_ids = {item.solution.solution_id: item.solution.problem_id for item in outcome.labelled}
        tables[ROLLOUTS_DIR] = rollouts_table(outcome.rollouts, problem_ids)
    if rejected:
        tables[REJECTED_DIR] = rejected_table(rejected, stage="generation")
    stats = {
        "solutions": len(outcome.labelled),
        "steps": sum(len(item.steps) for item in outcome.labelled),
        "rollouts": sum(step.n_sampled for item in outcome.labelled for step in item.steps),  # cut ones too
        "truncated_rollouts": sum(step.n_truncated for item in outcome.labelled for step in item.steps),
        # solutions whose first error the labels leave undetermined (null first_error: an unlabelled step first)
        UNDETERMINED_KEY: tables[LABELS_DIR].column("first_error").null_count,
        # rollouts (and final checks) left out of the labels because their check timed out (checker_timeouts
        # counts every timed-out check, those of the trajectory labels and of rejected solutions too)
        "timed_out_rollouts": sum(step.n_timeouts for item in outcome.labelled for step in item.steps),
        # every token generated: the labels rows' generated_tokens plus rejected_tokens
        "generated_tokens": sum(item.generated_tokens for item in outcome.labelled) + rejected_tokens,
        "rejected_tokens": rejected_tokens,
        "rejected": len(rejected),
        "prefix_probes": outcome.probes,
        "prefix_requests": outcome.requests,  # fewer than probes when identical prefixes were shared
        "steps_written_through": outcome.written_through,  # label_method "retraced": rollouts of a shorter prefix wrote them
        # posterior: whether some round fitted a prior (without one no probe stops early as negative); others: absent
        **({"prior_fitted": outcome.prior_fitted} if outcome.prior_fitted is not None else {}),
        # prompt tokens vLLM looked up in its prefix cache for the rollouts, and found there (None: not reported)
        "prefix_cache_queries": outcome.prefix_cache[0] if outcome.prefix_cache else None,
        "prefix_cache_hits": outcome.prefix_cache[1] if outcome.prefix_cache else None,
        "checker_timeouts": generated.watch.timeouts,
        "checker_retries": generated.watch.retried,
        "seconds": round(time.monotonic() - generated.started, 3),
    }
    return UnitResult(unit.unit_id, unit.shard_name, tables, stats, engine)
