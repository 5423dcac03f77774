"""`labeler train`: train a Process Reward Model on labels shards.

    labeler train --labels OUT --output prm-run --model Qwen/Qwen2.5-Math-1.5B

Reads the labels shards of a labeling job directly (only committed units; or a folder of shards,
or one shard). Backbone: a causal LM from transformers; head: one logit per step, read at the
last token of the blank line that follows each step. Loss: binary cross-entropy on soft or hard
labels. The split into train and validation is by problem. After every epoch: a log line on
stderr and one JSON line in OUTPUT/metrics.jsonl; OUTPUT/last is rewritten and OUTPUT/best when
the selected validation metric improved. Both load with `labeler score --prm OUTPUT/best`.
Rerun the same command to resume from OUTPUT/last; raise --epochs to train a finished run longer.

Exit codes: 0 done (or stopped by --max-steps); 1 unexpected failure; 2 bad usage, unreadable
labels or model, or a run in OUTPUT with other settings.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from labeler.cli.common import EXIT_OK, log_to_stderr, quiet_transformers, resolve_backbone, usage_error
from labeler.prm.config import DEVICES, PRECISIONS, SELECT_BEST

COMMAND = "train"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        COMMAND,
        help="train a Process Reward Model on labels shards",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    data = parser.add_argument_group("data and output")
    data.add_argument(
        "--labels", required=True, metavar="DIR", help="a labeling job's output directory, a folder of labels shards, or one shard"
    )
    data.add_argument(
        "--output", required=True, metavar="DIR", help="run folder: best/, last/, metrics.jsonl, train_config.json, split.json"
    )
    data.add_argument(
        "--target", choices=("soft", "hard"), default="soft", help="train on soft labels (MC estimates) or hard labels (default: soft)"
    )
    data.add_argument("--validation-fraction", type=float, default=0.1, help="share of problems held out for validation (default: 0.1)")
    data.add_argument("--max-length", type=int, default=2048, help="tokens per solution; steps past it get no target (default: 2048)")
    model = parser.add_argument_group("model")
    model.add_argument(
        "--model", default=None, help="backbone: hub id or local folder of a causal LM (default: the embedded SmolLM2-135M-Instruct)"
    )
    model.add_argument("--trust-remote-code", action="store_true", help="let the model repository run its own code")
    model.add_argument("--gradient-checkpointing", action="store_true", help="trade compute for memory on large backbones")
    optim = parser.add_argument_group("optimisation")
    optim.add_argument("--epochs", type=int, default=3, help="default: 3")
    optim.add_argument("--batch-size", type=int, default=8, help="solutions per micro-batch (default: 8)")
    optim.add_argument("--gradient-accumulation-steps", type=int, default=1, help="micro-batches per optimizer step (default: 1)")
    optim.add_argument("--learning-rate", type=float, default=1e-5, help="peak learning rate of AdamW (default: 1e-5)")
    optim.add_argument("--weight-decay", type=float, default=0.0, help="default: 0")
    optim.add_argument(
        "--warmup-ratio", type=float, default=0.05, help="share of steps with linear warm-up, then linear decay (default: 0.05)"
    )
    optim.add_argument("--max-grad-norm", type=float, default=1.0, help="gradient clipping (default: 1.0)")
    optim.add_argument(
        "--select-best", choices=SELECT_BEST, default="val_loss", help="metric that picks the best checkpoint (default: val_loss)"
    )
    optim.add_argument("--seed", type=int, default=0, help="split, shuffling and head initialisation (default: 0)")
    run = parser.add_argument_group("run")
    run.add_argument("--device", choices=DEVICES, default="auto", help="default: cuda when available, else cpu")
    run.add_argument("--precision", choices=PRECISIONS, default="auto", help="default: bf16-mixed on a GPU with bfloat16, else fp32")
    run.add_argument("--save-steps", type=int, default=None, help="also save last/ every N optimizer steps within an epoch")
    run.add_argument("--max-steps", type=int, default=None, help="stop after N optimizer steps in all (resumable)")
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    run.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.set_defaults(handler=run_train)


def run_train(args: argparse.Namespace) -> int:
    from labeler.inputs.readers import InputError
    from labeler.prm.config import TrainConfig
    from labeler.prm.trainer import train

    log_to_stderr(args.quiet)
    quiet_transformers()
    try:
        model_path, model_name = resolve_backbone(args.model)
    except RuntimeError as error:  # the embedded model could not be provisioned
        return usage_error(COMMAND, str(error).splitlines()[0])
    try:
        config = TrainConfig(
            labels=args.labels,
            output=args.output,
            model=model_path,
            model_name=model_name,
            target=args.target,
            epochs=args.epochs,
            batch_size=args.batch_size,
            gradient_accumulation_steps=args.gradient_accumulation_steps,
            learning_rate=args.learning_rate,
            weight_decay=args.weight_decay,
            warmup_ratio=args.warmup_ratio,
            max_grad_norm=args.max_grad_norm,
            max_length=args.max_length,
            validation_fraction=args.validation_fraction,
            select_best=args.select_best,
            seed=args.seed,
            device=args.device,
            precision=args.precision,
            gradient_checkpointing=args.gradient_checkpointing,
            trust_remote_code=args.trust_remote_code,
            save_steps=args.save_steps,
            max_steps=args.max_steps,
        )
        result = train(config)
    except (ValueError, InputError) as error:  # bad settings, labels, model, or a mismatched resume
        return usage_error(COMMAND, str(error).splitlines()[0])
    if args.json:
        print(json.dumps(asdict(result), indent=1))
        return EXIT_OK
    last = result.history[-1] if result.history else {}
    metrics = ", ".join(
        f"{key} {value:.4f}" for key, value in last.items() if key.startswith(("train_", "val_")) and isinstance(value, float)
    )
    best_by = config.select_best if config.validation_fraction else "train_loss"
    lines = [
        ("run", result.output),
        ("epochs done", f"{result.epochs_done}{' (stopped by --max-steps)' if result.stopped_early else ''}"),
        ("optimizer steps", str(result.global_step)),
        ("last epoch", metrics or "n/a (nothing trained in this call)"),
        ("best epoch", f"{result.best_epoch} ({best_by} {result.best_metric})"),
        ("checkpoints", f"{result.output}/best, {result.output}/last"),
    ]
    print("\n".join(f"{name:<16}: {value}" for name, value in lines))
    return EXIT_OK
