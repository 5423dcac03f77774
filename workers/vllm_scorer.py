"""Step scores from vLLM's pooling runner: the `vllm` PRM backend (labeler/prm/backends.py).

A solution is rendered to token ids exactly as the torch path renders it (the same adapter, or our
checkpoint's rendering, loaded without weights), sent to vLLM as token ids, and vLLM returns the
raw per-token logits of the PRM's classifier (token_classify with ALL pooling and no activation);
the scores are read at the same positions and turned into probabilities the same way:

    checkpoint   our format-2 folder is a *ForTokenClassification: sigmoid of column 0 ("step") after
                 each step, sigmoid of column 1 ("trajectory") after the last, when it has that head
    qwen-prm     vLLM's Qwen2ForProcessRewardModel: softmax over its two classes, class 1
    math-shepherd, rlhflow
                 the causal LM converted to a token classifier whose two rows are the output layer's
                 rows of the "+" and "-" tokens (vLLM's `classifier_from_token`, no post-processing):
                 softmax over the two, column 0

Reading every token (ALL pooling) rather than vLLM's STEP pooling keeps the positions ours: a step
tag can also occur where no step ends (the blank line after our problem text).

    scorer = load_step_scorer("qwen-prm:Qwen/Qwen2.5-Math-PRM-7B", BackendConfig(), placement=place("cuda", "bf16"))
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from labeler.evaluation.solutions import SolutionToScore
from labeler.prm.backends import TORCH, BackendConfig
from labeler.prm.devices import Placement
from labeler.prm.scorers import CHECKPOINT, StepScorer, checkpoint_folder, load_scorer, parse_spec
from workers.vllm_generator import platform_engine_kwargs, register_engine, shutdown_engine

log = logging.getLogger("labeler.score")
REQUESTS_PER_CALL = 1024  # solutions per encode call: bounds the per-token outputs held at once


class VLLMCannotServe(Exception):
    """vLLM cannot run this PRM; the message says why (the caller scores with torch instead)."""


@dataclass(frozen=True)
class Reading:
    """How vLLM runs a kind of PRM, and how its per-token logits become P(step is right)."""

    engine: dict  # LLM keyword arguments besides the platform's (convert, hf_overrides)
    step_probability: Callable[[torch.Tensor], torch.Tensor]  # logits [n, classes] -> [n]
    trajectory_column: int | None = None  # our checkpoints with a trajectory head: its logit's column


def _softmax_column(column: int):
    return lambda logits: torch.softmax(logits.float(), dim=-1)[:, column]


def _sigmoid_column(column: int):
    return lambda logits: torch.sigmoid(logits[:, column].float())


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

        sequences = self._sequences(solutions)
        results: list[tuple[list[float | None], float | None]] = [([None] * len(s.steps), None) for s in solutions]
        wanted = [i for i, (ids, positions, _) in enumerate(sequences) if ids and positions]
        params = PoolingParams(use_activation=False)  # raw logits: the probability is read as the torch path reads it
        for start in range(0, len(wanted), REQUESTS_PER_CALL):
            chunk = wanted[start : start + REQUESTS_PER_CALL]
            outputs = self.llm.encode(
                [TokensPrompt(prompt_token_ids=sequences[i][0]) for i in chunk], params, pooling_task="token_classify", use_tqdm=False
            )
            for i, output in zip(chunk, outputs, strict=True):
                ids, positions, trajectory_position = sequences[i]
                logits = output.outputs.data
                if logits.shape[0] != len(ids):
                    raise RuntimeError(f"vLLM returned {logits.shape[0]} token outputs for {len(ids)} tokens of solution {solutions[i].solution_id}")
                steps = self.reading.step_probability(logits[positions]).tolist()
                trajectory = None
                if self.reading.trajectory_column is not None and trajectory_position is not None:
                    trajectory = torch.sigmoid(logits[trajectory_position, self.reading.trajectory_column].float()).item()
                results[i] = (steps + [None] * (len(solutions[i].steps) - len(steps)), trajectory)
        return results

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


def prepare_pooling(kind: str, model: str, spec: str, trust_remote_code: bool, max_length: int | None):
    """(the folder vLLM loads, how to render solutions, how to read the logits, the context length, the
    adapter's render check: None for our checkpoints, which render every solution)."""
    from labeler.prm.adapters import load_public_scorer
    from labeler.prm.devices import place

    if kind == CHECKPOINT:
        return (*_checkpoint(model, trust_remote_code), None)
    if kind == "logprob":
        raise VLLMCannotServe("the logprob baseline reads token log-probabilities, which vLLM's pooling runner does not give; --prm-backend torch says so quietly")
    renderer = load_public_scorer(
        kind, model, placement=place("cpu", "fp32"), batch_size=1, trust_remote_code=trust_remote_code, max_length=max_length, name=spec,
        weights=False,
    )  # fmt: skip
    sequences = lambda solutions: [(ids, positions, None) for ids, positions, _ in renderer.sequences(solutions)]
    if kind == "qwen-prm":
        reading = Reading({}, _softmax_column(1))
    else:  # math-shepherd, rlhflow: the output layer's rows of the good and bad tokens, as vLLM names them
        tokens = renderer.tokenizer.convert_ids_to_tokens(renderer.token_ids)
        reading = Reading({"convert": "classify", "hf_overrides": {"classifier_from_token": tokens, "method": "no_post_processing"}}, _softmax_column(0))
    return model, sequences, reading, renderer.max_length, renderer.render_problem


def _checkpoint(model: str, trust_remote_code: bool):
    from transformers import AutoTokenizer

    from labeler.prm.model import LABELS, declared_context, read_settings
    from labeler.prm.scoring import checkpoint_sequences

    folder = checkpoint_folder(model)
    settings = read_settings(folder)
    if settings.step_surprise:
        raise VLLMCannotServe(
            f"{folder} has a step-surprise term (it reads its language model's token log-probabilities, which vLLM's "
            "pooling runner does not give); train with --no-step-surprise for a PRM vLLM serves"
        )
    if settings.format_version < 2:
        raise VLLMCannotServe(
            f"{folder} was saved in format {settings.format_version}, not as a token classifier (saved before 2026-12-04, "
            "or its backbone has no token classifier with a `score` head in transformers)"
        )
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code)
    from transformers import AutoConfig

    # a PRM saved with a max length past its backbone's context (before 2026-12-06) reads no further than the
    # context, as ProcessRewardModel.load reads it: sequences are cut there and the engine is sized to it
    context = declared_context(AutoConfig.from_pretrained(folder, trust_remote_code=trust_remote_code))
    max_length = min(settings.max_length, context or settings.max_length)
    sequences = lambda solutions: checkpoint_sequences(tokenizer, max_length, solutions, settings.rendering)
    trajectory = LABELS.index("trajectory") if settings.trajectory_head else None
    return folder, sequences, Reading({}, _sigmoid_column(LABELS.index("step")), trajectory), max_length


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
