"""`labeler train`: train a Process Reward Model on labels shards.

    labeler train --labels OUT --output prm-run --model Qwen/Qwen2.5-Math-1.5B
    torchrun --nproc-per-node 8 -m labeler.cli train --labels OUT --output prm-run --device cuda

Reads the labels shards of a labeling job directly (only committed units; or a folder of shards,
or one shard), or TRL's stepwise supervision ({prompt, completions, labels} rows: a .jsonl or
.parquet file, a folder of them, or hf:NAME[:CONFIG][@SPLIT] such as hf:trl-lib/math_shepherd@train),
the hard labels as targets. Backbone: a causal LM from transformers; head: one logit per step, read at the
last token of the blank line that follows each step. Loss: binary cross-entropy on soft or hard
labels; under soft labels a step not measured at N (label_method early_stop, inferred or retraced: a
hard label only) is left out of the loss, but for a source whose rollouts were stopped at their first
correct one (posterior, adaptive, any early_stop step), trained whole on its hard labels since its soft labels
are chosen by outcome (--unmeasured-steps says; the log, the summary and --json say it per source). The log,
the summary's `steps` line and --json count every step with a target by what it trained on, in the train and
validation splits. The split into train and validation is
by problem (a split too small to choose best/ and the threshold by is said). After every epoch: a log line on
stderr and one JSON line in OUTPUT/metrics.jsonl; OUTPUT/last is rewritten and OUTPUT/best when
the selected validation metric improved. Both load with `labeler score --prm OUTPUT/best` (or
OUTPUT/last; OUTPUT alone stands for OUTPUT/best, which a run stopped by --max-steps before its
first epoch ended does not have yet). Rerun the same command to resume from OUTPUT/last (a run
stopped by --max-steps stays there: raise or drop it to go on); raise --epochs to train a
finished run longer.

A micro-batch's solutions are packed into rows of at most --pack-length tokens (attention kept
within each solution); the log and metrics.jsonl give the padded tokens per real token. Under
torchrun each process trains --batch-size solutions per micro-batch: an optimizer step takes
batch x accumulation x processes solutions, and process 0 validates, logs and saves. Progress lines end
with the whole run's ETA; --min-steps raising --epochs is said in one line. Stdout holds the summary (or
--json) alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

from labeler.cli.common import EXIT_OK, RunOptions, add_command, log_to_stderr, quiet_transformers, resolve_backbone, usage_error
from labeler.cli.flags import add_flags, flag_values
from labeler.prm.config import TrainConfig

if TYPE_CHECKING:
    from labeler.prm.trainer import TrainResult

COMMAND = "train"
RUN_OPTIONS = ("json", "quiet", "verbose")


def register(subparsers) -> None:
    parser = add_command(
        subparsers,
        COMMAND,
        help="train a Process Reward Model on labels shards",
        description=__doc__,
        usage_errors="bad usage, unreadable labels or model, or a run in --output with other settings",
        success="done, or stopped by --max-steps (rerun to go on)",
    )
    add_flags(parser, TrainConfig)
    add_flags(parser, RunOptions, only=RUN_OPTIONS)
    parser.set_defaults(handler=run_train)


def run_train(args: argparse.Namespace) -> int:
    from labeler.inputs.readers import InputError
    from workers.model_source import EMBEDDED_MODEL

    options = RunOptions(**flag_values(args, RunOptions, only=RUN_OPTIONS))
    try:  # the settings first (finite, in range): a bad one must not wait for a backbone to be provisioned
        config = TrainConfig(**{**flag_values(args, TrainConfig), "model": args.model or EMBEDDED_MODEL})
    except ValueError as error:
        return usage_error(COMMAND, str(error))
    log_to_stderr(options.quiet)
    if not options.verbose:
        quiet_transformers()
        # peft imports bitsandbytes, whose CPU backend warns about an optional `kernels` package on every LoRA run
        logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
    try:
        model_path, model_name = resolve_backbone(args.model)
    except RuntimeError as error:  # the embedded model could not be provisioned
        return usage_error(COMMAND, str(error).splitlines()[0])
    from labeler.prm.trainer import train

    try:
        config = replace(config, model=model_path, model_name=model_name)
        with stdout_to_stderr():  # stdout holds the result alone: what libraries print while training goes to stderr
            result = train(config)
    except (ValueError, InputError) as error:  # bad settings, labels, model, or a mismatched resume
        return usage_error(COMMAND, str(error).splitlines()[0])
    if result.process_rank != 0:  # under torchrun, process 0 reports for all
        return EXIT_OK
    if options.json:
        print(json.dumps(asdict(result), indent=1))
        return EXIT_OK
    print("\n".join(f"{name:<16}: {value}" for name, value in _summary(config, result)))
    return EXIT_OK


@contextlib.contextmanager
def stdout_to_stderr():
    """File descriptor 1 pointed at stderr for the duration: DeepSpeed's accelerator notice (printed through a handler
    that holds sys.stdout, under any --sharding) and any C library's output reach stderr, not the result on stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _summary(config: TrainConfig, result: TrainResult) -> list[tuple[str, str]]:
    """What this call did and what the run holds: the checkpoints on disk, "nothing trained" only when so."""
    if result.steps_trained:
        steps = f"{result.global_step} ({result.steps_trained} in this call)"
    elif result.stopped_early:
        at = f"the run is at --max-steps {config.max_steps}"
        steps = f"{result.global_step} (nothing trained in this call: {at}; raise or drop it to go on)"
    else:
        steps = f"{result.global_step} (nothing trained in this call: its {result.epochs_done} epochs are done; raise --epochs to go on)"
    last = result.history[-1] if result.history else {}
    metrics = ", ".join(  # a metric an epoch could not measure (roc_auc of one class) shows as n/a, not left out
        f"{key} {'n/a' if value is None else f'{value:.4f}'}"
        for key, value in last.items()
        if key.startswith(("train_", "val_")) and (value is None or isinstance(value, float))
    )
    best_by = result.best_metric_name or (config.select_best if config.validation_fraction else "train_loss")
    best = "none yet (best/ is written when an epoch ends)"
    if result.best_epoch is not None:
        best = f"{result.best_epoch} ({best_by} {result.best_metric:.4f})"
    elif any(Path(folder).name == "best" for folder in result.checkpoints):
        # no epoch measured the metric: best/ is the first epoch's, written so that a finished run always has one
        best = f"none measurable by {best_by} (it was n/a every epoch); best/ holds epoch 1"
    planned = getattr(result, "epochs_planned", 0) or config.epochs
    raised = f" (--epochs {config.epochs} raised by --min-steps {config.min_steps})" if planned > config.epochs else ""
    stopped = " (stopped by --max-steps)" if result.stopped_early else ""
    lines = [
        ("run", result.output),
        ("epochs done", f"{result.epochs_done} of {planned}{raised}{stopped}"),
        ("optimizer steps", steps),
        ("last epoch", metrics or "none finished in this call"),
        ("best epoch", best),
        ("checkpoints", ", ".join(result.checkpoints) or "none"),
    ]
    steps = getattr(result, "steps", None)
    if steps:
        from labeler.prm.data import StepCounts

        counts = StepCounts(**steps)
        lines[2:2] = [("steps", counts.describe()), *(("hard labels", line) for line in counts.outcome_stopped)]
    if getattr(result, "validation_warning", None):
        lines.insert(-1, ("validation", result.validation_warning))  # before the checkpoints, the summary's last line
    return lines
