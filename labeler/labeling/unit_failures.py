"""What becomes of a work unit that failed: retried, bisected down to the rows that fail, or put back
in the queue when the machine under it failed, so the job goes on and only the failing rows are lost.

Both executors use it. A unit fails when labelling it raises (a row that breaks the engine or the
checker, a bug that one input triggers) or when the engine or worker under it dies.

- An error in the unit counts against --max-unit-retries. Past it the unit is bisected: its two
  halves go to the back of the queue and are labelled on their own; a half that fails (once) is split
  again, down to single rows, and a row that fails alone goes to rejected/ (stage "generation", the
  error as the reason). When its last piece is in, the unit is committed whole: the labels of the
  pieces that succeeded and the rejected rows, with its stats naming the failure, so that a later run
  with --retry-rejected labels it again (none failed: no failure, its stats say only that it was
  bisected). A unit the answer checker could not check (CheckerUnhealthyError)
  fails the same way, so that a row whose answers always time out is rejected alone. Whose fault that
  is, is decided per piece (labeler/labeling/checker_watch.py): a checker that times out on easy answers
  too right after is sick (CheckerSickError, a CheckerUnavailable), which stops the job (below) and
  writes off no row. (Outputs of earlier versions may hold units committed as the machine's failure,
  TRANSIENT_KEY, their rows in rejected/: a plain rerun still reopens and labels those: shard_store.py.)
  Sampling seeds come from each prompt's text, so the rows of a piece get the labels the whole unit
  would have given them, but under --strategy posterior, whose prior and sure problems come from the rows
  labelled together (a piece's, or on resume mid-bisection the whole unit's again: docs/concepts/strategies.md).
- A worker or node lost under a unit (a killed or preempted process, a node Ray declares dead:
  `lost`) is no fault of the unit's and spends none of its retries: the unit goes back to the front
  of the queue (to run alone on its worker from then on: `runs_alone`, so that the next loss is its own).
  So that a cluster that keeps losing workers cannot loop forever, a unit may be
  stranded LOSSES_PER_UNIT times. Past that, when some unit of this run was labelled, it is a row of
  this unit that kills its workers: the unit is bisected like a failing one (each piece may be lost
  LOSSES_PER_PIECE times, then counts as failed), so that row is rejected alone with the reason. When
  none was labelled, losses hit every unit: a sick cluster, and the job stops (WorkersKeepDyingError).

A checker that cannot check (CheckerUnavailable: its worker pool cannot start or fails its
self-test, or it is sick: CheckerSickError) is never a unit's failure: the executors let it stop the job at once (`stops_the_job`),
the unit it was checking left uncommitted, none of its rows in rejected/, so a plain rerun labels them.
Four more cases stop the job (exit 1, the cause in one line), committed units kept, nothing
written off: a run whose first BROKEN_SETUP_AFTER units fail with none labelled, and then the halves
of those units too (run first, before any other unit; a half that fails meanwhile is set aside, not
split, and tried again once some unit is labelled), is not meeting poison rows but a broken setup;
so is a run, of fewer units, that labels no row at all: a unit every row of which failed alone, or that wrote no
label without raising (every row rejected: a prompt over the model's context), while no unit of the run was labelled
(a unit counts as labelled only when it wrote a row outside rejected/: `rows_written`) is held back, not committed, and committed (its rows in rejected/) only once
some unit is labelled; a run that ends with none labelled stops with the commonest cause (`finish`: a job
that can label nothing does not finish green, and no row is written off for a setting the user can fix).
Not when an earlier run of the job committed units: its setup worked, the rows are at fault, and a resume,
which cannot change its input, could never finish;
an engine that keeps dying (killed for memory, most often), and workers lost under every unit, are
the machine's trouble, not the rows' fault.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, deque
from dataclasses import dataclass, field, replace

import pyarrow as pa

from labeler.checking.verdicts import CheckerUnavailable
from labeler.labeling.planning import WorkUnit
from labeler.labeling.tables import rejected_table
from labeler.labeling.unit import UnitResult
from labeler.records import RejectedRow
from labeler.store.progress import ProgressReporter
from labeler.store.shard_store import FAILURE_KEY, REJECTED_DIR

BROKEN_SETUP_AFTER = 3  # units given up in a row, with none labelled this run, that stop the job
BISECTED_KEY = "bisected"  # in the stats of a unit labelled in pieces: why it was given up as a whole
LOSSES_PER_UNIT = 5  # times a unit may go back to the queue because its worker or node was lost
LOSSES_PER_PIECE = 1  # the same, for a piece of a bisected unit: past it the piece counts as failed


class UnitsKeepFailingError(RuntimeError):
    """Every unit of this run failed, each past its retries: the engine, the checker or the code is broken."""


class EngineKeepsDyingError(UnitsKeepFailingError):
    """The engine died under the same unit more than --max-unit-retries times."""


class WorkersKeepDyingError(UnitsKeepFailingError):
    """The workers (or nodes) under the same unit were lost more than LOSSES_PER_UNIT times."""


@dataclass
class _Bisection:
    """A unit given up as a whole: its pieces still out, and what those that came back gave."""

    unit: WorkUnit
    reason: str  # why the whole unit was given up
    attempts: int
    out: int = 0  # pieces queued and not yet back
    results: list[tuple[int, UnitResult]] = field(default_factory=list)  # by the position of the piece's first row
    failed_rows: list[RejectedRow] = field(default_factory=list)
    strict_timeouts: bool = False  # given up because its checker timed out: its pieces are judged strictly


class UnitFailures:
    """The retries, bisections and losses of one run's units. Executors call `succeeded` with each
    result (maybe from another thread) and commit what it returns; `failed` and `lost` take the
    executor's queue, to put units back in it."""

    def __init__(self, max_retries: int, progress: ProgressReporter, where: str = ""):
        self.max_retries = max_retries
        self.progress = progress
        self.where = where  # "on Ray workers", or "" in this process
        self.attempts: Counter[tuple] = Counter()
        self.losses: Counter[tuple] = Counter()
        self.bisections: dict[str, _Bisection] = {}  # by unit_id
        self.labelled = 0
        self.given_up = 0
        # units an earlier run of the job committed: its setup worked, so rows that all fail now are the rows' fault
        # (and a resume cannot change its input: held back, they would keep the job from ever finishing)
        self.committed_before = getattr(progress, "units_done", 0)
        # once BROKEN_SETUP_AFTER units are given up with none labelled: the keys of their halves, run first to tell
        # poison rows from a broken setup, and the halves that failed meanwhile, set aside (not split: no row written off)
        self.probes: set[tuple] | None = None
        self.set_aside: list[WorkUnit] = []
        self.queue: deque | None = None
        # units every row of which failed alone while no unit of this run was labelled: committed by `finish` once one
        # is, else the run stops there; and why each row that failed alone failed
        self.held: list[UnitResult] = []
        self.causes: Counter[str] = Counter()
        self.lock = threading.RLock()  # lost() calls failed()

    def succeeded(self, unit: WorkUnit, result: UnitResult) -> UnitResult | None:
        """The result to commit for `unit`: its own; for a piece of a bisected unit, the whole unit's once
        its last piece is in, else None."""
        with self.lock:
            wrote = rows_written(result)
            if wrote:  # a unit counts as labelled only where it wrote a row: one whose rows were all rejected did not
                self.labelled += 1
            if self.set_aside and wrote:  # some unit is labelled, so the setup works: the halves set aside go on
                assert self.queue is not None
                self.queue.extend(self.set_aside)
                self.set_aside = []
            bisection = self.bisections.get(unit.unit_id)
            if bisection is None:
                if not wrote and not (self.labelled or self.committed_before):  # every row rejected, none labelled yet
                    self.causes.update(rejection_reasons(result))
                    self.held.append(result)
                    return None
                return result
            first = next(i for i, row in enumerate(bisection.unit.rows) if row.row_key == unit.rows[0].row_key)
            bisection.results.append((first, result))
            return self._piece_back(bisection)

    def failed(
        self, unit: WorkUnit, reason: str, queue: deque, engine_died: bool = False, unhealthy: bool = False, retry: bool = True
    ) -> UnitResult | None:
        """Count a failure of `unit` (a planned unit or a piece of one): queue it again, or its halves,
        or, for a single row given up, return the unit's result to commit once its last piece is in.
        `unhealthy`: the checker could not check its answers, though it checked easy ones (CheckerUnhealthyError).
        UnitsKeepFailingError when no unit of this run has been labelled yet and BROKEN_SETUP_AFTER
        have been given up; EngineKeepsDyingError past the retry limit when the engine died."""
        with self.lock:
            self.queue = queue
            key = _key(unit)
            bisection = self.bisections.get(unit.unit_id)
            if self.probes and key in self.probes and self.labelled == 0 and not engine_died:
                self._probe_failed(unit, key, reason)
                return None
            self.attempts[key] += 1
            attempts = self.attempts[key]
            # a planned unit is retried (the failure may be passing); a piece of one is split at its first failure
            retries = (self.max_retries if bisection is None or engine_died else 0) if retry else 0
            name = _name(unit, bisection)
            if attempts <= retries:
                self.progress.warn(f"{name} failed ({reason}); retrying ({attempts}/{self.max_retries})")
                queue.appendleft(unit)
                return None
            if engine_died:
                raise EngineKeepsDyingError(
                    f"the engine died {attempts} times on unit {unit.index}, the last time with: {reason}; out of memory? "
                    "committed units are kept: rerun to resume (a smaller --shard-size needs a new --output: a resume "
                    "refuses another shard size)"
                )
            if bisection is None:
                self.given_up += 1
                where = f" {self.where}" if self.where else ""
                bisection = self.bisections[unit.unit_id] = _Bisection(
                    unit, f"failed {attempts} times{where}: {reason}", attempts, out=1, strict_timeouts=unhealthy
                )
            if len(unit.rows) > 1:
                middle = len(unit.rows) // 2
                # strict only where the timeouts were the failure: a piece of a unit split for another error keeps
                # MIN_TIMEOUTS, so that one slow answer among a few rows does not fail (and reject) them
                strict = bisection.strict_timeouts
                pieces = (
                    replace(unit, rows=unit.rows[:middle], strict_timeouts=strict),
                    replace(unit, rows=unit.rows[middle:], strict_timeouts=strict),
                )
                halves = f"its {len(unit.rows)} rows are labelled in two halves to find those that fail"
                self.progress.warn(f"{name} failed ({reason}); {halves}")
                queue.extend(pieces)  # at the back: other units go first, so a broken setup is told by them
                bisection.out += 1  # one piece out replaced by two
                if self.probes is None and self.labelled == 0 and self.given_up >= BROKEN_SETUP_AFTER:
                    self._probe_halves(queue)
                return None
            row = unit.rows[0].source
            self.causes[reason] += 1
            held = not (self.labelled or self.committed_before)
            where = "it goes to rejected/ once some row of this run is labelled" if held else "it goes to rejected/"
            self.progress.warn(f"row {row.row_index} ({row.problem_id}) of unit {unit.index} failed alone ({reason}): {where}")
            raw = json.dumps({"problem": row.problem, "steps": list(row.steps) if row.steps is not None else None})[:2000]
            bisection.failed_rows.append(
                RejectedRow(row.row_index, "unit", f"failed alone after its unit {bisection.reason}; alone: {reason}", row.problem_id, raw)
            )
            return self._piece_back(bisection)

    def lost(self, unit: WorkUnit, reason: str, queue: deque) -> UnitResult | None:
        """The worker or node under `unit` was lost: the unit goes back to the front of the queue, its
        retries untouched. Past LOSSES_PER_UNIT losses of the same unit (LOSSES_PER_PIECE of a piece) it
        counts as failed, as `failed` says (what to commit, or None), when some unit of this run was
        labelled; else WorkersKeepDyingError."""
        with self.lock:
            key = _key(unit)
            self.losses[key] += 1
            losses = self.losses[key]
            bisection = self.bisections.get(unit.unit_id)
            allowed = LOSSES_PER_UNIT if bisection is None else LOSSES_PER_PIECE
            if losses > allowed:
                if self.labelled == 0:
                    raise WorkersKeepDyingError(
                        f"the worker under unit {unit.index} was lost {losses} times, the last with: {reason}, and no unit of "
                        "this run was labelled: the cluster is losing its workers (out of memory? preempted?); committed "
                        "units are kept: rerun to resume"
                    )
                return self.failed(unit, f"its worker was lost {losses} times, the last with: {reason}", queue, retry=False)
            self.progress.warn(
                f"{_name(unit, bisection)} goes back to the queue: {reason} (loss {losses} of "
                f"{allowed} allowed; a lost worker is not counted against --max-unit-retries)"
            )
            queue.appendleft(unit)
            return None

    def runs_alone(self, unit: WorkUnit) -> bool:
        """Whether `unit` was lost before: an executor that runs several units on a worker runs it alone, so
        that a worker it kills again is its loss, not that of the unit beside it."""
        with self.lock:
            return self.losses[_key(unit)] > 0

    def _probe_halves(self, queue: deque) -> None:
        """BROKEN_SETUP_AFTER units given up, none labelled: their halves go to the front of the queue, to tell
        poison rows (some half is labelled) from a broken setup (every half fails too)."""
        halves = [unit for unit in queue if unit.unit_id in self.bisections]
        for unit in halves:
            queue.remove(unit)
        queue.extendleft(reversed(halves))
        self.probes = {_key(unit) for unit in halves}
        self.progress.warn(f"the first {self.given_up} units of this run failed and none was labelled: their halves are tried first")

    def _probe_failed(self, unit: WorkUnit, key: tuple, reason: str) -> None:
        """A half tried to tell a broken setup failed, none labelled yet: set aside; UnitsKeepFailingError when it was the last."""
        assert self.probes is not None
        self.probes.discard(key)
        self.set_aside.append(unit)
        if not self.probes:
            raise UnitsKeepFailingError(
                f"the first {self.given_up} units of this run all failed, and so did their halves, the last with: {reason}; "
                "no unit was labelled, so this is not a few bad rows: fix the cause and rerun (committed units are kept)"
            )

    def _piece_back(self, bisection: _Bisection) -> UnitResult | None:
        bisection.out -= 1
        if bisection.out:
            return None
        del self.bisections[bisection.unit.unit_id]
        result = bisected_unit_result(bisection)
        wrote = any(rows_written(piece) for _, piece in bisection.results)
        if not wrote and self.labelled == 0 and not self.committed_before:  # every row failed or was rejected, none labelled
            for _, piece in bisection.results:
                self.causes.update(rejection_reasons(piece))
            self.held.append(result)
            return None
        return result

    def finish(self) -> list[UnitResult]:
        """At the end of the run, once the queue is empty: the units held back (every row of theirs failed alone, or
        was rejected without an error, e.g. a prompt over the model's context, while none was labelled), to commit now
        that some unit of the run was labelled. UnitsKeepFailingError when none was: this run labelled no row, and
        writing them all off to rejected/ would make a job that labels nothing finish green (a setting the engine
        refuses, a too-small --max-model-len, a broken install); nothing is written off."""
        with self.lock:
            held, self.held = self.held, []
            if not held or self.labelled:
                return held
            rows = sum(self.causes.values())
            if not rows:
                why = "its units wrote no labels and rejected no row (no reason recorded)"
            elif len(self.causes) == 1:
                cause = next(iter(self.causes))
                why = f"all {rows} rows failed or were rejected, with the same reason: {cause}"
            else:
                (cause, count), *others = self.causes.most_common()
                also = "; ".join(f"{reason} ({n} row{'s' if n > 1 else ''})" for reason, n in others[:2])
                more = f"; and {len(others) - 2} other reasons" if len(others) > 2 else ""
                why = f"all {rows} rows failed or were rejected; commonest reason ({count} rows): {cause}; also {also}{more}"
            raise UnitsKeepFailingError(
                f"no row of this run was labelled: {why}; no row was written off to rejected/: fix the cause and rerun "
                "(committed units are kept)"
            )


