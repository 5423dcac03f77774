"""Units run in this process: one vLLM engine, and the finishing of unit i overlapping the generation of unit i+1.

The peer of workers/ray_executor.py: both take pending units and a task (labeling, judging:
labeler/labeling/job.py, UnitTask) and hand each unit's result to the job's `commit` as soon as it is
ready. Generation runs on this thread; finishing (for labeling the answer checks, pure Python with
symbolic work in the checker's process pool) and the commit run on a second one, so the engine does
not wait on the checker and a finished unit is committed while the next one generates.

A unit that fails (an error while labelling it) is retried and, past --max-unit-retries, bisected
down to the rows that fail, which go to rejected/ (labeler/labeling/unit_failures.py). An engine that
dies is replaced by a new one before the retry. Errors of the commit itself (storage, a refused
engine) and an answer checker that cannot check (CheckerUnavailable, or sick: CheckerSickError) stop the job, the unit that met
them uncommitted: they are the machine's, not the unit's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from labeler.labeling.checker_watch import CheckerUnhealthyError
from labeler.labeling.checker_start import start_checker
from labeler.labeling.engine_record import engine_record
from labeler.labeling.generation import EngineDiedError, Generator
from labeler.labeling.job import UnitTask
from labeler.labeling.planning import WorkUnit
from labeler.labeling.rollouts import Checker
from labeler.labeling.unit import UnitResult
from labeler.labeling.unit_failures import UnitFailures, describe_error, stops_the_job
from labeler.store.progress import CountedGenerator, ProgressReporter


class LocalExecutor:
    def __init__(
        self, generator_factory: Callable[[], Generator], checker: Checker | None, model_name: str = "", max_unit_retries: int = 2
    ):
        """checker: the answer checker the task needs (None for a task that checks no answers, a judge)."""
        self.generator_factory = generator_factory
        self.checker = checker
        self.model_name = model_name
        self.max_unit_retries = max_unit_retries

    def run(
        self,
        units: Sequence[WorkUnit],
        task: UnitTask,
        progress: ProgressReporter,
        commit: Callable[[UnitResult], object],
        check_engine: Callable[[dict], object] | None = None,
    ) -> None:
        """Run `task` on `units`, calling `commit` with each result as it is ready (a bisected unit's once its last piece is in)."""
        check_engine = check_engine or (lambda record: None)
        generator, engine = self._start_engine(task, check_engine, progress)
        progress.start_clock()
        failures = UnitFailures(self.max_unit_retries, progress)
        queue = deque(units)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="finisher") as finisher:
            in_flight: Future | None = None  # the unit being checked and committed
            while queue or in_flight is not None:
                if not queue:  # the last unit: settling it may queue it again
                    self._settle(in_flight, failures, queue, commit)
                    in_flight = None
                    continue
                unit = queue.popleft()
                try:
                    generated = task.generate(unit, CountedGenerator(generator, progress), self.checker)
                except Exception as error:  # not a KeyboardInterrupt or a kill: those stop the job
                    self._settle(in_flight, failures, queue, commit)
                    in_flight = None
                    if stops_the_job(error):
                        raise
                    if isinstance(error, EngineDiedError):
                        progress.warn(f"the engine died during unit {unit.index} ({error}); starting a new one")
                        _close_quietly(generator)
                        generator, engine = self._start_engine(task, check_engine, progress)
                    self._unit_failed(unit, error, failures, queue, commit)
                    continue
                self._settle(in_flight, failures, queue, commit)
                in_flight = finisher.submit(self._finish_and_commit, unit, generated, task, engine, failures, commit)
        for result in failures.finish():  # units held back while none was labelled (or UnitsKeepFailingError: none was)
            commit(result)

    def _start_engine(self, task: UnitTask, check_engine, progress: ProgressReporter) -> tuple[Generator, dict]:
        loads = getattr(self.generator_factory, "loads_model", True)  # NoGeneration.factory's loads none
        progress.log(f"loading model {self.model_name or task.config.model}" if loads else "no model to load: the job generates nothing")
        start_checker(self.checker)
        generator = self.generator_factory()
        engine = engine_record(generator, self.checker)
        check_engine(engine)  # before any unit: a refused engine wastes no labeling
        if loads:
            progress.log("model ready")
        return generator, engine

    def _finish_and_commit(self, unit: WorkUnit, generated: object, task: UnitTask, engine: dict, failures: UnitFailures, commit):
        """On the finisher thread: check and build the unit, then commit it (a piece of a bisected unit:
        the whole unit, once its last piece is in). A failure to finish is returned (the main thread
        retries the unit); a failure to commit, or of the machine (stops_the_job), is raised (it stops the job)."""
        try:
            result = task.finish(generated, self.checker, engine)
        except Exception as error:
            if stops_the_job(error):
                raise
            return unit, error
        whole = failures.succeeded(unit, result)
        if whole is not None:
            commit(whole)
        return None

    def _settle(self, in_flight: Future | None, failures: UnitFailures, queue: deque, commit) -> None:
        """Wait for the unit on the finisher thread: committed already, or failed (maybe queued again)."""
        if in_flight is None:
            return
        failed = in_flight.result()  # raises what the commit raised
        if failed is not None:
            self._unit_failed(*failed, failures, queue, commit)

    @staticmethod
    def _unit_failed(unit: WorkUnit, error: Exception, failures: UnitFailures, queue: deque, commit) -> None:
        result = failures.failed(  # queues it again, or its halves
            unit, describe_error(error), queue, engine_died=isinstance(error, EngineDiedError),
            unhealthy=isinstance(error, CheckerUnhealthyError),
        )  # fmt: skip
        if result is not None:
            commit(result)


def _close_quietly(generator: Generator) -> None:
    """Free what is left of a dead engine; its own errors do not matter any more."""
    close = getattr(generator, "close", None)
    if close is not None:
        try:
            close()
        except Exception:
            pass
