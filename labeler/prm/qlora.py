"""QLoRA for `labeler train --lora-rank R --load-in-4bit`: LoRA adapters (labeler.prm.lora) on a frozen 4-bit backbone.

transformers loads the backbone's linear layers quantized by bitsandbytes (`Linear4bit`: NF4 codes in blocks of 64
weights, each block's scale itself quantized to 8 bits, the "double quantization" of the QLoRA paper), computed in
bfloat16 under --precision bf16-mixed and float32 otherwise; the embeddings, norms and output layer load in the run's
weight dtype. peft wraps each 4-bit layer in its bnb LoRA layer; the adapters, the heads and the step-surprise weight
train in float32, as with LoRA.

A checkpoint holds the base DEQUANTIZED with the adapters merged: each adapted layer's weight
dequantize(W4) + (B @ A) x scaling, every other 4-bit layer's dequantize(W4), under the plain layer names and in the
dtype the base loaded in (float32 under fp32 and bf16-mixed), so `labeler score`/`eval`/`serve`, vLLM and
transformers load it as a full PRM with neither bitsandbytes nor peft. Dequantized, not --model's original weights:
the adapters and heads were trained on what the 4-bit layers compute, which is x @ dequantize(W4)^T exactly (the
layer dequantizes and multiplies), so the merged checkpoint scores as the model in training did; the original
weights differ from that by the quantization error, which the adapters trained around, and a merge into them would
be a model nobody trained or validated. The merge reads the state dict, out of place (the model in training is
never modified): a 4-bit weight's packed codes and its quantization state (`W.absmax`, `W.quant_map`,
`W.nested_absmax`, `W.nested_quant_map`, `W.quant_state.bitsandbytes__nf4`) become one float tensor, and an entry it
does not know fails the save rather than reach a checkpoint.

A resume quantizes --model again (the same weights give the same codes) and checks the frozen fingerprint: for a
4-bit weight, the sum of its dequantized values (its packed codes alone do not change when a block is rescaled).

On a CPU with AVX512-BF16, bitsandbytes (0.50) repacks a 4-bit layer in place, its block scales rounded to
bfloat16, the first time the layer runs in eval mode without gradients (validation, the warm-up passes): the frozen
base would change under the adapters mid-run and an exact resume would break. `settle` turns that repacking off.
"""

from __future__ import annotations

import torch
from torch import nn

QUANT_TYPE = "nf4"
_PACKED = "quant_state.bitsandbytes__"  # the entry that packs a quantization state's non-tensor fields (blocksize, shape, dtype, ...)
# What a bitsandbytes 4-bit weight W writes beside itself in a state dict (QuantState.as_dict(packed=True)), as W.<entry>
QUANT_STATE_ENTRIES = frozenset({"absmax", "quant_map", "nested_absmax", "nested_quant_map", f"{_PACKED}nf4", f"{_PACKED}fp4"})
_QUANTIZED_NAMES = ("absmax", "quant_map", "quant_state", "bitsandbytes__")  # what names a stray quantization entry


class QuantizationError(ValueError):
    """A 4-bit base cannot be built or saved as asked; the message is for the user."""


def four_bit_config(compute_dtype: torch.dtype):
    """transformers' BitsAndBytesConfig for QLoRA's base: NF4 with double quantization, computed in `compute_dtype`."""
    try:
        import bitsandbytes  # noqa: F401  (transformers would say less about a missing package)
        from transformers import BitsAndBytesConfig
    except ImportError as error:
        raise QuantizationError(f"--load-in-4bit needs the bitsandbytes package ({error}): pip install '.[train]'") from error
    return BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type=QUANT_TYPE, bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=compute_dtype
    )


