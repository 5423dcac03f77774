"""Memory per process of `labeler train` for a backbone, before activations, checked against accelerate's estimate.

    .venv/bin/python bench/train_memory.py --model Qwen/Qwen2.5-Math-7B-Instruct --processes 8   # reads the config alone
    .venv/bin/python bench/train_memory.py --model DIR --processes 8 --lora-rank 16

The PRM is built on the meta device from the model's config (no weights are read; a hub id needs the
network, a folder does not): the whole causal LM with --step-surprise (the default: the output layer
reads the step tokens' log-probabilities), the bare backbone with --no-step-surprise, plus the heads.
Bytes per parameter, what AdamW training holds between steps:

    fp32, bf16-mixed  weights 4 + gradients 4 + AdamW's two moments 8 = 16; unsharded, bf16-mixed also holds autocast's
                      bfloat16 copy of every weight from the forward to the backward pass: +2 (frozen ones too: a
                      layer's backward needs its weight), which accelerate's estimate counts too
    bf16              weights 2 + gradients 2 + moments 4 = 8
    LoRA              frozen weights 4 (2 in bf16) each, and the adapters and heads at the rates above

`--sharding fsdp` divides the states by the processes and adds the gathered units: a decoder layer's
weights whole while it runs (in bfloat16 under bf16-mixed: FSDP's mixed precision gathers them so,
and no autocast copy is kept), two at a time with prefetching, with their gradients (float32 for
the reduce). `none` (DistributedDataParallel) holds it all whole in each process. Activations come on top: they grow
with --batch-size x tokens per row, and --gradient-checkpointing cuts them to a layer's input each.

Then, for the same model, accelerate's own estimate (accelerate.commands.estimate, what `accelerate
estimate-memory` prints): its training total for float32 (model + gradients + optimizer) and for
bfloat16 mixed precision, beside ours for one process and no sharding; and DeepSpeed's ZeRO-3
estimate for the processes (deepspeed's estimate_zero3_model_states_mem_needs, no offload: 18 bytes
per parameter split across them, plus the largest layer in float32) beside ours for bf16-mixed under
`--sharding fsdp`, which `--sharding deepspeed` (DeepSpeed's bf16 mode) partitions alike.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import sys

import torch

GB = 1e9
BYTES = {"fp32": (4, 16), "bf16-mixed": (4, 16), "bf16": (2, 8)}  # (a frozen weight, a trained parameter with AdamW)
AUTOCAST_COPY = {"bf16-mixed": 2}  # bytes per weight of autocast's bfloat16 copies while a step runs


def prm_parameters(model: str, step_surprise: bool, lora_rank: int, trust_remote_code: bool = False) -> dict:
    """Parameter counts of the PRM on `model`'s config, built on the meta device: total, trained, the largest decoder layer."""
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    from labeler.prm.lora import add_adapters
    from labeler.prm.sharding import decoder_layers

    config = AutoConfig.from_pretrained(model, trust_remote_code=trust_remote_code)
    with torch.device("meta"):
        causal = (AutoModelForCausalLM if step_surprise else AutoModel).from_config(copy.deepcopy(config), trust_remote_code=trust_remote_code)
        backbone = causal.base_model if step_surprise else causal
        hidden = config.get_text_config().hidden_size
        heads = 2 * (hidden + 1) + (1 if step_surprise else 0)  # step and trajectory heads, the surprise weight
        if lora_rank:
            add_adapters(backbone, lora_rank, 2 * lora_rank, 0.0, "all-linear", (causal.get_output_embeddings(),) if step_surprise else ())
    unique = {id(p): p for p in causal.parameters()}  # tied weights once
    total = sum(p.numel() for p in unique.values()) + heads
    trained = (sum(p.numel() for p in unique.values() if p.requires_grad) if lora_rank else total - heads) + heads
    layers = decoder_layers(backbone)
    largest = max((sum(p.numel() for p in layer.parameters()) for layer in layers), default=total)
    return {"total": total, "trained": trained, "largest_layer": largest, "layers": len(layers)}


