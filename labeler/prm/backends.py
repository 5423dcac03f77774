"""Which engine runs a PRM's forward passes, declared once for every command that scores.

    vllm    vLLM's pooling runner (workers/vllm_scorer.py): continuous batching and vLLM's kernels, on
            one device. Each kind of PRM is read as its torch adapter reads it, from the same token
            ids: our checkpoints (format 2) and math-shepherd/rlhflow PRMs as token classifiers, a Qwen
            PRM through vLLM's Qwen2ForProcessRewardModel. A PRM vLLM cannot serve (a checkpoint
            saved before format 2, a Qwen PRM with another head, an architecture vLLM lacks) is scored
            with torch, with one line on stderr saying why.
    torch   a transformers forward pass in this process (labeler/prm/scoring.py and the adapters).

The two give the same step scores within float error (tests/test_vllm_scorer.py: 1e-3).
"""

from __future__ import annotations

from dataclasses import dataclass

from labeler.labeling.config import check_choices, check_numbers, setting

PRM_BACKENDS = ("vllm", "torch")
PRM = "PRM"  # the --help section, as labeler/rewards/config.py names it
VLLM, TORCH = PRM_BACKENDS


@dataclass(frozen=True)
class BackendConfig:
    prm_backend: str = setting(
        VLLM,
        choices=PRM_BACKENDS,
        help="what runs the PRM: vllm (its pooling runner; a PRM it cannot serve falls back to torch with a line "
        "saying why) or torch (a transformers forward pass)",
        group=PRM,
    )
    prm_gpu_memory_utilization: float = setting(
        0.9,
        above=0,
        at_most=1,
        metavar="F",
        help="--prm-backend vllm on a GPU: the share of GPU memory the PRM's engine takes (lower it where a "
        "generator holds the same GPU, as in `labeler search`)",
        group=PRM,
    )

    def __post_init__(self):
        check_choices(self)
        check_numbers(self)