def settle(model: nn.Module) -> int:
    """A model transformers just loaded with `four_bit_config`, made ready to train on: its 4-bit layers kept as they
    were loaded (no in-place CPU repacking), and transformers' quantizer detached, so that the model saves the state
    dict it is given and a config with no quantization in it. The number of 4-bit layers."""
    from bitsandbytes.nn import Linear4bit

    layers = [module for module in model.modules() if isinstance(module, Linear4bit)]
    if not layers:
        raise QuantizationError("--load-in-4bit: bitsandbytes quantized no linear layer of this model")
    from transformers.pytorch_utils import Conv1D

    transposed = sorted({layer.source_cls.__name__ for layer in layers if issubclass(getattr(layer, "source_cls", nn.Linear), Conv1D)})
    if transposed:  # GPT-2's Conv1D stores its weight transposed; the 4-bit copy is not, and the merge would save it so
        raise QuantizationError(f"--load-in-4bit: adapters on {', '.join(transposed)} layers are not supported (as with --lora-rank alone)")
    for layer in layers:
        layer.support_avx512bf16_for_cpu = False
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    return len(layers)


def is_four_bit(module: nn.Module) -> bool:
    """Whether `module` is bitsandbytes' 4-bit linear layer (without importing bitsandbytes where it is not in use)."""
    return type(module).__name__ == "Linear4bit" and type(module).__module__.startswith("bitsandbytes")


def weight_count(parameter: torch.Tensor) -> int:
    """The weights a parameter stands for: a 4-bit weight's as unpacked (two to a byte), any other's numel."""
    quant_state = getattr(parameter, "quant_state", None)
    return quant_state.shape.numel() if quant_state is not None else parameter.numel()


def frozen_values(parameter: torch.Tensor) -> torch.Tensor:
    """The values a frozen parameter computes with: a 4-bit weight's dequantized, any other's own."""
    quant_state = getattr(parameter, "quant_state", None)
    if quant_state is None:
        return parameter.detach()
    from bitsandbytes.functional import dequantize_4bit

    return dequantize_4bit(parameter.detach(), quant_state)


def dequantized_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`state` with each bitsandbytes 4-bit weight (its packed codes and quantization state entries) as one float
    tensor (on the CPU) under the weight's own name, in the dtype it was quantized from; QuantizationError for an entry of a 4-bit
    weight this does not know, or a quantization entry with no weight. A state without 4-bit weights comes back as it is."""
    packed = {key[: key.index(_PACKED) - 1] for key in state if _PACKED in key}  # the 4-bit weights' names
    refuse = "refusing to write it into a checkpoint"
    entries: dict[str, dict[str, torch.Tensor]] = {name: {} for name in packed}
    for key, value in state.items():
        owner = next((name for name in packed if key.startswith(name + ".")), None)
        if owner is not None:
            entry = key[len(owner) + 1 :]
            if entry not in QUANT_STATE_ENTRIES:
                known = ", ".join(sorted(QUANT_STATE_ENTRIES))
                raise QuantizationError(
                    f"{key}: an entry of 4-bit weight {owner} this merge does not know ({entry!r}; known: {known}); {refuse}"
                )
            entries[owner][entry] = value
        elif key not in packed and any(part in key for part in _QUANTIZED_NAMES):
            raise QuantizationError(f"{key}: a quantization entry with no 4-bit weight in the state; {refuse}")
        elif key not in packed and value.dtype == torch.uint8 and key.endswith(".weight"):
            raise QuantizationError(f"{key}: a packed (uint8) weight without its quantization state; {refuse}")
    missing = sorted(packed - state.keys())
    if missing:
        raise QuantizationError(f"{missing[0]}: quantization state with no 4-bit weight in the state; {refuse}")
    if not packed:
        return state
    from bitsandbytes.functional import QuantState, dequantize_4bit

    merged = {}
    for key, value in state.items():
        if key in packed:
            try:
                quant_state = QuantState.from_dict(dict(entries[key]), device=value.device)
            except (KeyError, ValueError, AssertionError) as error:
                raise QuantizationError(f"{key}: its quantization state is incomplete or unreadable ({error!r}); {refuse}") from error
            # one layer at a time on its device, kept on the CPU: a GPU that holds the 4-bit base need not hold it dequantized
            merged[key] = dequantize_4bit(value.detach(), quant_state).cpu()
        elif not any(key.startswith(name + ".") for name in packed):
            merged[key] = value
    return merged
