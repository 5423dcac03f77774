"""DeepSpeed ZeRO-3 training (`labeler train --sharding deepspeed`): the same loop on DeepSpeed's engine.

    torchrun --nproc-per-node 8 -m labeler.cli train --labels OUT --output RUN --sharding deepspeed

DeepSpeed splits every parameter, its gradient and its AdamW state across the processes and gathers
a layer's parameters whole only while it runs (ZeRO stage 3), as `--sharding fsdp` does with torch's
FSDP2; it is here for clusters whose recipes and kernels are DeepSpeed's. The trainer keeps its own
loop (data order, micro-batches, loss, learning-rate schedule, validation), so a ZeRO-3 run trains the
model an unsharded one trains: the engine takes the PRM's forward and backward and owns the optimizer
step, with gradient accumulation left to the loop (`managed_gradient_accumulation: false`: every
`step()` is a boundary, gradients are reduced to their shards after each backward), clipping at
--max-grad-norm, and under --precision bf16-mixed DeepSpeed's bf16 mode (bfloat16 weights, float32
master weights in the optimizer).

Checkpoints: best/ and last/ are whole PRM folders as every other run writes (each parameter's float32
master gathered to process 0), and last/ also holds DeepSpeed's own checkpoint of the partitioned
optimizer and master weights (last/deepspeed/, a file per process), which a resume on as many
processes loads; the launcher, not a DeepSpeed config file, sets the process count.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path

import torch
from torch import nn

CHECKPOINT_FOLDER = "deepspeed"  # inside last/: DeepSpeed's partitioned optimizer and master weights
TAG = "state"  # DeepSpeed's name for the one checkpoint that folder holds


class DeepSpeedUnavailable(RuntimeError):
    """DeepSpeed is not installed or cannot run here; the message says what to do."""


MINIMUM_VERSION = (0, 19, 4)  # the first with managed_gradient_accumulation under ZeRO-3; older ones ignore the key


def check_available(device_type: str) -> None:
    """Fail before any model is loaded: deepspeed importable, recent enough, and on the device the run asked for
    (DeepSpeed picks its accelerator itself: on a GPU machine it would move a --device cpu run's model to the GPU)."""
    accelerator = "cpu" if device_type == "cpu" else "cuda"
    chosen = os.environ.setdefault("DS_ACCELERATOR", accelerator)
    if chosen != accelerator:
        raise DeepSpeedUnavailable(f"DS_ACCELERATOR={chosen} but the run trains on {device_type}: unset it, or pass the matching --device")
    try:
        with contextlib.redirect_stdout(sys.stderr):  # its import logs to stdout
            import deepspeed
    except ImportError as error:
        raise DeepSpeedUnavailable(f"--sharding deepspeed needs the deepspeed package ({error}): pip install '.[train]'") from error
    version = tuple(int(part) for part in deepspeed.__version__.split("+")[0].split(".")[:3] if part.isdigit())
    if version < MINIMUM_VERSION:
        wanted = ".".join(map(str, MINIMUM_VERSION))
        raise DeepSpeedUnavailable(f"--sharding deepspeed needs deepspeed >= {wanted} (found {deepspeed.__version__}): pip install '.[train]'")


def engine(module: nn.Module, prm: nn.Module, optimizer: torch.optim.Optimizer, micro_batch: int, world_size: int,
           max_grad_norm: float, bf16: bool):  # fmt: skip
    """`module` (the PRM's forward as a module, holding `prm`) on a DeepSpeed ZeRO-3 engine with `optimizer`
    (the loop's AdamW, whose parameter groups carry the learning rates the loop sets at each step)."""
    import deepspeed
    from deepspeed.utils import logger as deepspeed_logger

    deepspeed_logger.setLevel(logging.WARNING)
    config = {
        "train_micro_batch_size_per_gpu": micro_batch,
        "gradient_accumulation_steps": 1,  # the loop accumulates: each step() ends one optimizer step
        "train_batch_size": micro_batch * world_size,  # DeepSpeed's bookkeeping only; the loop sets the real batch
        "managed_gradient_accumulation": False,
        "gradient_clipping": max_grad_norm,
        "zero_optimization": {"stage": 3},
        "bf16": {"enabled": bf16},
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }
    # Parameters of the PRM itself (the step-surprise weight) are read in its scoring method, not in a
    # submodule's forward: gathered with the wrapper's forward.
    for parameter in prm.parameters(recurse=False):
        deepspeed.zero.register_external_parameter(module, parameter)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # DeepSpeed prints its build notes; stdout is the command's result
            wrapped, _, _, _ = deepspeed.initialize(model=module, optimizer=optimizer, config=config, dist_init_required=False)
    except (ImportError, OSError, RuntimeError) as error:  # e.g. its CPU communication op could not be compiled
        raise DeepSpeedUnavailable(f"DeepSpeed could not start: {' '.join(str(error).split())[:600]}") from error
    return wrapped


def gathered_parameters(prm: nn.Module):
    """A context in which every parameter of the PRM itself (not its submodules') is whole: validation calls
    the PRM's scoring method directly, and its submodules gather their own."""
    import deepspeed

    return deepspeed.zero.GatheredParameters(list(prm.parameters(recurse=False)), modifier_rank=None)


def full_model_state(prm: nn.Module, is_main: bool) -> dict[str, torch.Tensor]:
    """The PRM's whole state dict on the CPU of process 0 (empty elsewhere), a parameter at a time: the
    optimizer's float32 master of each trained one (bf16 mode keeps the module's weights in bfloat16),
    the gathered weights of a frozen one (LoRA's base) in float32; every process must call it."""
    import deepspeed
    from deepspeed.utils import safe_get_full_fp32_param

    whole: dict[int, torch.Tensor] = {}
    for name, parameter in prm.named_parameters():  # each tensor once (tied weights share one)
        value = safe_get_full_fp32_param(parameter) if parameter.requires_grad else None
        if value is None:  # frozen (LoRA's base): no master; in bf16 mode its bfloat16 values, what the run computed with
            with deepspeed.zero.GatheredParameters([parameter], modifier_rank=None):
                value = parameter.data.clone()
            if value.is_floating_point():  # float32, so that adapters merged into it are not rounded to bfloat16
                value = value.float()
        if is_main:
            whole[id(parameter)] = value.detach().to("cpu", copy=True)
        del value
    if not is_main:
        return {}
    parameters = dict(prm.named_parameters(remove_duplicate=False))  # a tied weight under each of its names
    return {
        name: whole[id(parameters[name])] if name in parameters else tensor.detach().cpu()  # buffers are not partitioned
        for name, tensor in prm.state_dict().items()
    }


def save(wrapped, folder: Path) -> None:
    """DeepSpeed's checkpoint of this process's partitions into `folder` (every process must call it)."""
    wrapped.save_checkpoint(str(folder), tag=TAG, save_latest=False)


def load(wrapped, folder: Path) -> None:
    """Each process reads back its partitions of the optimizer and master weights saved by `save`."""
    if not (folder / TAG).is_dir():
        raise FileNotFoundError(f"{folder / TAG}: the saved run holds no DeepSpeed checkpoint to resume from")
    loaded, _ = wrapped.load_checkpoint(
        str(folder), tag=TAG, load_module_strict=True, load_optimizer_states=True, load_lr_scheduler_states=False
    )
    if loaded is None:
        raise FileNotFoundError(f"{folder / TAG}: DeepSpeed could not read its checkpoint")
