"""LoRA for `labeler train --lora-rank R`: low-rank adapters (peft) in the PRM's backbone.

peft injects into each targeted linear layer of the backbone a pair A (R x in) and B (out x R), B
starting at 0, so the layer computes W x + (B A x) x scaling, scaling = alpha / R; W stays frozen
and only A, B and the PRM's heads (and step-surprise weight) train. The optimizer then holds state
for a few million numbers instead of billions.

A checkpoint holds the adapters merged: each W + (B A) x scaling under the layer's own name, so
`labeler score`/`eval`/`bon`/`serve` and vLLM load it as any full PRM, with no peft. The merge is
computed from the state dict, out of place: the model in training is never merged and unmerged (which
would round its weights and break an exact resume). A resumed run rebuilds the backbone from --model
and takes the adapters and heads from last/'s training state, exactly as they were.

With --load-in-4bit (QLoRA) the frozen base is 4-bit: labeler.prm.qlora loads it, dequantizes it for the merge and
fingerprints it.
"""

from __future__ import annotations

import torch
from torch import nn

from labeler.prm.qlora import dequantized_state, frozen_values, is_four_bit

ADAPTER = "default"  # peft's adapter name
_A, _B, _BASE = f".lora_A.{ADAPTER}.weight", f".lora_B.{ADAPTER}.weight", ".base_layer.weight"


class LoRAError(ValueError):
    """LoRA cannot be put on this backbone as asked; the message is for the user."""


def add_adapters(backbone: nn.Module, rank: int, alpha: float, dropout: float, target_modules: str, also_frozen: tuple[nn.Module, ...] = ()) -> int:
    """Inject LoRA adapters into `backbone` in place and freeze everything else in it and in `also_frozen` (the
    causal LM's output layer, which a step-surprise PRM reads); the number of adapted layers. `target_modules`:
    "all-linear" or comma-separated module names."""
    try:
        from peft import LoraConfig, inject_adapter_in_model
        from peft.tuners.lora import LoraLayer
    except ImportError as error:
        raise LoRAError(f"--lora-rank needs the peft package ({error}): pip install '.[train]'") from error

    names = [name.strip() for name in target_modules.split(",") if name.strip()]
    targets = "all-linear" if [name.lower() for name in names] == ["all-linear"] else names
    config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules=targets, bias="none")
    if any(is_four_bit(module) for module in backbone.modules()):  # QLoRA: peft's cue to wrap them in its bnb LoRA layer
        backbone.is_loaded_in_4bit = True
    try:
        inject_adapter_in_model(config, backbone, adapter_name=ADAPTER)
    except ValueError as error:  # peft's "Target modules ... not found in the base model", or a module it cannot adapt
        reason = " ".join(str(error).split())
        raise LoRAError(f"--lora-target-modules {target_modules}: {reason[:400]}") from error
    adapted = [name for name, module in backbone.named_modules() if isinstance(module, LoraLayer)]
    if targets != "all-linear":  # peft adapts what matches and passes over a name that matches nothing
        unmatched = [name for name in targets if not any(path == name or path.endswith(f".{name}") for path in adapted)]
        if unmatched:
            raise LoRAError(f"--lora-target-modules: no layer of the backbone is named {', '.join(unmatched)}")
    layers = [module for module in backbone.modules() if isinstance(module, LoraLayer)]
    odd = sorted({type(module.get_base_layer()).__name__ for module in layers if not isinstance(module.get_base_layer(), nn.Linear)})
    if odd:  # Conv1D (GPT-2) stores its weight transposed: the merge below is written for nn.Linear
        raise LoRAError(f"--lora-rank: adapters on {', '.join(odd)} layers are not supported; name nn.Linear modules with --lora-target-modules")
    for module in also_frozen:
        module.requires_grad_(False)
    for name, parameter in backbone.named_parameters():
        parameter.requires_grad_(".lora_A." in name or ".lora_B." in name)
    return len(layers)


def merged_state(state: dict[str, torch.Tensor], scaling: float) -> dict[str, torch.Tensor]:
    """A state dict with LoRA adapters (peft's names) as the plain model's: each adapted layer's weight
    W + (B @ A) x scaling in W's dtype, computed in float32, under the layer's own name; the adapters
    dropped. A 4-bit (QLoRA) W is dequantized first (labeler.prm.qlora), its quantization entries refused
    where unknown, never written. A state without adapters comes back as it is."""
    state = dequantized_state(state)
    merged = {}
    for key, value in state.items():
        if ".lora_A." in key or ".lora_B." in key:
            continue
        if key.endswith(_BASE):
            stem = key[: -len(_BASE)]
            a, b = state[stem + _A].to(value.device), state[stem + _B].to(value.device)  # W: on the CPU where it was 4-bit
            merged[stem + ".weight"] = (value.float() + (b.float() @ a.float()) * scaling).to(value.dtype)
        else:
            merged[key.replace(".base_layer.", ".")] = value
    return merged


def frozen_fingerprint(module: nn.Module) -> list[float]:
    """Per frozen parameter, the sum of its values (float64; a 4-bit weight's dequantized values): a LoRA resume rebuilds
    the frozen base from --model, and this tells it whether that is still the base the adapters were trained on (a hub
    id updated since, ...)."""
    with torch.no_grad():
        return [float(frozen_values(p).sum(dtype=torch.float64)) for p in module.parameters() if not p.requires_grad]


def trainable_names(module: nn.Module) -> list[str]:
    """The names of the parameters that train, as `module.state_dict()` spells them."""
    return [name for name, parameter in module.named_parameters() if parameter.requires_grad]
