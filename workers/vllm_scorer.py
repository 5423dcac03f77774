"""Step scores from vLLM's pooling runner: the `vllm` PRM backend (labeler/prm/backends.py).

A solution is rendered to token ids exactly as the torch path renders it (the same adapter, or our
checkpoint's rendering, loaded without weights), sent to vLLM as token ids, and vLLM returns the
raw per-token logits of the PRM's classifier (token_classify with ALL pooling and no activation);
the scores are read at the same positions and turned into probabilities the same way, per kind of
PRM (labeler/prm/pooling.py, which the client of a `vllm serve` process shares).

Reading every token (ALL pooling) rather than vLLM's STEP pooling keeps the positions ours: a step
tag can also occur where no step ends (the blank line after our problem text).

    scorer = load_step_scorer("qwen-prm:Qwen/Qwen2.5-Math-PRM-7B", BackendConfig(), placement=place("cuda", "bf16"))
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import torch

from labeler.evaluation.solutions import SolutionToScore
from labeler.prm.backends import TORCH, BackendConfig
from labeler.prm.devices import Placement
from labeler.prm.pooling import Reading, VLLMCannotServe, pooled_scores, prepare_pooling
from labeler.prm.scorers import StepScorer, load_scorer, parse_spec
from workers.vllm_generator import platform_engine_kwargs, register_engine, shutdown_engine

log = logging.getLogger("labeler.score")


# A sequence to score: (token ids, score positions of the steps that fit, the trajectory position or None).
Sequences = Callable[[Sequence[SolutionToScore]], list[tuple[list[int], list[int], int | None]]]


class VLLMStepScorer:
    """A StepScorer (labeler/prm/scorers.py) on a vLLM engine of its own."""

    def __init__(self, llm, *, name: str, sequences: Sequences, reading: Reading, render_problem=None):
        self.llm = llm
        self.name = name
        self.backend = "vllm"
        self._sequences = sequences
        self.reading = reading
        if reading.trajectory_column is not None:  # what score_solutions looks for
            self.step_and_trajectory_scores = self._step_and_trajectory_scores
        if render_problem is not None:  # the adapter's render check: why a solution got no score (labeler.prm.scorers)
            self.render_problem = render_problem

    def step_scores(self, solutions: Sequence[SolutionToScore]) -> list[list[float | None]]:
        return [steps for steps, _ in self._scores(solutions)]

    def _step_and_trajectory_scores(self, solutions: Sequence[SolutionToScore]) -> list[tuple[list[float | None], float | None]]:
        return self._scores(solutions)

    def _scores(self, solutions: Sequence[SolutionToScore]) -> list[tuple[list[float | None], float | None]]:
        from vllm import PoolingParams
        from vllm.inputs import TokensPrompt

        params = PoolingParams(use_activation=False)  # raw logits: the probability is read as the torch path reads it

        def encode(token_ids: list[list[int]]) -> list[torch.Tensor]:
            prompts = [TokensPrompt(prompt_token_ids=ids) for ids in token_ids]
            return [output.outputs.data for output in self.llm.encode(prompts, params, pooling_task="token_classify", use_tqdm=False)]

        shape_error = lambda solution, shape, tokens: RuntimeError(  # noqa: E731
            f"vLLM returned {shape[0] if shape else 0} token outputs for {tokens} tokens of solution {solution}"
        )
        return pooled_scores(solutions, self._sequences(solutions), self.reading, encode, shape_error)

    def close(self) -> None:
        llm, self.llm = self.llm, None
        if llm is not None:
            shutdown_engine(self, llm)


def load_step_scorer(
    spec: str,
    backend: BackendConfig,
    *,
    placement: Placement,
    batch_size: int = 8,
    trust_remote_code: bool = False,
    max_length: int | None = None,
) -> StepScorer:
    """The scorer a spec names on the configured backend. With vllm, a PRM that vLLM cannot serve is
    scored with torch, and one warning says why; a spec that cannot load at all raises PRMLoadError."""
    torch_scorer = lambda: load_scorer(
        spec, placement=placement, batch_size=batch_size, trust_remote_code=trust_remote_code, max_length=max_length
    )
    if backend.prm_backend == TORCH:
        return torch_scorer()
    try:
        return _vllm_scorer(spec, backend, placement, trust_remote_code, max_length)
    except VLLMCannotServe as reason:
        scorer = torch_scorer()  # a spec that cannot load at all fails here, with the torch path's message
        log.warning("PRM %s: scored with torch: vLLM cannot serve it (%s)", spec, reason)
        return scorer


def _vllm_scorer(spec: str, backend: BackendConfig, placement: Placement, trust_remote_code: bool, max_length: int | None):
    kind, model = parse_spec(spec)
    try:  # what the PRM is, before vLLM is imported: a spec that cannot load fails on the torch path, with its message
        folder, sequences, reading, context, render_problem = prepare_pooling(kind, model, spec, trust_remote_code, max_length)
    except VLLMCannotServe:
        raise
    except Exception as error:  # PRMLoadError, and whatever a tokenizer raises
        raise VLLMCannotServe(str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__) from error
    try:
        from vllm import LLM
        from vllm.config import PoolerConfig
        from vllm.platforms import current_platform
    except ImportError as error:
        raise VLLMCannotServe(f"vLLM is not installed: {error}") from error
    if placement.device.type == "cpu" and not current_platform.is_cpu():
        raise VLLMCannotServe("--device cpu, and this vLLM runs on the GPU")
    step_tokens = max(context, 8192)  # on CPU, where there is no chunked prefill: a step holds the longest sequence, and more fit
    kv_gib = _kv_cache_gib(folder, step_tokens, trust_remote_code)
    kwargs, on_cpu = platform_engine_kwargs(folder, context, backend.prm_gpu_memory_utilization, cpu_kv_cache_gib=kv_gib)
    kwargs["max_model_len"] = context  # every sequence is cut to the PRM's max length before it is sent
    if on_cpu:
        kwargs["max_num_batched_tokens"] = step_tokens
    dtype = "bfloat16" if placement.precision in ("bf16", "bf16-mixed") else "float32"
    try:
        llm = LLM(
            model=folder,
            runner="pooling",
            dtype=dtype,
            trust_remote_code=trust_remote_code,
            pooler_config=PoolerConfig(task="token_classify", tok_pooling_type="ALL"),
            use_tqdm_on_load=logging.getLogger("vllm").isEnabledFor(logging.INFO),
            **reading.engine,
            **kwargs,
        )
    except Exception as error:  # vLLM raises many kinds for a model it cannot run (architecture, memory, config)
        raise VLLMCannotServe(f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else 'no message'}") from error
    scorer = VLLMStepScorer(llm, name=spec, sequences=sequences, reading=reading, render_problem=render_problem)
    register_engine(scorer, llm)
    return scorer


def _kv_cache_gib(model: str, tokens: int, trust_remote_code: bool) -> float:
    """The KV cache a PRM needs on CPU: one engine step's tokens (a pooling request ends in the step that
    reads it), twice over, in float32. Sized to the model rather than a fixed GiB: an engine in this
    process is only set aside while another lives in it (workers/vllm_generator.py shutdown_engine),
    and a fixed cache each would pile up in RAM."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(model, trust_remote_code=trust_remote_code).get_text_config()
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        per_token = 2 * config.num_hidden_layers * (getattr(config, "num_key_value_heads", None) or heads) * head_dim * 4
    except (OSError, ValueError, AttributeError, TypeError, ZeroDivisionError):
        return 1.0  # a config read otherwise: vLLM's needs are checked at its start
    return max(2 * tokens * per_token, 64 * 2**20) / 2**30
