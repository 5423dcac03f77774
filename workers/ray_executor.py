"""Units run on a Ray cluster: a pool of LabelingWorker actors, one vLLM engine each; the driver commits.

The peer of workers/local_executor.py: the job (labeler/labeling/job.py: run_units, for labeling or
judging) plans and resumes as always and hands the pending units and its task to RayExecutor.run,
which feeds them to the workers and hands each returned UnitResult to the job's commit as it
arrives. Failures:
- a worker that fails (process killed, node lost, engine dead, any error in a unit) is killed and
  replaced, and its units go back to the front of the queue for the next free worker; a worker or
  node lost spends none of its units' retries (each unit may be stranded so a bounded number of
  times: labeler/labeling/unit_failures.py, LOSSES_PER_UNIT);
- an answer checker that cannot check (CheckerUnavailable, raised in a unit; or sick: CheckerSickError) stops the job: it is the
  machine's failure, not the unit's (labeler/labeling/unit_failures.py: stops_the_job); committed units
  are kept, the units in flight are not committed and none of their rows is rejected;
- a unit whose own error came back more than `max_unit_retries` times is bisected down to the rows
  that fail, which go to rejected/ (stage "generation", the error as the reason; unit_failures.py),
  so the job finishes;
- an engine that dies under a worker makes its generate call raise (workers/engine_watch.py): the
  worker is replaced like any failed one, with a new engine;
- a node that is lost takes its workers with it. Ray fails their calls, within seconds when their
  processes go (a raylet killed), or once its health checks give up on a node that stopped answering
  (about a minute by default). The driver also looks at the cluster's nodes every POLL_S seconds: the
  units of workers on a node Ray reports dead go back to the queue at once, whatever their calls do,
  and the log names the node and the units;
- a worker that has not started within --worker-start-timeout (no room for it on the cluster, an
  engine that never finishes loading) is given up, so a job left without workers stops (NoWorkerError)
  instead of waiting forever; one whose process or node died while it started is replaced (at most
  --workers times per job), one whose engine raised while loading is not (another would fail alike);
- a result for a unit already committed is dropped by the job's store.
A driver that dies is resumed by rerunning the command: committed units are skipped.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence

import ray
from ray.exceptions import RayActorError, RayError, RayTaskError

# ClusterSettings is declared beside the job's settings, so that the CLI makes its flags without importing ray.
from labeler.labeling.config import ClusterSettings
from labeler.checking import CheckerUnavailable
from labeler.labeling.checker_watch import CheckerUnhealthyError
from labeler.labeling.generation import EngineDiedError, Generator
from labeler.labeling.job import UnitTask
from labeler.labeling.planning import WorkUnit
from labeler.store.progress import ProgressReporter
from labeler.labeling.unit import UnitResult
from labeler.labeling.unit_failures import UnitFailures, stops_the_job
from workers.checker_share import CheckerShare
from workers.ray_worker import CALLS_AT_ONCE, UNITS_IN_FLIGHT, LabelingWorker

WORKER_NAME_PREFIX = "prm-labeler-worker"
POLL_S = 2.0  # how often the driver looks at the cluster's nodes and at its starting workers while it waits
WAITING_NOTE_S = 60.0  # with no worker ready, how often the log says what the job waits for


class NoWorkerError(RuntimeError):
    """No worker could start (a bad model, no resources that fit, none within --worker-start-timeout): the job cannot go on."""


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
        # stdout is for results, but Ray prints to the driver's stdout what workers and raylets on any node
        # write to theirs (a dying raylet's state dump, say): while Ray runs here, that goes to stderr.
        with contextlib.redirect_stdout(sys.stderr):
            started_ray = connect(self.settings.address)
            try:
                options = self._worker_options(task)
                share = CheckerShare(self.settings.checker_processes, self.settings.workers, options["num_cpus"], options["num_gpus"])
                worker_args = (self.generator_factory, self.checker_factory, share, task, self.settings.engine_log_level)
                pool = WorkerPool(options, worker_args, progress, self.settings.worker_start_timeout, restarts=self.settings.workers)
                try:
                    progress.log(f"starting {self.settings.workers} workers on Ray ({describe_cluster()})")
                    for _ in range(self.settings.workers):
                        pool.start_worker()
                    self._label_all(units, pool, progress, commit, check_engine or (lambda engine: None))
                finally:
                    pool.shutdown()
            finally:
                if started_ray:
                    ray.shutdown()

    def _worker_options(self, task: UnitTask) -> dict:
        gpus = self.settings.gpus_per_worker
        if gpus is None:
            gpus = task.config.tensor_parallel_size if ray.cluster_resources().get("GPU", 0) else 0
        # One CPU each: on a CPU-only machine the engine computes there; on GPUs it feeds them.
        return {"num_cpus": 1, "num_gpus": gpus, "max_concurrency": CALLS_AT_ONCE}

    def _label_all(self, units, pool: WorkerPool, progress: ProgressReporter, commit, check_engine) -> None:
        queue = deque(units)
        failures = UnitFailures(self.max_unit_retries, progress, where="on Ray workers")
        running: dict = {}  # ObjectRef of a label call -> (unit, worker)
        nodes = NodeWatch(progress)
        generation = GenerationWatch(progress)
        clock_started = False
        while queue or running:
            for worker in pool.free_slots():
                if not queue:
                    break
                alone = failures.runs_alone(queue[0])  # lost before: on a worker of its own, so that its next loss is its own
                if pool.in_flight.get(worker, UNITS_IN_FLIGHT) >= UNITS_IN_FLIGHT or (alone and pool.in_flight[worker]):
                    continue
                unit = queue.popleft()
                pool.assign(worker, alone)
                running[worker.label.remote(unit)] = (unit, worker)
            if not running and not pool.starting:
                raise NoWorkerError(f"no worker could start; last error: {pool.last_start_error}")
            ready, _ = ray.wait([*pool.starting, *running], num_returns=1, timeout=POLL_S)
            generation.collect(pool.in_flight)
            for node in nodes.lost():
                self._node_lost(node, running, queue, failures, pool, commit, progress)
            pool.give_up_late_starts(waiting=not pool.in_flight)
            if not ready:
                continue
            [ref] = ready
            if ref in pool.starting:
                engine = pool.worker_started(ref)
                if engine is not None:
                    check_engine(engine)  # every worker's, replacements too: each may run on another node
                    if not clock_started:
                        progress.start_clock()
                        clock_started = True
                continue
            if ref not in running:  # a start given up, or a unit whose node was lost meanwhile (queued again)
                continue
            unit, worker = running.pop(ref)
            pool.release(worker)
            try:
                result: UnitResult | None = failures.succeeded(unit, ray.get(ref))
            except RayError as error:
                if stops_the_job(_innermost(error)):
                    where = f"on worker {pool.names[worker]}"
                    raise CheckerUnavailable(f"{_innermost(error)} ({where}, unit {unit.index})") from error
                blame_unit = isinstance(error, RayTaskError)  # raised in the unit; else its worker died
                engine_died, unhealthy = _cause(error, EngineDiedError), _cause(error, CheckerUnhealthyError)
                result = self._unit_failed(
                    unit, worker, _short(error), failures, pool, running, queue, blame_unit, engine_died, unhealthy
                )
            if result is not None:
                commit(result)
        for result in failures.finish():  # units held back while none was labelled (or UnitsKeepFailingError: none was)
            commit(result)
        if pool.failed:  # a worker failed for a reason Ray may know only now: a node it has declared dead since
            for node in nodes.lost(now=True):
                progress.warn(self._loss(node, pool, []))

    def _node_lost(self, node: dict, running: dict, queue: deque, failures: UnitFailures, pool: WorkerPool, commit, progress) -> None:
        """Ray reports `node` dead: requeue the units of the workers that were there, replace those workers."""
        workers = pool.on_node(node["NodeID"])
        stranded = [(ref, unit, worker) for ref, (unit, worker) in running.items() if worker in workers]
        progress.warn(self._loss(node, pool, stranded))
        reason = f"node {node['NodeID'][:8]} lost"
        for ref, unit, worker in stranded:
            del running[ref]
            pool.release(worker)
            result = self._unit_failed(unit, worker, reason, failures, pool, running, queue)  # a loss: queued again, or bisected
            if result is not None:
                commit(result)
        for worker in workers:  # those that had no unit in flight
            pool.replace(worker, reason, [], killed_by_driver=False)

    @staticmethod
    def _loss(node: dict, pool: WorkerPool, stranded: list) -> str:
        """What losing `node` means for the job, in one line."""
        workers = pool.on_node(node["NodeID"])
        text = f"node {describe_node(node)} lost ({node.get('DeathReasonMessage') or 'reported dead'})"
        if workers:
            text += f"; its workers {', '.join(pool.names[worker] for worker in workers)} with it"
        if stranded:
            text += f", units {', '.join(str(unit.index) for _, unit, _ in sorted(stranded, key=lambda s: s[1].index))} go back to the queue"
        text += "".join(f"; {name} there had failed {seconds:.0f} s before" for name, seconds in pool.failed_on(node["NodeID"]))
        return f"{text}; the cluster now: {describe_cluster()}"

    @staticmethod
    def _unit_failed(
        unit: WorkUnit, worker, reason: str, failures: UnitFailures, pool: WorkerPool, running: dict, queue: deque,
        blame_unit=False, engine_died=False, unhealthy=False,
    ) -> UnitResult | None:  # fmt: skip
        """Replace the worker and queue the unit again (or its halves); or, when it was a bisected unit's
        last piece, return the unit's result to commit."""
        if worker in pool.killed:
            queue.appendleft(unit)  # the driver killed this worker because another of its units failed: not this unit's fault
            return None
        in_flight = sorted([unit.index, *(other.index for other, owner in running.values() if owner is worker)])
        pool.replace(worker, reason, in_flight, killed_by_driver=blame_unit)
        if blame_unit:  # an error raised in a unit names its culprit: it counts against the unit's retries
            return failures.failed(unit, reason, queue, engine_died=engine_died, unhealthy=unhealthy)
        # A worker that died (killed, preempted, its node lost) takes all its units down: not their fault, unless
        # the same unit keeps being lost while others are labelled (then it is bisected: unit_failures.py)
        return failures.lost(unit, reason, queue)


