"""The settings of a labeling job, and which of them change its output (and so its config hash)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from labeler.labeling.generation import SamplingSettings
from labeler.ids import stable_id

FINAL_STEP_MODES = ("check", "rollouts")


@dataclass(frozen=True)
class LabelConfig:
    input: str
    output: str
    model: str
    preset: str | None = None
    limit: int | None = None
    split_rule: str = "auto"
    max_row_chars: int = 50_000
    columns: dict[str, str] = field(default_factory=dict)  # explicit column flags: problem, answer, ...
    rollouts: int = 8
    temperature: float = 0.7
    top_p: float = 1.0
    max_new_tokens: int = 256
    seed: int = 0
    shard_size: int = 64
    solutions_per_problem: int = 4
    solution_max_new_tokens: int = 512
    final_step: str = "check"
    stop_after_answer: bool = True
    stop: tuple[str, ...] = ()  # extra stop strings beside the defaults
    strategy: str = "exhaustive"
    after_first_error: str = "negative"
    round_size: int = 2
    ci_width: float = 0.5
    write_rollouts: bool = True
    trust_remote_code: bool = False
    # Engine settings: they change speed and memory, not (for a given model and seed) the labels.
    dtype: str = "auto"
    max_model_len: int | None = None
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9

    ENGINE_ONLY = ("output", "dtype", "max_model_len", "tensor_parallel_size", "gpu_memory_utilization")

    def __post_init__(self) -> None:
        if self.rollouts < 1:
            raise ValueError("--rollouts must be >= 1")
        if self.shard_size < 1:
            raise ValueError("--shard-size must be >= 1")
        if self.solutions_per_problem < 1:
            raise ValueError("--solutions-per-problem must be >= 1")
        if self.max_new_tokens < 1 or self.solution_max_new_tokens < 1:
            raise ValueError("token budgets must be >= 1")
        if not 0 < self.top_p <= 1 or self.temperature < 0:
            raise ValueError("--top-p must be in (0, 1] and --temperature >= 0")
        if self.final_step not in FINAL_STEP_MODES:
            raise ValueError(f"--final-step must be one of {', '.join(FINAL_STEP_MODES)}")
        from labeler.labeling.strategies import AFTER_FIRST_ERROR, STRATEGIES

        if self.strategy not in STRATEGIES:
            raise ValueError(f"--strategy must be one of {', '.join(STRATEGIES)}")
        if self.after_first_error not in AFTER_FIRST_ERROR:
            raise ValueError(f"--after-first-error must be one of {', '.join(AFTER_FIRST_ERROR)}")
        if self.round_size < 1 or not 0 < self.ci_width <= 1:
            raise ValueError("--round-size must be >= 1 and --ci-width in (0, 1]")
        if self.limit is not None and self.limit < 1:
            raise ValueError("--limit must be >= 1")

    @property
    def sampling(self) -> SamplingSettings:
        return self._sampling(self.max_new_tokens)

    @property
    def solution_sampling(self) -> SamplingSettings:
        return self._sampling(self.solution_max_new_tokens)

    def _sampling(self, budget: int) -> SamplingSettings:
        from labeler.labeling.prompts import ANSWER_MARKER, DEFAULT_STOP

        return SamplingSettings(
            temperature=self.temperature,
            top_p=self.top_p,
            max_new_tokens=budget,
            stop=DEFAULT_STOP + tuple(self.stop),
            answer_marker=ANSWER_MARKER if self.stop_after_answer else None,
        )

    def to_dict(self) -> dict:
        return asdict(self)

    def output_settings(self) -> dict:
        """The settings that decide what the job writes; a rerun must match them to resume."""
        return {key: value for key, value in self.to_dict().items() if key not in self.ENGINE_ONLY}

    def config_hash(self) -> str:
        return stable_id(json.dumps(self.output_settings(), sort_keys=True))
