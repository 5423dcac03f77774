"""Units run on a Ray cluster: a pool of LabelingWorker actors, one vLLM engine each; the driver commits.

The peer of workers/local_executor.py: the job (labeler/labeling/job.py: run_units, for labeling or
judging) plans and resumes as always and hands the pending units and its task to RayExecutor.run,
which feeds them to the workers and hands each returned UnitResult to the job's commit as it
arrives. Failures:
- a worker that fails (process killed, node lost, engine dead, any error in a unit) is killed and
  replaced, and its units go back to the front of the queue for the next free worker;
- a unit that failed more than `max_unit_retries` times is committed with its rows in rejected/
  (stage "generation", the error as the reason; labeler/labeling/unit_failures.py), so the job finishes;
- an engine that dies under a worker makes its generate call raise (workers/engine_watch.py): the
  worker is replaced like any failed one, with a new engine;
- a result for a unit already committed is dropped by the job's store.
A driver that dies is resumed by rerunning the command: committed units are skipped.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable, Sequence

import ray
from ray.exceptions import RayError, RayTaskError

# ClusterSettings is declared beside the job's settings, so that the CLI makes its flags without importing ray.
from labeler.labeling.config import ClusterSettings
from labeler.labeling.generation import EngineDiedError, Generator
from labeler.labeling.job import UnitTask
from labeler.labeling.planning import WorkUnit
from labeler.store.progress import ProgressReporter
from labeler.labeling.unit import UnitResult
from labeler.labeling.unit_failures import UnitFailures
from workers.checker_share import CheckerShare
from workers.ray_worker import UNITS_IN_FLIGHT, LabelingWorker

WORKER_NAME_PREFIX = "prm-labeler-worker"


class NoWorkerError(RuntimeError):
    """No worker could start (a bad model, no resources that fit): the job cannot go on."""


class RayExecutor:
    def __init__(
        self,
        settings: ClusterSettings,
        generator_factory: Callable[[], Generator],
        checker_factory: Callable[..., object] | None,
        max_unit_retries: int = 2,
    ):
        """checker_factory(workers=N) builds a worker's answer checker with a pool of N processes
        (None: the task checks no answers, a judge)."""
        self.settings = settings
        self.max_unit_retries = max_unit_retries
        self.generator_factory = generator_factory
        self.checker_factory = checker_factory

    def run(
        self,
        units: Sequence[WorkUnit],
        task: UnitTask,
        progress: ProgressReporter,
        commit: Callable[[UnitResult], object],
        check_engine: Callable[[dict], object] | None = None,
    ) -> None:
        started_ray = connect(self.settings.address)
        options = self._worker_options(task)
        share = CheckerShare(self.settings.checker_processes, self.settings.workers, options["num_cpus"], options["num_gpus"])
        worker_args = (self.generator_factory, self.checker_factory, share, task, self.settings.engine_log_level)
        pool = WorkerPool(options, worker_args, progress)
        try:
            progress.log(f"starting {self.settings.workers} workers on Ray ({_describe_cluster()})")
            for _ in range(self.settings.workers):
                pool.start_worker()
            self._label_all(units, pool, progress, commit, check_engine or (lambda engine: None))
        finally:
            pool.shutdown()
            if started_ray:
                ray.shutdown()

    def _worker_options(self, task: UnitTask) -> dict:
        gpus = self.settings.gpus_per_worker
        if gpus is None:
            gpus = task.config.tensor_parallel_size if ray.cluster_resources().get("GPU", 0) else 0
        # One CPU each: on a CPU-only machine the engine computes there; on GPUs it feeds them.
        return {"num_cpus": 1, "num_gpus": gpus, "max_concurrency": UNITS_IN_FLIGHT}

    def _label_all(self, units, pool: WorkerPool, progress: ProgressReporter, commit, check_engine) -> None:
        queue = deque(units)
        failures = UnitFailures(self.max_unit_retries, progress, where="on Ray workers")
        running: dict = {}  # ObjectRef of a label call -> (unit, worker)
        clock_started = False
        while queue or running:
            for worker in pool.free_slots()[: len(queue)]:
                unit = queue.popleft()
                pool.assign(worker)
                running[worker.label.remote(unit)] = (unit, worker)
            if not running and not pool.starting:
                raise NoWorkerError(f"no worker could start; last error: {pool.last_start_error}")
            [ref], _ = ray.wait([*pool.starting, *running], num_returns=1)
            if ref in pool.starting:
                engine = pool.worker_started(ref)
                if engine is not None:
                    check_engine(engine)  # every worker's, replacements too: each may run on another node
                    if not clock_started:
                        progress.start_clock()
                        clock_started = True
                continue
            unit, worker = running.pop(ref)
            pool.release(worker)
            try:
                result: UnitResult = ray.get(ref)
            except RayError as error:
                result = self._unit_failed(unit, worker, error, failures, pool)
                if result is None:
                    queue.appendleft(unit)
                    continue
            else:
                failures.succeeded()
            commit(result)

    @staticmethod
    def _unit_failed(unit: WorkUnit, worker, error: Exception, failures: UnitFailures, pool: WorkerPool) -> UnitResult | None:
        """Replace the worker; None to retry the unit, or, past the retry limit, the unit as rejected rows."""
        if worker in pool.killed:
            return None  # the driver killed this worker because another of its units failed: not this unit's fault
        # An error raised in a unit names its culprit; a worker that died takes all its units down
        # and each of them counts one failure, since any of them might have killed it.
        pool.replace(worker, killed_by_driver=isinstance(error, RayTaskError))
        return failures.failed(unit, _short(error), engine_died=_cause(error, EngineDiedError))


class WorkerPool:
    """The live workers, those still starting, and how many units each has in flight."""

    def __init__(self, worker_options: dict, worker_args: tuple, progress: ProgressReporter):
        self.worker_class = ray.remote(LabelingWorker)
        self.worker_options = worker_options
        self.worker_args = worker_args
        self.progress = progress
        self.starting: dict = {}  # ObjectRef of a `where` call -> worker not yet ready
        self.in_flight: dict = {}  # ready worker -> units in flight
        self.killed: set = set()  # workers the driver killed while they had units in flight
        self.started = 0
        self.last_start_error: str | None = None

    def start_worker(self) -> None:
        self.started += 1
        worker = self.worker_class.options(name=f"{WORKER_NAME_PREFIX}-{self.started}", **self.worker_options).remote(*self.worker_args)
        self.starting[worker.where.remote()] = worker

    def worker_started(self, ref) -> dict | None:
        """Settle a worker's start: its engine record, or None if it failed (it is not replaced:
        starting again would fail alike)."""
        worker = self.starting.pop(ref)
        try:
            where, engine = ray.get(ref)
        except RayError as error:
            self.last_start_error = _short(error)
            self.progress.log(f"a worker failed to start: {self.last_start_error}")
            ray.kill(worker, no_restart=True)  # an actor whose __init__ failed keeps its name until killed
            return None
        self.in_flight[worker] = 0
        self.progress.log(f"worker ready on {where} ({len(self.in_flight)} ready)")
        return engine

    def free_slots(self) -> list:
        """A ready worker once per unit it can take now, round-robin so that units spread over workers first."""
        slots = []
        for depth in range(UNITS_IN_FLIGHT):
            slots.extend(worker for worker, count in self.in_flight.items() if count <= depth)
        return slots

    def assign(self, worker) -> None:
        self.in_flight[worker] += 1

    def release(self, worker) -> None:
        if worker in self.in_flight:  # not when it was replaced already
            self.in_flight[worker] -= 1

    def replace(self, worker, killed_by_driver: bool) -> None:
        """A failed worker is not trusted with more work: kill it and start another (once per worker)."""
        if self.in_flight.pop(worker, None) is None:
            return  # already replaced, when an earlier unit of it failed
        if killed_by_driver:
            self.killed.add(worker)
        ray.kill(worker, no_restart=True)
        self.progress.log("starting a worker to replace the failed one")
        self.start_worker()

    def shutdown(self) -> None:
        """Kill every worker: Ray takes down its process tree too (engine, checker pool), freeing its devices."""
        for worker in [*self.in_flight, *self.starting.values()]:
            ray.kill(worker, no_restart=True)
        self.in_flight.clear()
        self.starting.clear()


def connect(address: str | None) -> bool:
    """Join the cluster at `address` (or RAY_ADDRESS), else start a local Ray instance. True if Ray was started here."""
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, logging_level=logging.WARNING)
    else:
        ray.init(include_dashboard=False, logging_level=logging.WARNING)
    return True


def _describe_cluster() -> str:
    resources = ray.cluster_resources()
    return f"{len(ray.nodes())} node(s), {resources.get('CPU', 0):g} CPUs, {resources.get('GPU', 0):g} GPUs"


def _cause(error: BaseException, kind: type) -> bool:
    """Whether the exception raised in the worker (under Ray's wrapping) is a `kind`."""
    while isinstance(error, RayTaskError) and isinstance(error.cause, BaseException):
        error = error.cause
    return isinstance(error, kind)


def _short(error: BaseException) -> str:
    """One line for a Ray error: the exception raised in the worker, or why Ray says the worker died."""
    while isinstance(error, RayTaskError) and isinstance(error.cause, BaseException):
        error = error.cause
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    if getattr(error, "actor_init_failed", False):  # the message ends with the traceback of __init__
        return lines[-1][:300]
    text = lines[0] if len(lines) == 1 else f"{lines[0]} {lines[-1]}"
    return f"{type(error).__name__}: {text}"[:300]