class WorkerPool:
    """The live workers, those still starting, where each runs and how many units each has in flight."""

    def __init__(self, worker_options: dict, worker_args: tuple, progress: ProgressReporter, start_timeout: float, restarts: int):
        self.worker_class = ray.remote(LabelingWorker)
        self.worker_options = worker_options
        self.worker_args = worker_args
        self.progress = progress
        self.start_timeout = start_timeout
        self.restarts_left = restarts  # workers whose process or node died while they started, replaced
        self.starting: dict = {}  # ObjectRef of a `where` call -> worker not yet ready
        self.start_times: dict = {}  # the same ObjectRef -> when that worker was started (monotonic)
        self.in_flight: dict = {}  # ready worker -> units in flight
        self.alone: set = set()  # workers running a unit alone (all their slots taken)
        self.places: dict = {}  # ready worker -> where it runs: node_id, host, pid, checker_processes
        self.names: dict = {}  # worker -> its actor's name
        self.failed: list[tuple[str, str, float]] = []  # workers replaced: name, node id, when
        self.killed: set = set()  # workers the driver killed while they had units in flight
        self.started = 0
        self.last_start_error: str | None = None
        self.waiting_noted = time.monotonic()

    def start_worker(self) -> None:
        self.started += 1
        name = f"{WORKER_NAME_PREFIX}-{self.started}"
        worker = self.worker_class.options(name=name, **self.worker_options).remote(*self.worker_args)
        ref = worker.where.remote()
        self.starting[ref] = worker
        self.start_times[ref] = time.monotonic()
        self.names[worker] = name

    def worker_started(self, ref) -> dict | None:
        """Settle a worker's start: its engine record, or None if it failed. A worker whose engine raised
        is not replaced (starting again would fail alike); one whose process or node died is."""
        worker = self.starting.pop(ref)
        del self.start_times[ref]
        try:
            place, engine = ray.get(ref)
        except RayError as error:
            self.last_start_error = _short(error)
            ray.kill(worker, no_restart=True)  # an actor whose __init__ failed keeps its name until killed
            died_outside = isinstance(error, RayActorError) and not error.actor_init_failed
            if died_outside and self.restarts_left > 0:
                self.restarts_left -= 1
                self.progress.warn(f"worker {self.names[worker]} died while it started ({self.last_start_error}); starting another")
                self.start_worker()
            else:
                self.progress.log(f"a worker failed to start: {self.last_start_error}")
            return None
        self.in_flight[worker] = 0
        self.places[worker] = place
        self.progress.log(f"worker ready on {describe_place(place)} ({self.names[worker]}; {len(self.in_flight)} ready)")
        return engine

    def give_up_late_starts(self, waiting: bool) -> None:
        """Kill the workers starting for longer than the start timeout. `waiting` (no worker ready): say
        once a minute what the job waits for."""
        now = time.monotonic()
        needs = {"CPU": self.worker_options["num_cpus"], "GPU": self.worker_options["num_gpus"]}
        each = ", ".join(f"{amount:g} {name}" for name, amount in needs.items())
        for ref, began in list(self.start_times.items()):
            if now - began > self.start_timeout:
                worker = self.starting.pop(ref)
                del self.start_times[ref]
                ray.kill(worker, no_restart=True)
                fits = any(all(node["Resources"].get(name, 0) >= amount for name, amount in needs.items()) for node in ray.nodes() if node["Alive"])
                why = "no room for it on the cluster now, or its engine did not finish loading" if fits else "no node of the cluster can hold one"
                self.last_start_error = (
                    f"{self.names[worker]} did not start within {self.start_timeout:g} s (--worker-start-timeout): "
                    f"{why} ({each} each; {describe_cluster()})"
                )
                self.progress.warn(f"gave up on a worker: {self.last_start_error}")
        if waiting and self.starting and now - self.waiting_noted > WAITING_NOTE_S:
            self.waiting_noted = now
            oldest = now - min(self.start_times.values())
            self.progress.log(
                f"no worker ready: waiting for {len(self.starting)} to start, the first for {oldest:.0f} s of "
                f"--worker-start-timeout {self.start_timeout:g} s ({each} each; {describe_cluster()})"
            )

    def free_slots(self) -> list:
        """A ready worker once per unit it can take now, round-robin so that units spread over workers first."""
        slots = []
        for depth in range(UNITS_IN_FLIGHT):
            slots.extend(worker for worker, count in self.in_flight.items() if count <= depth)
        return slots

    def assign(self, worker, alone: bool = False) -> None:
        """One more unit in flight on `worker`; `alone`: a unit that takes all its slots."""
        self.in_flight[worker] += UNITS_IN_FLIGHT if alone else 1
        if alone:
            self.alone.add(worker)

    def release(self, worker) -> None:
        if worker in self.in_flight:  # not when it was replaced already
            self.in_flight[worker] = 0 if worker in self.alone else self.in_flight[worker] - 1
        self.alone.discard(worker)

    def on_node(self, node_id: str) -> list:
        """The ready workers on that node."""
        return [worker for worker, place in self.places.items() if place["node_id"] == node_id]

    def failed_on(self, node_id: str) -> list[tuple[str, float]]:
        """Workers of that node replaced already: name, seconds ago."""
        now = time.monotonic()
        return [(name, now - when) for name, node, when in self.failed if node == node_id]

    def replace(self, worker, reason: str, units: list[int], killed_by_driver: bool) -> None:
        """A failed worker is not trusted with more work: kill it and start another (once per worker)."""
        if self.in_flight.pop(worker, None) is None:
            return  # already replaced, when an earlier unit of it failed
        place = self.places.pop(worker)
        self.failed.append((self.names[worker], place["node_id"], time.monotonic()))
        if killed_by_driver:
            self.killed.add(worker)
        ray.kill(worker, no_restart=True)
        in_flight = f" with units {', '.join(map(str, units))} in flight" if units else ""
        self.progress.warn(f"worker {self.names[worker]} on node {place['node_id'][:8]} failed{in_flight}: {reason}")
        self.progress.log("starting a worker to replace the failed one")
        self.start_worker()

    def shutdown(self) -> None:
        """Kill every worker: Ray takes down its process tree too (engine, checker pool), freeing its devices."""
        for worker in [*self.in_flight, *self.starting.values()]:
            ray.kill(worker, no_restart=True)
        self.in_flight.clear()
        self.starting.clear()
        self.start_times.clear()


