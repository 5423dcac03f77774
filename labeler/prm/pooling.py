"""What a vLLM pooling server or engine needs to score a PRM's steps, without vLLM itself: how each kind of PRM
is rendered to token ids, and how its per-token logits become P(step is right). Shared by the in-process
engine (workers/vllm_scorer.py) and the client of a `vllm serve` process (labeler/prm/pooling_client.py).

    checkpoint   our format-2 folder is a *ForTokenClassification: sigmoid of column 0 ("step") after
                 each step, sigmoid of column 1 ("trajectory") after the last, when it has that head
    qwen-prm     vLLM's Qwen2ForProcessRewardModel: softmax over its two classes, class 1
    math-shepherd, rlhflow
                 the causal LM converted to a token classifier whose two rows are the output layer's
                 rows of the "+" and "-" tokens (vLLM's `classifier_from_token`, no post-processing):
                 softmax over the two, column 0
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from labeler.prm.scorers import CHECKPOINT, checkpoint_folder

REQUESTS_PER_CALL = 1024  # solutions per encode call (or request): bounds the per-token outputs held at once


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


def pooled_scores(
    solutions: Sequence, sequences: list[tuple[list[int], list[int], int | None]], reading: Reading,
    encode: Callable[[list[list[int]]], list[torch.Tensor]], shape_error: Callable[[str, tuple, int], Exception],
) -> list[tuple[list[float | None], float | None]]:  # fmt: skip
    """Each solution's step probabilities (None for steps past its sequence's score positions) and trajectory
    probability (None without one), read from the per-token logits [tokens, classes] that `encode` returns for
    each token-id list it is given, in order, REQUESTS_PER_CALL at a time. A solution with no tokens or no score
    position is not sent. Logits that are not one row per token raise shape_error(solution id, shape, tokens)."""
    results: list[tuple[list[float | None], float | None]] = [([None] * len(s.steps), None) for s in solutions]
    wanted = [i for i, (ids, positions, _) in enumerate(sequences) if ids and positions]
    for start in range(0, len(wanted), REQUESTS_PER_CALL):
        chunk = wanted[start : start + REQUESTS_PER_CALL]
        for i, logits in zip(chunk, encode([sequences[i][0] for i in chunk]), strict=True):
            ids, positions, trajectory_position = sequences[i]
            if logits.dim() != 2 or logits.shape[0] != len(ids):
                raise shape_error(solutions[i].solution_id, tuple(logits.shape), len(ids))
            steps = reading.step_probability(logits[positions]).tolist()
            trajectory = None
            if reading.trajectory_column is not None and trajectory_position is not None:
                trajectory = torch.sigmoid(logits[trajectory_position, reading.trajectory_column].float()).item()
            results[i] = (steps + [None] * (len(solutions[i].steps) - len(steps)), trajectory)
    return results


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
