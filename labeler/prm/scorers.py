"""Step scorers: anything that gives each step of a solution a probability of being on track.

One interface for every PRM a command can use (`labeler score`, `eval`, and the uses of a PRM built
on them), so a trained checkpoint of ours and a public PRM behind an adapter score side by side:

    scorer = load_scorer("runs/prm/best", placement=place("auto", "auto"))
    scorer = load_scorer("qwen-prm:Qwen/Qwen2.5-Math-PRM-7B", placement=place("cuda", "bf16"))
    scores = scorer.step_scores(solutions)   # one list per solution, None for unscored steps

A spec is `[KIND:]MODEL`; MODEL is a local folder or, for the public formats, a hub id:

    DIR                    a folder saved by `labeler train`: a checkpoint (RUN/best, RUN/last) or a
    checkpoint:DIR         run folder (its best/); the same with the kind spelled out
    math-shepherd:MODEL    Math-Shepherd's format (peiyi9979/math-shepherd-mistral-7b-prm): a causal
                           LM reading "Step i: ... ки" tags; score = P("+") against "-" at each tag
    rlhflow:MODEL          RLHFlow's (RLHFlow/Llama3.1-8B-PRM-Deepseek-Data): a chat, each step a user
                           turn, the assistant answering "+" or "-"; score = P("+") against "-"
    qwen-prm:MODEL         Qwen2.5-Math-PRM's (Qwen/Qwen2.5-Math-PRM-7B): steps joined by "<extra_0>",
                           a two-class head at each separator; score = softmax class 1
    logprob:MODEL          no PRM, no training: a causal LM (e.g. the completer) reads the solution as a
                           step-surprise PRM does (labeler.prm.model); score = the probability it gave
                           the least likely token of the step: the baseline labels must beat

A spec of the wrong kind (a causal LM given as qwen-prm, a Qwen PRM or our checkpoint given as
math-shepherd, a tokenizer without the format's tokens) is refused with a message that names the
kind to use. Remote code runs only with trust_remote_code (`--trust-remote-code`); the Qwen PRM's
head is implemented here, so it loads without. The adapters live in `labeler.prm.adapters`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from labeler.evaluation.solutions import SolutionToScore

if TYPE_CHECKING:  # torch is imported where a PRM is loaded: the CLI builds its flags from PRM_SPEC_HELP without it
    from labeler.prm.devices import Placement
    from labeler.prm.model import ProcessRewardModel

PRM_CONFIG_NAME = "prm.json"  # as labeler.prm.model names it (tests/test_prm_adapters.py checks they agree)

CHECKPOINT = "checkpoint"
# kind -> what it reads, for --help texts and error messages
SCORER_KINDS = {
    CHECKPOINT: "a folder saved by `labeler train` (the default when no kind is given)",
    "math-shepherd": "Math-Shepherd's format: 'ки' step tags, P('+') against '-' (e.g. peiyi9979/math-shepherd-mistral-7b-prm)",
    "rlhflow": "RLHFlow's format: a chat of user steps answered '+' or '-' (e.g. RLHFlow/Llama3.1-8B-PRM-Deepseek-Data)",
    "qwen-prm": "Qwen2.5-Math-PRM's format: '<extra_0>' separators, a two-class head (e.g. Qwen/Qwen2.5-Math-PRM-7B)",
    "logprob": "no PRM: a causal LM's own lowest token log-probability in each step, the baseline a trained PRM must beat",
}
LOGPROB = "logprob"
LOGPROB_MAX_LENGTH = 4096  # tokens a logprob baseline reads per solution unless --max-length says otherwise
PRM_SPEC_HELP = (
    "a folder saved by `labeler train` (RUN/best, or RUN for its best/), or KIND:MODEL for a public PRM: "
    "KIND math-shepherd, rlhflow or qwen-prm, MODEL a hub id or folder; or logprob:MODEL, a causal LM's own lowest "
    "token log-probability per step (no PRM: the baseline a trained one must beat)"
)


class StepScorer(Protocol):
    name: str  # how reports and tables name this scorer

    def step_scores(self, solutions: Sequence[SolutionToScore]) -> list[list[float | None]]:
        """Per solution, a probability per step, in order; None for a step it could not score
        (past its length limit). Results come back in the order of `solutions`."""
        ...


class CheckpointScorer:
    """A PRM trained by `labeler train`."""

    link = None  # a step logit to a probability: None, sigmoid

    def __init__(self, prm: ProcessRewardModel, placement: Placement, batch_size: int = 8, name: str | None = None):
        self.prm = prm.to(placement.device)
        self.placement = placement
        self.batch_size = batch_size
        self.name = name or prm.settings.base_model

    def step_scores(self, solutions: Sequence[SolutionToScore]) -> list[list[float | None]]:
        from labeler.prm.scoring import checkpoint_step_scores

        return checkpoint_step_scores(self.prm, solutions, self.placement, self.batch_size, self.link)

    def step_and_trajectory_scores(self, solutions: Sequence[SolutionToScore]) -> list[tuple[list[float | None], float | None]]:
        """Step scores and the trajectory score (None without a trajectory head), from one forward pass."""
        from labeler.prm.scoring import checkpoint_scores

        return checkpoint_scores(self.prm, solutions, self.placement, self.batch_size, self.link)


def backend_of(scorer) -> str:
    """What runs a scorer's PRM: "vllm" for the vLLM backend's scorers, else "torch"."""
    return getattr(scorer, "backend", "torch")


def render_problem(scorer, solution: SolutionToScore) -> str | None:
    """Why `scorer` cannot show `solution` to its PRM with one score position per step (its text holds the
    format's own marker: labeler/prm/adapters/positions.py); None when it can, or the scorer renders every
    solution (our checkpoints)."""
    check = getattr(scorer, "render_problem", None)
    return None if check is None else check(solution)


def release(scorer) -> None:
    """Stop the engine a scorer holds, if it holds one (the vLLM backend's); a torch scorer is left to
    the garbage collector."""
    close = getattr(scorer, "close", None)
    if close is not None:
        close()


def checkpoint_folder(path: str) -> str:
    """A run folder stands for its best checkpoint."""
    best = os.path.join(path, "best")
    return best if not os.path.isfile(os.path.join(path, PRM_CONFIG_NAME)) and os.path.isdir(best) else path


def logprob_baseline(model: str, placement: Placement, trust_remote_code: bool = False, max_length: int | None = None) -> ProcessRewardModel:
    """A step-surprise PRM whose head says nothing (weights and bias 0, surprise weight 1): its step logit is
    the model's lowest token log-probability in the step, read in the chat rendering where it has a template,
    at most `max_length` tokens (default: the model's context, at most LOGPROB_MAX_LENGTH)."""
    import torch

    from labeler.prm.model import ProcessRewardModel, declared_context

    if max_length is None:
        from transformers import AutoConfig

        try:
            context = declared_context(AutoConfig.from_pretrained(model, trust_remote_code=trust_remote_code))
        except (OSError, ValueError) as error:
            from labeler.prm.model import PRMLoadError

            raise PRMLoadError(f"cannot load model {model}: {str(error).splitlines()[0]}") from error
        max_length = min(context or LOGPROB_MAX_LENGTH, LOGPROB_MAX_LENGTH)
    prm = ProcessRewardModel.from_backbone(
        model, max_length=max_length, target="soft", dtype=placement.weight_dtype, trust_remote_code=trust_remote_code, step_surprise=True,
    )  # fmt: skip
    with torch.no_grad():
        prm.head.weight.zero_()
        prm.head.bias.zero_()
    return prm.eval()


def _probability_of_log(x: float) -> float:
    return math.exp(min(0.0, x))


class LogprobScorer(CheckpointScorer):
    """`logprob:MODEL`: each step's score is the probability the model gave the least likely token of the step,
    exp(lowest log-probability), so a step is called wrong (at eval's 0.5) when it holds a token the model
    thought less likely than not. No trajectory score (its PRM has no trajectory head)."""

    link = staticmethod(_probability_of_log)


def stored_threshold(spec: str) -> float | None:
    """The first-error threshold a checkpoint of ours chose on its validation split (its prm.json's
    `threshold`); None for a public PRM, a checkpoint without one, or a spec that names no checkpoint."""
    import json

    kind, model = parse_spec(spec)
    if kind != CHECKPOINT:
        return None
    path = os.path.join(checkpoint_folder(model), PRM_CONFIG_NAME)
    try:
        with open(path) as handle:
            value = json.load(handle).get("threshold")
    except (OSError, ValueError, AttributeError):
        return None  # loading the scorer says what is wrong with the folder
    return value if isinstance(value, (int, float)) and 0 <= value <= 1 else None


def parse_spec(spec: str) -> tuple[str, str]:
    """(kind, model) of a spec; PRMLoadError for an unknown kind or an empty model."""
    from labeler.prm.model import PRMLoadError

    kind, colon, model = spec.partition(":")
    if colon and kind in SCORER_KINDS:
        if not model:
            raise PRMLoadError(f"{spec}: no model after '{kind}:'")
        return kind, model
    if colon and re.fullmatch(r"[a-z][a-z0-9.-]*", kind) and not os.path.exists(spec):
        raise PRMLoadError(f"{spec}: unknown PRM kind {kind!r}; expected one of {', '.join(SCORER_KINDS)}")
    return CHECKPOINT, spec


def load_scorer(
    spec: str, *, placement: Placement, batch_size: int = 8, trust_remote_code: bool = False, max_length: int | None = None
) -> StepScorer:
    """The scorer a spec names; PRMLoadError (a ValueError) with a message for the user when it cannot load.
    `max_length` caps the tokens a public PRM reads per solution (default: its context length); a
    checkpoint of ours keeps the max length it was trained with."""
    from labeler.prm.model import PRMLoadError, ProcessRewardModel

    kind, model = parse_spec(spec)
    if kind == CHECKPOINT:
        folder = checkpoint_folder(model)
        if not os.path.isfile(os.path.join(folder, PRM_CONFIG_NAME)) and os.path.isfile(os.path.join(folder, "last", PRM_CONFIG_NAME)):
            raise PRMLoadError(
                f"{model}: a training run with no best/ checkpoint yet (best/ is written when an epoch ends; the run "
                f"stopped before its first epoch ended (--max-steps, or interrupted)); pass {os.path.join(model, 'last')} "
                "to score its last checkpoint"
            )
        if not os.path.isfile(os.path.join(folder, PRM_CONFIG_NAME)) and os.path.isfile(os.path.join(folder, "config.json")):
            raise PRMLoadError(
                f"{folder}: not a saved PRM (no {PRM_CONFIG_NAME}) but a transformers model; a public PRM is named by "
                f"its format: math-shepherd:{model}, rlhflow:{model} or qwen-prm:{model}"
            )
        prm = ProcessRewardModel.load(folder, dtype=placement.weight_dtype, trust_remote_code=trust_remote_code)
        return CheckpointScorer(prm, placement, batch_size, name=spec)
    if kind == LOGPROB:
        return LogprobScorer(logprob_baseline(model, placement, trust_remote_code, max_length), placement, batch_size, name=spec)
    from labeler.prm.adapters import load_public_scorer

    return load_public_scorer(
        kind, model, placement=placement, batch_size=batch_size, trust_remote_code=trust_remote_code, max_length=max_length, name=spec
    )