class GenerationWatch:
    """The workers' generation between commits, for the job's progress: each time the driver looks (POLL_S), it
    asks each ready worker with no question pending what its units generated since it last asked
    (LabelingWorker.generated_since_asked) and hands the answers, as they come, to ProgressReporter.generated,
    which prints at most one line every BATCH_LINE_EVERY_S. A worker that dies meanwhile answers nothing: its
    units are the failure handling's."""

    def __init__(self, progress: ProgressReporter):
        self.progress = progress
        self.asked: dict = {}  # ObjectRef of a generated_since_asked call -> its worker

    def collect(self, workers) -> None:
        """Take the answers in, and ask the ready `workers` that have no question pending."""
        if self.asked:
            answered, _ = ray.wait(list(self.asked), num_returns=len(self.asked), timeout=0)
            for ref in answered:
                del self.asked[ref]
                try:
                    rollouts, tokens = ray.get(ref)
                except RayError:
                    continue
                if rollouts or tokens:  # nothing generated since: no line
                    self.progress.generated(rollouts, tokens)
        waiting = set(self.asked.values())
        for worker in list(workers):
            if worker not in waiting:
                self.asked[worker.generated_since_asked.remote()] = worker


class NodeWatch:
    """The cluster's live nodes as the driver last saw them (looked at every POLL_S seconds): it logs
    the nodes that join and returns those that were lost, as ray.nodes() describes them."""

    def __init__(self, progress: ProgressReporter):
        self.progress = progress
        self.alive = {node["NodeID"]: node for node in ray.nodes() if node["Alive"]}
        self.looked = time.monotonic()

    def lost(self, now: bool = False) -> list[dict]:
        """The nodes lost since the last look; none when that was under POLL_S ago (unless `now`)."""
        if not now and time.monotonic() - self.looked < POLL_S:
            return []
        self.looked = time.monotonic()
        nodes = {node["NodeID"]: node for node in ray.nodes()}
        alive = {node_id: node for node_id, node in nodes.items() if node["Alive"]}
        for node_id in alive.keys() - self.alive.keys():
            self.progress.log(f"node {describe_node(alive[node_id])} joined the cluster ({describe_cluster()})")
        lost = [nodes.get(node_id, node) for node_id, node in self.alive.items() if node_id not in alive]
        self.alive = alive
        return lost


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


