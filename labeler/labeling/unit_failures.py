"""What becomes of a work unit that failed: retried, or committed with its rows in rejected/ so the job goes on.

Both executors use it. A unit fails when labelling it raises (a row that breaks the engine or the
checker, a bug that one input triggers) or when the engine or worker under it dies. Each failure
counts against --max-unit-retries; past it the unit is committed with every row in rejected/ (stage
"generation", the last error as the reason) and its stats name the failure, so that a later run
with --retry-rejected labels it again. Two cases stop the job instead (exit 1, the cause in one line):
a run whose every unit fails is not meeting a poison unit but a broken setup; and an engine that
keeps dying (killed for memory, most often) is the machine's trouble, not the rows' fault, so its
unit is not written off as rejected.
"""

from __future__ import annotations

import json
from collections import Counter

from labeler.labeling.planning import WorkUnit
from labeler.labeling.tables import rejected_table
from labeler.labeling.unit import UnitResult
from labeler.records import RejectedRow
from labeler.store.progress import ProgressReporter
from labeler.store.shard_store import FAILURE_KEY, REJECTED_DIR
BROKEN_SETUP_AFTER = 3  # units given up in a row, with none labelled this run, that stop the job


class UnitsKeepFailingError(RuntimeError):
    """Every unit of this run failed, each past its retries: the engine, the checker or the code is broken."""


class EngineKeepsDyingError(UnitsKeepFailingError):
    """The engine died under the same unit more than --max-unit-retries times."""


class UnitFailures:
    def __init__(self, max_retries: int, progress: ProgressReporter, where: str = ""):
        self.max_retries = max_retries
        self.progress = progress
        self.where = where  # "on Ray workers", or "" in this process
        self.attempts: Counter[str] = Counter()
        self.labelled = 0
        self.given_up = 0

    def succeeded(self) -> None:
        self.labelled += 1

    def failed(self, unit: WorkUnit, reason: str, engine_died: bool = False) -> UnitResult | None:
        """Count a failure of `unit`: None to retry it, or, past the retry limit, the result to commit
        (its rows as rejected). UnitsKeepFailingError when no unit of this run has been labelled yet
        and BROKEN_SETUP_AFTER have been given up; EngineKeepsDyingError past the limit when the
        engine died."""
        self.attempts[unit.unit_id] += 1
        attempts = self.attempts[unit.unit_id]
        if attempts <= self.max_retries:
            self.progress.warn(f"unit {unit.index} failed ({reason}); retrying ({attempts}/{self.max_retries})")
            return None
        if engine_died:
            raise EngineKeepsDyingError(
                f"the engine died {attempts} times on unit {unit.index}, the last time with: {reason}; out of memory? "
                "committed units are kept: rerun to resume (maybe with a smaller --shard-size or --max-model-len)"
            )
        self.given_up += 1
        if self.labelled == 0 and self.given_up >= BROKEN_SETUP_AFTER:
            raise UnitsKeepFailingError(
                f"the first {self.given_up} units of this run all failed {attempts} times, the last with: {reason}; "
                "no unit was labelled, so this is not one bad unit: fix the cause and rerun (committed units are kept)"
            )
        self.progress.warn(f"unit {unit.index} failed {attempts} times; its {len(unit.rows)} rows go to rejected/ (--retry-rejected retries them)")
        return failed_unit_result(unit, f"failed {attempts} times{' ' + self.where if self.where else ''}: {reason}", attempts)


def failed_unit_result(unit: WorkUnit, reason: str, attempts: int) -> UnitResult:
    """A unit that kept failing, committed as its rows in rejected/ so the job can finish."""
    rejected = []
    for row in unit.rows:
        source = row.source
        raw = json.dumps({"problem": source.problem, "steps": list(source.steps) if source.steps is not None else None})[:2000]
        rejected.append(RejectedRow(source.row_index, "unit", reason, source.problem_id, raw))
    stats = {
        "solutions": 0,
        "steps": 0,
        "rollouts": 0,
        "generated_tokens": 0,
        "rejected": len(rejected),
        "seconds": 0.0,
        "attempts": attempts,
        FAILURE_KEY: reason,
    }
    return UnitResult(unit.unit_id, unit.shard_name, {REJECTED_DIR: rejected_table(rejected, stage="generation")}, stats)


def describe_error(error: BaseException) -> str:
    """One line: the exception's type and its message's first line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0]}"[:300] if lines else type(error).__name__
