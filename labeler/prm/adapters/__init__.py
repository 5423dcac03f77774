"""Adapters that score steps with public PRMs, each in its own published format, behind the
`StepScorer` interface of `labeler.prm.scorers` (where the specs that name them are documented):

    math_shepherd.py   math-shepherd:MODEL   causal LM, P("+") vs "-" at each "ки" step tag
    rlhflow.py         rlhflow:MODEL         causal LM chat, P("+") vs "-" as the assistant's answer to each step
    qwen_prm.py        qwen-prm:MODEL        Qwen2 backbone + two-class head at each "<extra_0>" separator

What they share: `loading.py` (what a spec may point at, loading without remote code unless it is
allowed) and `positions.py` (one forward pass per batch, a probability read at one token per step).
"""

from __future__ import annotations

from labeler.prm.devices import Placement

# How each adapter reads its PRM, versioned: part of the score cache's key (labeler/decoding/prm_scores.py),
# so that scores an older reading kept are scored again. Bump an adapter's when its scores change.
SCORING_VERSIONS = {
    "math-shepherd": 4,  # 2: the "+"/"-" and tag token ids as the model card takes them; 3: "ки" kept inside words;
    # 4: a "ки" dropped from a step only where it stands alone at a step's end (KI_TAGS), not before a comma or a mark
    "rlhflow": 1,
    "qwen-prm": 1,
}
CHECKPOINT_SCORING_VERSION = 1  # this project's own trained PRMs (checkpoint:DIR)


def load_public_scorer(
    kind: str, model: str, *, placement: Placement, batch_size: int, trust_remote_code: bool, max_length: int | None, name: str,
    weights: bool = True,
):  # fmt: skip
    """The adapter of `kind`, loaded; weights=False: its rendering alone (tokenizer and format checks), for vLLM."""
    if kind == "math-shepherd":
        from labeler.prm.adapters.math_shepherd import MathShepherdScorer as scorer_class
    elif kind == "rlhflow":
        from labeler.prm.adapters.rlhflow import RLHFlowScorer as scorer_class
    elif kind == "qwen-prm":
        from labeler.prm.adapters.qwen_prm import QwenPRMScorer as scorer_class
    else:
        raise ValueError(f"no adapter for PRM kind {kind!r}")
    return scorer_class.load(
        model, placement=placement, batch_size=batch_size, trust_remote_code=trust_remote_code, max_length=max_length, name=name,
        weights=weights,
    )  # fmt: skip