def describe_cluster() -> str:
    """Its live nodes, and their CPUs and GPUs (free / in all)."""
    total, free = ray.cluster_resources(), ray.available_resources()
    nodes = sum(1 for node in ray.nodes() if node["Alive"])
    return f"{nodes} node(s), {free.get('CPU', 0):g}/{total.get('CPU', 0):g} CPUs free, {free.get('GPU', 0):g}/{total.get('GPU', 0):g} GPUs free"


def describe_node(node: dict) -> str:
    return f"{node['NodeID'][:8]} ({node.get('NodeManagerAddress', '?')})"


def describe_place(place: dict) -> str:
    processes = place["checker_processes"]
    checker = f"{processes} checker process" + ("es" if processes > 1 else "") if processes else "no answer checker"
    return f"node {place['node_id'][:8]} (host {place['host']}, pid {place['pid']}), {checker}"


def _innermost(error: BaseException) -> BaseException:
    """The exception raised in the worker, under Ray's wrapping."""
    while isinstance(error, RayTaskError) and isinstance(error.cause, BaseException):
        error = error.cause
    return error


def _cause(error: BaseException, kind: type) -> bool:
    """Whether the exception raised in the worker (under Ray's wrapping) is a `kind`."""
    return isinstance(_innermost(error), kind)


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