def rows_written(result: UnitResult) -> int:
    """The rows a unit's result writes outside rejected/ (its labels, or a judge's judgments)."""
    return sum(table.num_rows for directory, table in result.tables.items() if directory != REJECTED_DIR)


def rejection_reasons(result: UnitResult) -> Counter[str]:
    """Why the rows in a unit's rejected/ table were rejected, counted once per input row (its first reason)."""
    table = result.tables.get(REJECTED_DIR)
    if table is None or not table.num_rows:
        return Counter()
    reasons: dict[int, str] = {}
    for row_index, reason in zip(table.column("row_index").to_pylist(), table.column("reason").to_pylist()):
        reasons.setdefault(row_index, reason)
    return Counter(reasons.values())


def bisected_unit_result(bisection: _Bisection) -> UnitResult:
    """The unit whose pieces are all back: their tables joined (in the unit's row order), its failed rows
    in rejected/, the pieces' stats summed, and the failure named so that --retry-rejected redoes it;
    where no row failed, no failure: only BISECTED_KEY says why it was split."""
    unit = bisection.unit
    results = [result for _, result in sorted(bisection.results, key=lambda pair: pair[0])]
    parts: dict[str, list[pa.Table]] = {}
    for result in results:
        for directory, table in result.tables.items():
            parts.setdefault(directory, []).append(table)
    if bisection.failed_rows:
        parts.setdefault(REJECTED_DIR, []).append(rejected_table(bisection.failed_rows, stage="generation"))
    stats: dict = {"solutions": 0, "steps": 0, "rollouts": 0, "generated_tokens": 0, "rejected": 0, "seconds": 0.0}
    for result in results:
        for key, value in result.stats.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                stats[key] = stats.get(key, 0) + value
    stats["seconds"] = round(stats["seconds"], 3)
    stats["rejected"] += len(bisection.failed_rows)
    stats["attempts"] = bisection.attempts
    failed = len(bisection.failed_rows)
    stats[BISECTED_KEY] = f"the unit {bisection.reason}; its {len(unit.rows)} rows were labelled in pieces"
    if not failed:  # a passing failure: every row is labelled, nothing for --retry-rejected to redo
        stats[BISECTED_KEY] += ", and none failed"
    else:
        stats[FAILURE_KEY] = f"{failed} of its {len(unit.rows)} rows failed alone and are in rejected/; the unit {bisection.reason}"
    engine = next((result.engine for result in results if result.engine is not None), None)
    tables = {directory: pa.concat_tables(tables) for directory, tables in parts.items()}
    return UnitResult(unit.unit_id, unit.shard_name, tables, stats, engine)


def _key(unit: WorkUnit) -> tuple:
    """A piece is a run of its unit's rows: its unit, first row and length name it."""
    return unit.unit_id, unit.rows[0].row_key, len(unit.rows)


def _name(unit: WorkUnit, bisection: _Bisection | None) -> str:
    if bisection is None:
        return f"unit {unit.index}"
    first, last = unit.rows[0].source.row_index, unit.rows[-1].source.row_index
    return f"a piece of unit {unit.index} (input rows {first}-{last}, {len(unit.rows)} rows)"


def stops_the_job(error: BaseException) -> bool:
    """An error of the machine under every unit, not of the unit that met it: retrying, bisecting or rejecting
    its rows would write them off for nothing (the answer checker cannot check: CheckerUnavailable)."""
    return isinstance(error, CheckerUnavailable)


def describe_error(error: BaseException) -> str:
    """One line: the exception's type and its message's first line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0]}"[:300] if lines else type(error).__name__
