"""Data-parallel training: one process per device under torchrun (NCCL on GPUs, gloo on CPUs).

    torchrun --nproc-per-node 8 -m labeler.cli train --labels OUT --output RUN --device cuda

Every process reads the same labels, split and epoch order; an optimizer step takes the next
`gradient_accumulation_steps x processes` micro-batches and process r trains the r-th, the
(r + processes)-th, ... of them; DistributedDataParallel averages the gradients. So a run on P
processes trains the model a single process trains with P times the accumulation. Process 0
alone validates, logs, writes metrics and checkpoints. Without torchrun (WORLD_SIZE unset or 1)
nothing here does anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch


@dataclass
class Processes:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))  # where collective operations put their tensors
    started_here: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @classmethod
    def from_environment(cls, device_type: str) -> Processes:
        """This process's place among torchrun's (RANK, LOCAL_RANK, WORLD_SIZE), joining the process group."""
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size <= 1:
            return cls()
        import torch.distributed as dist

        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        device = torch.device("cuda", local_rank) if device_type == "cuda" else torch.device("cpu")
        if device.type == "cuda":
            torch.cuda.set_device(device)
        started = not dist.is_initialized()
        if started:
            dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
        return cls(dist.get_rank(), local_rank, dist.get_world_size(), device, started)

    def sum(self, values: list[float]) -> list[float]:
        """The sums of `values` over all processes (the values themselves when there is one)."""
        if not self.distributed:
            return list(values)
        import torch.distributed as dist

        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor)
        return tensor.tolist()

    def most(self, value: int) -> int:
        """The largest of every process's `value` (the value itself when there is one)."""
        if not self.distributed:
            return value
        import torch.distributed as dist

        tensor = torch.tensor([value], dtype=torch.int64, device=self.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return int(tensor.item())

    def broadcast(self, value):
        """Process 0's `value` (a picklable object), on every process."""
        if not self.distributed:
            return value
        import torch.distributed as dist

        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, value) -> list:
        """Every process's `value` (picklable), by rank, on process 0 (an empty list elsewhere); all must call it."""
        if not self.distributed:
            return [value]
        import torch.distributed as dist

        gathered = [None] * self.world_size if self.is_main else None
        dist.gather_object(value, gathered, dst=0)
        return gathered or []

    def barrier(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            dist.barrier()

    def close(self) -> None:
        if self.started_here:
            import torch.distributed as dist

            dist.destroy_process_group()
