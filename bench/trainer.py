"""Trainer speed: padded batches (the layout before packing) against packed rows, in one run.

    .venv/bin/python bench/trainer.py       # CPU: a small random backbone on the SmolLM2 tokenizer
    .venv/bin/python bench/trainer.py --backbone DIR --random-weights --device cuda --precision bf16-mixed \
        --solutions 900 --batch-size 16 --epochs 3    # GPU: SmolLM2-135M's shapes (README: GPU recipe)

Data: ProcessBench MATH (../shared/data/processbench/math.jsonl) with its human labels as the
targets (steps before the first error right, the first error wrong, later steps unlabelled),
rendered as the trainer renders them with the backbone's tokenizer.

First the padding alone, over the whole file (three shuffled epochs, no model): tokens in the
batch tensors per real token, padded vs packed, at batch 8, 16 and 32. Then each layout trains
--epochs on the same --solutions with the same seed and settings, --repeats times, the layouts
taking turns; the table shows each layout's fastest last epoch (the earlier ones warm up; the
fastest turn is the one least slowed by other work on the machine): seconds, solutions/s, real
tokens/s, padded per real token and the epoch's train loss (the two layouts train the same
batches, so their losses agree up to numerical noise), then packed against padded as ratios.
Compare the two rows of one run, not runs.

--scale: one training run as a GPU node runs it, launched by torchrun, for the multi-GPU recipe of
docs/guides/train.md; process 0 prints tokens/s and solutions/s of the last epoch over all
processes, each process its peak memory (GPU: torch's peak allocated; CPU: the process's peak
RSS), and bench/train_memory.py's estimate for the model (weights, gradients and AdamW state, before
activations) beside them:

    torchrun --nproc-per-node 8 bench/trainer.py --scale --backbone Qwen/Qwen2.5-Math-7B-Instruct \
        --device cuda --precision bf16-mixed --sharding fsdp --gradient-checkpointing --solutions 512 --batch-size 4 --epochs 1
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from labeler.prm.config import TrainConfig  # noqa: E402
from labeler.prm.data import epoch_order, micro_batches, padding_ratio  # noqa: E402
from labeler.prm.rendering import render_solution  # noqa: E402
from labeler.prm.trainer import train  # noqa: E402
from tests.synthetic_labels import labels_row, write_labels  # noqa: E402

DEFAULT_INPUT = ROOT.parent / "shared" / "data" / "processbench" / "math.jsonl"


def processbench_rows(path: Path, limit: int | None) -> list[dict]:
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()[:limit]):
        record = json.loads(line)
        steps, label = record["steps"], record["label"]
        hard = [True if label == -1 or j < label else (False if j == label else None) for j in range(len(steps))]
        soft = [None if h is None else float(h) for h in hard]
        row = labels_row(f"pb-{i}", f"pb-{i}-s", record["problem"], steps, soft, hard)
        row["label_method"] = ["rollouts" if h is not None else "unlabelled" for h in hard]
        row["unlabelled_reason"] = [None if h is not None else "after the human-labelled first error" for h in hard]
        rows.append(row)
    return rows


def small_backbone(tokenizer_dir: Path, out: Path) -> Path:
    """A random 2-layer Llama (hidden size 256) on the given tokenizer: real token lengths, cheap on a
    CPU, and closer than a hidden size of 64 to how larger models split their work between
    attention and the rest."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    tokenizer.save_pretrained(out)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=256, intermediate_size=768, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=4, max_position_embeddings=4096, tie_word_embeddings=True)  # fmt: skip
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(out)
    return out


