"""Where and in which precision the PRM runs: CPU with small models, a GPU when there is one.

Precisions: `fp32`; `bf16-mixed` (float32 weights, bfloat16 autocast: the usual choice on a GPU);
`bf16` (bfloat16 weights, half the memory; the step-score head stays float32); `auto` picks
bf16-mixed on a GPU that supports bfloat16, fp32 otherwise.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Placement:
    device: torch.device
    precision: str
    weight_dtype: torch.dtype
    autocast_dtype: torch.dtype | None

    def autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def describe(self) -> str:
        return f"{self.device} ({self.precision})"


def place(device: str = "auto", precision: str = "auto") -> Placement:
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available")
    target = torch.device(device)
    if precision == "auto":
        precision = "bf16-mixed" if target.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    if precision == "fp32":
        return Placement(target, precision, torch.float32, None)
    if precision == "bf16-mixed":
        return Placement(target, precision, torch.float32, torch.bfloat16)
    if precision == "bf16":
        return Placement(target, precision, torch.bfloat16, None)
    raise ValueError(f"unknown precision {precision!r}; expected auto, fp32, bf16-mixed or bf16")
