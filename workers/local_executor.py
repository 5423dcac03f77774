"""Labeling in this process: one vLLM engine, and the checking of unit i overlapping the generation of unit i+1.

The peer of workers/ray_executor.py: both take pending units and yield each unit's result; the job
commits them. The engine works in its own process, so checking (pure Python, with symbolic work in
the checker's process pool) on a second thread keeps the engine busy instead of waiting.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from labeler.labeling.config import LabelConfig
from labeler.labeling.engine_record import engine_record
from labeler.labeling.generation import Generator
from labeler.labeling.planning import WorkUnit
from labeler.labeling.rollouts import Checker
from labeler.labeling.unit import UnitResult, finish_unit, generate_unit
from labeler.store.progress import ProgressReporter


class LocalExecutor:
    def __init__(self, generator_factory: Callable[[], Generator], checker: Checker, model_name: str = ""):
        self.generator_factory = generator_factory
        self.checker = checker
        self.model_name = model_name

    def run(
        self,
        units: Sequence[WorkUnit],
        config: LabelConfig,
        config_hash: str,
        progress: ProgressReporter,
        check_engine: Callable[[dict], object] | None = None,
    ) -> Iterator[UnitResult]:
        """Yield each unit's result in unit order. A failure in either half stops the job; a rerun resumes."""
        progress.log(f"loading model {self.model_name or config.model}")
        generator = self.generator_factory()
        engine = engine_record(generator, self.checker)
        if check_engine is not None:
            check_engine(engine)  # before any unit: a refused engine wastes no labeling
        progress.log("model ready")
        progress.start_clock()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="finisher") as finisher:
            in_flight: Future | None = None
            for unit in units:
                try:
                    generated = generate_unit(unit, config, generator, self.checker)
                except BaseException:
                    if in_flight is not None:  # the unit generated before the failure is still committed
                        yield in_flight.result()
                    raise
                if in_flight is not None:
                    yield in_flight.result()
                in_flight = finisher.submit(finish_unit, generated, config, self.checker, config_hash, engine)
            if in_flight is not None:
                yield in_flight.result()
