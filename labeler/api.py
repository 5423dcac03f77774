"""The Python API: one object that holds a completer model and an answer checker, like vLLM's `LLM`.

    from labeler import Labeler

    with Labeler(model="Qwen/Qwen2.5-Math-7B-Instruct", rollouts=8) as labeler:
        labels = labeler.label([{"problem": "...", "answer": "18", "steps": ["...", "..."]}])  # a pyarrow Table
        labeler.run_job(input="problems.jsonl", output="runs/job")  # the resumable job, on disk

`label` keeps everything in memory (no output directory, no manifest) and returns the labels table
with the same schema as the shards a job writes; `run_job` is `labeler label` from Python. Settings
are the fields of LabelConfig (the flags of `labeler label`, with underscores). Like the CLI, this
is an entry point: it is where the domain (labeler/) meets the engine (workers/). Its libraries log
to stderr (vLLM's log, which goes to stdout by default, included): the caller's stdout is its own.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from labeler.checking import AnswerChecker
from labeler.inputs.readers import rows_from_records
from labeler.labeling.config import LabelConfig
from labeler.labeling.generation import Generator
from labeler.labeling.job import JobSummary, plan_rows, run_job
from labeler.labeling.tables import rejected_table
from labeler.labeling.unit import LabelingTask, UnitResult
from labeler.store.progress import ProgressReporter
from labeler.store.shard_store import LABELS_DIR, REJECTED_DIR, ROLLOUTS_DIR
from schemas.tables import LABELS_SCHEMA, ROLLOUTS_SCHEMA

IN_MEMORY = "memory:rows"  # the input and output recorded for in-memory labeling

log = logging.getLogger("labeler.api")


@dataclass
class LabelTables:
    """What `Labeler.label_tables` returns: the three tables a job writes, in memory."""

    labels: pa.Table
    rollouts: pa.Table  # one row per completion
    rejected: pa.Table  # rows refused, with row_index, field and reason


class Labeler:
    """Label step-by-step solutions with Monte-Carlo rollouts.

    model: a hub id or local folder; None is the embedded SmolLM2-135M-Instruct.
    checker_timeout: seconds per symbolic answer check before a `timeout` verdict.
    generator: an engine already built (anything with the Generator protocol); by default a vLLM
        engine is started at the first call and kept until `close`.
    progress: log each finished unit on stderr.
    **settings: LabelConfig fields, e.g. rollouts=8, strategy="first-error", preset="gsm8k".
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        checker_timeout: float = 5.0,
        generator: Generator | None = None,
        progress: bool = False,
        **settings,
    ):
        from workers.engine_logging import vllm_logs_off_stdout
        from workers.model_source import EMBEDDED_MODEL

        vllm_logs_off_stdout()
        allowed = {f.name for f in dataclasses.fields(LabelConfig)} - {"input", "output", "model"}
        unknown = sorted(set(settings) - allowed)
        if unknown:
            raise TypeError(f"Labeler got unknown settings: {', '.join(unknown)} (see LabelConfig)")
        self.model = model
        self.config = LabelConfig(input=IN_MEMORY, output=IN_MEMORY, model=model or EMBEDDED_MODEL, **settings)
        self.checker = AnswerChecker(timeout_s=checker_timeout)
        self.progress = progress
        self._generator = generator
        self._owns_generator = generator is None

    # -- in memory -----------------------------------------------------------
    def label(self, rows: Iterable[dict]) -> pa.Table:
        """The labels table of `rows` (dicts in any input format `labeler label` reads). Rows that
        cannot be labelled are logged; `label_tables` returns them."""
        tables = self.label_tables(rows)
        if tables.rejected.num_rows:
            reasons = tables.rejected.select(["row_index", "field", "reason"]).to_pylist()
            log.warning("%d rows rejected (label_tables returns them): %s", len(reasons), reasons[:3])
        return tables.labels

    def label_tables(self, rows: Iterable[dict]) -> LabelTables:
        plan = plan_rows(rows_from_records(rows, self.config.limit), self.config)
        progress = ProgressReporter(len(plan.units), plan.solutions, enabled=self.progress)
        executor = self._executor()
        found: dict[str, list[pa.Table]] = {LABELS_DIR: [], ROLLOUTS_DIR: [], REJECTED_DIR: [rejected_table(plan.rejected, stage="input")]}

        def keep(result: UnitResult) -> None:
            for directory, table in result.tables.items():
                found[directory].append(table)

        if plan.units:
            executor.run(plan.units, LabelingTask(self.config, self.config.config_hash()), progress, keep)
        return LabelTables(
            labels=_concat(found[LABELS_DIR], LABELS_SCHEMA),
            rollouts=_concat(found[ROLLOUTS_DIR], ROLLOUTS_SCHEMA),
            rejected=pa.concat_tables(found[REJECTED_DIR]),
        )

    # -- on disk -------------------------------------------------------------
    def run_job(
        self,
        input: str,
        output: str,
        *,
        overwrite: bool = False,
        allow_engine_change: bool = False,
        rebuild_manifest: bool = False,
        retry_rejected: bool = False,
    ) -> JobSummary:
        """`labeler label --input INPUT --output OUTPUT` with this object's settings: resumable, exactly once.
        allow_engine_change: resume although the engine, model revision, checker or library versions
        differ from those of the committed units (`--allow-engine-change`).
        rebuild_manifest: rebuild a lost or unreadable manifest.json from commits/ (`--rebuild-manifest`).
        retry_rejected: label again the units an earlier run gave up on (`--retry-rejected`).
        An output that cannot be written or read raises labeler.store.errors.StorageError (an OSError)."""
        from workers.model_source import describe_model

        config = dataclasses.replace(self.config, input=input, output=output)
        return run_job(
            config,
            executor=self._executor(),
            model_info=describe_model(self.model),
            overwrite=overwrite,
            progress_enabled=self.progress,
            allow_engine_change=allow_engine_change,
            rebuild_manifest=rebuild_manifest,
            retry_rejected=retry_rejected,
        )

    # -- lifetime ------------------------------------------------------------
    def _executor(self):
        """This process, this object's engine (started at first use) and checker."""
        from workers.local_executor import LocalExecutor

        return LocalExecutor(self._engine, self.checker, model_name=self.config.model)

    def _engine(self) -> Generator:
        """The engine, started at first use and again after it died (the executor closed the dead one)."""
        if self._generator is None or (self._owns_generator and getattr(self._generator, "closed", False)):
            from workers.vllm_generator import start_engine

            self._generator = start_engine(self.model, self.config)
        return self._generator

    def close(self) -> None:
        if self._owns_generator and self._generator is not None and hasattr(self._generator, "close"):
            self._generator.close()
        self._generator = None
        self.checker.close()

    def __enter__(self) -> Labeler:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def load_scorer(
    spec: str,
    *,
    backend: str = "vllm",
    device: str = "auto",
    precision: str = "auto",
    batch_size: int = 8,
    trust_remote_code: bool = False,
    max_length: int | None = None,
    gpu_memory_utilization: float = 0.9,
):
    """A PRM's step scorer, as `labeler score --prm SPEC --prm-backend BACKEND` loads it: on vLLM's pooling
    runner by default (a PRM vLLM cannot serve is scored with torch, one warning saying why).

        scorer = load_scorer("qwen-prm:Qwen/Qwen2.5-Math-PRM-7B")
        scores = scorer.step_scores(solutions)       # SolutionToScore items; a list of step scores each
        reward = PRMRewardFunction(RewardConfig(prm=spec), scorer=scorer)   # the same PRM as an RL reward
        scorer.close()                               # the vLLM backend's engine (torch scorers have no close)
    """
    from labeler.prm.backends import BackendConfig
    from labeler.prm.devices import place
    from workers.vllm_scorer import load_step_scorer

    config = BackendConfig(prm_backend=backend, prm_gpu_memory_utilization=gpu_memory_utilization)
    return load_step_scorer(
        spec, config, placement=place(device, precision), batch_size=batch_size, trust_remote_code=trust_remote_code, max_length=max_length
    )


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    return pa.concat_tables(tables) if tables else schema.empty_table()
