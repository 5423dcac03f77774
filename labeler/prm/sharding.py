"""Fully sharded data parallel training (`labeler train --sharding fsdp`): torch's FSDP2.

    torchrun --nproc-per-node 8 -m labeler.cli train --labels OUT --output RUN --sharding fsdp

Each decoder layer of the backbone is its own unit and the rest of the PRM (embeddings, final norm,
heads) the root unit; every parameter, its gradient and its AdamW state are split across the
processes, and a unit's parameters are gathered whole only while it runs forward or backward (what
DeepSpeed calls ZeRO-3; transformers' Trainer and accelerate call the same `fully_shard` for FSDP2).
`fsdp-offload` keeps the shards in CPU memory between uses (CPUOffloadPolicy). The data order,
micro-batches and loss are those of `labeler.prm.distributed`'s data parallelism, so a sharded run
trains the model an unsharded one trains, up to the order of floating-point sums. Under
`--precision bf16-mixed` the layers are gathered in bfloat16 (MixedPrecisionPolicy; gradients
reduced in float32) rather than gathered in float32 and cast by autocast, whose bfloat16 copies of
every gathered weight would be kept for the backward pass: a whole model's worth in each process.
Gradients are reduced after every micro-batch (no accumulation unsharded), so no process ever holds
the whole model's gradients.

Checkpoints are gathered whole (a full state dict on process 0, through CPU memory), so best/ and
last/ are PRM folders every reader loads; last/'s training state holds the optimizer's full state
dict, which every process reads back into its shard on resume.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

log = logging.getLogger("labeler.train")

SCORING_METHOD = "step_and_trajectory_logits"  # what training and validation call instead of forward


def decoder_layers(backbone: nn.Module) -> list[nn.Module]:
    """The backbone's repeated blocks: the modules whose class transformers names in `_no_split_modules`."""
    names = set(getattr(backbone, "_no_split_modules", None) or ())
    return [module for module in backbone.modules() if type(module).__name__ in names]


def shard(prm: nn.Module, offload: bool, compute_dtype: torch.dtype | None = None) -> int:
    """Shard `prm` in place across the process group, a unit per decoder layer and the rest in the root;
    the number of layer units. `compute_dtype` (bf16-mixed's bfloat16): gather the weights in it, reduce the
    gradients in float32. The optimizer must be made after this (the parameters are replaced)."""
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard, register_fsdp_forward_method

    options = {"offload_policy": CPUOffloadPolicy()} if offload else {}
    if compute_dtype is not None:
        options["mp_policy"] = MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=torch.float32)
    layers = decoder_layers(prm.backbone)
    if not layers:
        log.warning("%s names no decoder layer class: the whole PRM is one FSDP unit (gathered whole at each step)", type(prm.backbone).__name__)
    for layer in layers:
        fully_shard(layer, **options)
    fully_shard(prm, **options)
    register_fsdp_forward_method(prm, SCORING_METHOD)  # its parameters are gathered for this method as for forward
    return len(layers)


def full_model_state(prm: nn.Module) -> dict[str, torch.Tensor]:
    """The whole state dict of a sharded PRM, on the CPU of process 0 (empty elsewhere); every process must call it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(prm, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def full_optimizer_state(prm: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """The optimizer's whole state dict (keyed by parameter names), on the CPU of process 0; every process must call it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    return get_optimizer_state_dict(prm, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def load_full_optimizer_state(prm: nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Each process takes its shard of a whole optimizer state dict that every process holds."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    set_optimizer_state_dict(prm, optimizer, optim_state_dict=state, options=StateDictOptions(full_state_dict=True))