def random_copy(model_dir: Path, out: Path) -> Path:
    """The model's architecture and tokenizer with random weights: the same speed, nothing to download."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    AutoTokenizer.from_pretrained(model_dir).save_pretrained(out)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir)).save_pretrained(out)
    return out


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", type=Path, default=DEFAULT_INPUT, help="ProcessBench rows (default: ProcessBench MATH)")
    parser.add_argument(
        "--backbone", type=Path, default=None, help="a model folder (default: a small random Llama on the embedded SmolLM2's tokenizer)"
    )
    parser.add_argument("--random-weights", action="store_true", help="train --backbone's architecture with random weights")
    parser.add_argument("--solutions", type=int, default=96, help="solutions each layout trains on (default: 96)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each layout, taking turns (default: 2)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=2048)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--attention", default="sdpa")
    parser.add_argument("--pack-length", type=int, default=None, help="tokens per packed row (default: the trainer's)")
    parser.add_argument("--scale", action="store_true", help="one run under torchrun: speed and peak memory per process (above)")
    parser.add_argument("--sharding", default="none", help="--scale: labeler train's --sharding")
    parser.add_argument("--lora-rank", type=int, default=0, help="--scale: labeler train's --lora-rank")
    parser.add_argument("--gradient-checkpointing", action="store_true", help="--scale: labeler train's flag")
    parser.add_argument("--work", type=Path, default=None, help="--scale: a folder every process can write (default: a new one in /tmp)")
    return parser


def train_config(args, labels: Path, output: Path, backbone: Path, batching: str):
    """One timed run's settings: --epochs exactly (min_steps=0: `labeler train`'s default, 300 optimizer steps at
    least, would train a few solutions for many more epochs than the bench prints)."""
    return TrainConfig(
        labels=str(labels), output=str(output), model=str(backbone), epochs=args.epochs,
        batch_size=args.batch_size, max_length=args.max_length, validation_fraction=0.0, device=args.device,
        precision=args.precision, batching=batching, attention=args.attention, pack_length=args.pack_length,
        learning_rate=1e-5, min_steps=0, seed=0,
    )  # fmt: skip


def main() -> None:
    args = parser().parse_args()
    if args.scale:
        scale(args)
        return
    logging.basicConfig(level=logging.WARNING)
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()

    work = Path(tempfile.mkdtemp(prefix="bench-trainer-"))
    if args.backbone is None:
        from workers.embedded_model import ensure_embedded_model

        backbone, name = small_backbone(ensure_embedded_model(), work / "backbone"), "random 2-layer Llama (hidden 256), SmolLM2 tokenizer"
    elif args.random_weights:
        backbone, name = random_copy(args.backbone, work / "backbone"), f"{args.backbone} (random weights)"
    else:
        backbone, name = args.backbone, str(args.backbone)

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(backbone)
    rows = processbench_rows(args.input, None)
    lengths = [len(render_solution(tokenizer, row["problem"], row["steps"], args.max_length).input_ids) for row in rows]
    print(f"padding: {len(rows)} solutions of {args.input.name}, {sum(lengths) / len(lengths):.0f} tokens on average "
          f"(max length {args.max_length}); tokens in the batch per real token, 3 shuffled epochs")  # fmt: skip
    print(f"{'batch':>6} {'padded':>8} {'packed':>8}")
    for batch_size in (8, 16, 32):
        groups = [g for epoch in range(3) for g in micro_batches(len(lengths), epoch_order(len(lengths), 0, epoch), batch_size)]
        print(f"{batch_size:>6} {padding_ratio(lengths, groups, 'padded', args.max_length):>8.2f} "
              f"{padding_ratio(lengths, groups, 'packed', args.pack_length, args.max_length):>8.2f}")  # fmt: skip

    labels = write_labels(work / "labels", rows[: args.solutions])
    print(f"\ntraining: {args.solutions} solutions, {args.epochs} epochs, batch {args.batch_size}, on {args.device} ({args.precision}), "
          f"{args.attention} attention, backbone {name}; each layout's fastest last epoch of {args.repeats}")  # fmt: skip
    print(f"{'layout':>7} {'seconds':>8} {'solutions/s':>12} {'tokens/s':>10} {'padded/real':>12} {'train loss':>11}")
    fastest: dict[str, dict] = {}
    for turn in range(args.repeats):
        for batching in ("padded", "packed"):
            config = train_config(args, labels, work / f"run-{batching}-{turn}", backbone, batching)
            last = train(config).history[-1]
            if batching not in fastest or last["seconds"] < fastest[batching]["seconds"]:
                fastest[batching] = last
    for batching, last in fastest.items():
        print(f"{batching:>7} {last['seconds']:>8.2f} {last['solutions_per_second']:>12.1f} {last['tokens_per_second']:>10.0f} "
              f"{last['padded_per_real_token']:>12.2f} {last['train_loss']:>11.5f}")  # fmt: skip
    old, new = fastest["padded"], fastest["packed"]
    print(f"packed vs padded, this run: {new['solutions_per_second'] / old['solutions_per_second']:.2f}x the solutions/s, "
          f"{new['padded_per_real_token'] / old['padded_per_real_token']:.2f}x the padded tokens, "
          f"train loss {new['train_loss'] - old['train_loss']:+.1e} apart")  # fmt: skip


def scale(args) -> None:
    """One `labeler train` run in this process (torchrun starts one per GPU); the figures of --scale."""
    import os
    import resource

    import torch

    rank = int(os.environ.get("RANK", "0"))
    # torchrun is every process's parent: its pid names a folder new to each launch, shared by its processes
    work = args.work or Path(tempfile.gettempdir()) / f"bench-trainer-scale-{os.getppid()}"
    mine = work / f"rank-{rank}"  # the labels (and a random backbone) written by each process alike: no process waits for another
    mine.mkdir(parents=True, exist_ok=True)
    backbone = args.backbone if args.backbone is not None else small_backbone(ensure_embedded(), mine / "backbone")
    if args.random_weights:
        backbone = random_copy(args.backbone, mine / "backbone")
    labels = write_labels(mine / "labels", processbench_rows(args.input, None)[: args.solutions])
    config = TrainConfig(
        labels=str(labels), output=str(work / "run"), model=str(backbone), epochs=args.epochs, batch_size=args.batch_size,
        max_length=args.max_length, validation_fraction=0.0, device=args.device, precision=args.precision, attention=args.attention,
        pack_length=args.pack_length, sharding=args.sharding, lora_rank=args.lora_rank, gradient_checkpointing=args.gradient_checkpointing,
        min_steps=0, seed=0,
    )  # fmt: skip
    result = train(config)
    if torch.cuda.is_available() and args.device == "cuda":
        peak = f"peak GPU memory {torch.cuda.max_memory_allocated() / 1e9:.1f} GB (torch's allocated)"
    else:
        peak = f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB"
    print(f"process {rank}: {peak}", flush=True)
    if rank != 0:
        return
    if not result.history:
        raise SystemExit(f"{work / 'run'} holds a finished run: nothing was trained, so nothing to measure; pass a new --work")
    last = result.history[-1]
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    print(f"{args.sharding} x {processes} processes, {args.precision}, lora rank {args.lora_rank}, gradient checkpointing "
          f"{args.gradient_checkpointing}: last epoch {last['seconds']:.1f} s, {last['tokens_per_second']:.0f} tokens/s, "
          f"{last['solutions_per_second']:.2f} solutions/s (all processes)")  # fmt: skip
    from train_memory import GB, per_process_bytes, prm_parameters

    counts = prm_parameters(str(backbone), step_surprise=True, lora_rank=args.lora_rank)
    precision = "fp32" if args.precision == "auto" and args.device != "cuda" else ("bf16-mixed" if args.precision == "auto" else args.precision)
    estimate = per_process_bytes(counts, precision, processes, args.sharding) / GB
    print(f"estimate per process before activations (bench/train_memory.py): {estimate:.2f} GB", flush=True)


def ensure_embedded() -> Path:
    from workers.embedded_model import ensure_embedded_model

    return ensure_embedded_model()


if __name__ == "__main__":
    main()