def per_process_bytes(counts: dict, precision: str, processes: int, sharding: str) -> float:
    """Weights, gradients and optimizer state one process holds between steps (plus autocast's copies and, sharded,
    the gathered units), before activations."""
    frozen, trained = BYTES[precision]
    states = (counts["total"] - counts["trained"]) * frozen + counts["trained"] * trained
    if sharding == "none":
        return states + counts["total"] * AUTOCAST_COPY.get(precision, 0)
    gathered_weight = 2 if precision in ("bf16-mixed", "bf16") else 4
    gathered = 2 * counts["largest_layer"] * (gathered_weight + 4)  # two layers whole at a time, their weights and gradients
    return states / processes + gathered


def accelerate_estimate(counts: dict) -> dict:
    """accelerate's training estimate for the same number of float32 parameters (its `estimate-memory`)."""
    from accelerate.commands.estimate import estimate_training_usage

    size = counts["total"] * 4
    return {dtype: sum(v for k, v in estimate_training_usage(size, dtype).items() if k != "step") for dtype in ("float32", "bfloat16")}


def deepspeed_estimate(counts: dict, processes: int) -> float | None:
    """DeepSpeed's ZeRO-3 per-GPU estimate, in bytes, for `processes` GPUs on one node without offload (None: no deepspeed)."""
    try:
        with contextlib.redirect_stdout(sys.stderr):  # deepspeed logs to stdout on import; stdout is the figures
            from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    except ImportError:
        return None
    _, gpu_bytes, _ = estimate_zero3_model_states_mem_needs(counts["total"], counts["largest_layer"], num_gpus_per_node=processes, cpu_offload=False)
    return gpu_bytes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="hub id or folder of the backbone (its config alone is read)")
    parser.add_argument("--processes", type=int, default=8, help="processes (GPUs) sharing the model under --sharding fsdp")
    parser.add_argument("--lora-rank", type=int, default=0)
    parser.add_argument("--no-step-surprise", dest="step_surprise", action="store_false")
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args(argv)
    counts = prm_parameters(args.model, args.step_surprise, args.lora_rank, args.trust_remote_code)
    rows = {
        f"{precision} {sharding}": per_process_bytes(counts, precision, args.processes, sharding) / GB
        for precision in BYTES
        for sharding in ("none", "fsdp")
    }
    ours_one = {"float32": per_process_bytes(counts, "fp32", 1, "none") / GB, "bfloat16": per_process_bytes(counts, "bf16-mixed", 1, "none") / GB}
    theirs = {dtype: value / GB for dtype, value in accelerate_estimate(counts).items()}
    zero3 = deepspeed_estimate(counts, args.processes)
    zero3_gb = None if zero3 is None else zero3 / GB
    if args.json:
        print(json.dumps({"parameters": counts, "per_process_gb": rows, "one_process_gb": ours_one, "accelerate_gb": theirs,
                          "deepspeed_zero3_gb": zero3_gb}))  # fmt: skip
        return 0
    print(f"{args.model}: {counts['total'] / 1e9:.2f}B parameters ({counts['trained'] / 1e9:.3f}B trained), {counts['layers']} decoder layers "
          f"of {counts['largest_layer'] / 1e6:.0f}M; GB per process before activations, {args.processes} processes under fsdp")  # fmt: skip
    for name, value in rows.items():
        print(f"  {name:<16} {value:8.1f}")
    if args.lora_rank == 0:
        print("accelerate's estimate for the whole model on one process (model + gradients + optimizer), beside ours:")
        for dtype in ("float32", "bfloat16"):
            print(f"  {dtype:<9} accelerate {theirs[dtype]:8.1f}   ours {ours_one[dtype]:8.1f}")
        if zero3_gb is None:
            print("DeepSpeed's ZeRO-3 estimate: deepspeed is not installed (pip install '.[train]')")
        else:
            ours = rows["bf16-mixed fsdp"]
            print(f"DeepSpeed's ZeRO-3 estimate per process ({args.processes} processes, no offload) beside ours for bf16-mixed sharded:")
            print(f"  deepspeed {zero3_gb:8.1f}   ours {ours:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
