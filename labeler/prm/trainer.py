"""`labeler train`: a small PRM trainer that reads labels shards (or TRL's stepwise supervision) directly.

One loop, no framework: AdamW, linear warm-up then linear decay (--lr-scheduler: or cosine, or
none), gradient accumulation and clipping, binary cross-entropy on each labelled step's score (soft or hard targets, see
`labeler.prm.data`), scaled by the weight of the step's label source (--labels DIR:WEIGHT; several
sources train together, split into train and validation by problem across all of them). After
every epoch it measures the validation problems (loss, step accuracy and AUC against hard labels),
appends a line to OUT/metrics.jsonl, writes OUT/last (with the training state) and, when the
selected metric improved, OUT/best. Labels with trajectory labels also train a trajectory head
beside the step head (labeler/prm/trajectory.py), its loss added with --trajectory-loss-weight,
and validate it (val_trajectory_*).

Speed: a micro-batch's solutions are packed end to end into rows (`labeler.prm.data`), so the
batch holds few pad tokens, and the head runs only at the scored tokens; attention is torch's
fused SDPA kernels unless --attention says otherwise; the loss is read back from the device only
at log points. Under torchrun the steps run data-parallel (`labeler.prm.distributed`).

Rerunning the same command resumes from OUT/last: the same epoch order (a function of the seed
and epoch), the optimizer state and the random state, so an interrupted run ends with the model
an uninterrupted one would have. A run that --max-steps stopped stays at that step when rerun
with it (raise or drop --max-steps to go on). Raising --epochs continues a finished run (the
learning-rate schedule is then recomputed for the new total); changing anything that defines the
model or the data is refused.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from labeler.prm.checkpoints import (
    BEST,
    LAST,
    METRICS_NAME,
    append_metrics,
    checkpoint_dir,
    load_training_state,
    read_saved_config,
    save_checkpoint,
    staging_dir,
    start_checkpoint,
    write_config,
)
from labeler.prm.devices import Placement, place
from labeler.evaluation.metrics import best_first_error_threshold, roc_auc
from labeler.store.reader import LabelledRow
from labeler.prm.data import (
    ExampleTensors,
    PackedBatch,
    PRMExample,
    StepCounts,
    build_examples,
    collate,
    collate_packed,
    data_fingerprint,
    epoch_order,
    last_step_only,
    micro_batches,
    source_warnings,
    split_by_problem,
    validation_too_small,
    weighted_loss,
)
from labeler.prm.distributed import Processes
from labeler.prm.lora import LoRAError, add_adapters, frozen_fingerprint, trainable_names
from labeler.prm.qlora import QuantizationError, four_bit_config, weight_count
from labeler.prm import sharding, zero
from labeler.prm.stepwise import TRL_STEPWISE, read_training_rows
from labeler.prm.model import ProcessRewardModel
from labeler.prm.scoring import sigmoid, step_and_trajectory_logits
from labeler.prm.trajectory import trajectory_loss, trajectory_metrics
from labeler.prm.config import FSDP, TrainConfig, unmeasured_steps_hint

log = logging.getLogger("labeler.train")

SPLIT_NAME = "split.json"


class TrainingError(ValueError):
    """The run cannot start: bad data, or a resume that would mix two different runs."""


@dataclass
class TrainResult:
    output: str
    epochs_done: int
    global_step: int
    best_epoch: int | None
    best_metric: float | None
    stopped_early: bool  # --max-steps ended the run before the last epoch
    resumed: bool
    history: list[dict] = field(default_factory=list)  # the epochs this call finished
    process_rank: int = 0  # under torchrun, which process this is (0 reports for all: the others' best_* are None)
    steps_trained: int = 0  # optimizer steps this call took (0: the run was already done, or at --max-steps)
    checkpoints: list[str] = field(default_factory=list)  # the checkpoint folders the run holds, best/ then last/
    best_metric_name: str | None = None  # what best_metric is: --select-best, or val_loss where the validation has no AUC
    epochs_planned: int = 0  # the epochs this run trains in all: --epochs, or more for --min-steps
    steps: dict = field(default_factory=dict)  # the steps of all sources by what they trained on (StepCounts.to_dict)
    validation_warning: str | None = None  # why the validation split is too small to choose by, when it is


def train(config: TrainConfig) -> TrainResult:
    run_dir = Path(config.output)
    if run_dir.exists() and not run_dir.is_dir():
        raise TrainingError(f"--output {run_dir} is a file: give a folder for the run (best/, last/, metrics.jsonl)")
    created = [folder for folder in (run_dir, *run_dir.parents) if not folder.exists()]  # removed again if the run is refused
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        return _train_in(config, run_dir)
    except Exception:
        for folder in created:  # deepest first; one that holds anything stays
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def _train_in(config: TrainConfig, run_dir: Path) -> TrainResult:
    placement = place(config.device, config.precision)
    _refuse_accelerate_engines(config)
    if config.sharding == "deepspeed":
        try:
            zero.check_available(placement.device.type)
        except zero.DeepSpeedUnavailable as error:
            raise TrainingError(str(error)) from error
    if config.sharding == "fsdp-offload" and placement.device.type != "cuda":
        raise TrainingError("--sharding fsdp-offload keeps the shards in CPU memory between uses of a GPU: on the CPU, use --sharding fsdp")
    processes = Processes.from_environment(placement.device.type)
    try:
        if config.sharding != "none" and not processes.distributed:
            raise TrainingError(
                f"--sharding {config.sharding} shards the model across processes: launch with torchrun --nproc-per-node N "
                "(or accelerate launch --num-processes N), N >= 2"
            )
        if processes.distributed and placement.device.type == "cuda":
            placement = replace(placement, device=processes.device)  # this process's GPU
        if not processes.is_main:
            log.setLevel(logging.WARNING)  # process 0 reports for all
        result = _train(config, run_dir, placement, processes)
        # Finished processes leave together: one tearing its group down while another still exchanged (DeepSpeed
        # on gloo) made that one abort at exit, "terminate called without an active exception". (Not on an error:
        # the others may never arrive; torchrun stops them.)
        processes.barrier()
        return result
    finally:
        processes.close()


def _refuse_accelerate_engines(config: TrainConfig) -> None:
    """`accelerate launch` with an FSDP or DeepSpeed config file sets these for the script; labeler train reads
    --sharding instead, and says so rather than train unsharded."""
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true" and config.sharding != "deepspeed":
        raise TrainingError(
            "accelerate launch asks for DeepSpeed, but labeler train does not read accelerate's DeepSpeed config: pass "
            "--sharding deepspeed (ZeRO stage 3), or launch without the DeepSpeed config"
        )
    if os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true" and config.sharding not in FSDP:
        raise TrainingError("accelerate launch asks for FSDP, but labeler train does not read accelerate's config: pass --sharding fsdp")
    if config.sharding == "deepspeed":  # what --sharding deepspeed runs: ZeRO-3, no offload, settings from flags
        asked = {
            "a DeepSpeed config file": os.environ.get("ACCELERATE_DEEPSPEED_CONFIG_FILE", "") not in ("", "none"),
            f"ZeRO stage {os.environ.get('ACCELERATE_DEEPSPEED_ZERO_STAGE')}": os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3") != "3",
            "optimizer offload": os.environ.get("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "none") != "none",
            "parameter offload": os.environ.get("ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE", "none") != "none",
        }
        unmet = [name for name, given in asked.items() if given]
        if unmet:
            raise TrainingError(
                f"accelerate's DeepSpeed config asks for {', '.join(unmet)}: --sharding deepspeed runs ZeRO stage 3 without offload, "
                "its settings from labeler train's flags; launch without that config (or with one that asks for just that)"
            )


def _train(config: TrainConfig, run_dir: Path, placement: Placement, processes: Processes) -> TrainResult:
    rows = [read_training_rows(source.path) for source in config.sources]  # before loading a model: bad labels fail fast
    state = _resumable_state(run_dir, config, processes)

    if state is not None and not _finished(state, config):  # a finished run says "nothing to do" instead (Trainer.run)
        log.info("resuming from %s (epoch %d, step %d)", checkpoint_dir(run_dir, LAST), state["epoch"] + 1, state["global_step"])
    lora = config.lora_rank > 0
    if state is not None and not lora:
        prm = ProcessRewardModel.load(
            checkpoint_dir(run_dir, LAST),
            dtype=placement.weight_dtype,
            trust_remote_code=config.trust_remote_code,
            attention=config.attention,
        )
    else:  # a new run, or a LoRA run's resume: its backbone is --model's, its adapters and heads in the training state
        torch.manual_seed(config.seed)  # the head's (and the adapters') initialisation
        log.info("loading backbone %s%s", config.model_name or config.model, " in 4 bits (QLoRA)" if config.load_in_4bit else "")
        try:  # QLoRA: the same weights quantize to the same codes, so a resume rebuilds the base the adapters trained on
            quantization = four_bit_config(placement.autocast_dtype or torch.float32) if config.load_in_4bit else None
            prm = ProcessRewardModel.from_backbone(
                config.model,
                max_length=config.max_length,
                target=config.target,
                dtype=placement.weight_dtype,
                trust_remote_code=config.trust_remote_code,
                name=config.model_name,
                attention=config.attention,
                trajectory_head=_wants_trajectory_head(config, rows),
                rendering=config.rendering,
                step_surprise=config.step_surprise,
                quantization_config=quantization,
                device=placement.device,
            )
        except QuantizationError as error:  # no bitsandbytes, or layers a 4-bit base cannot be merged back into
            raise TrainingError(str(error)) from error

    train_set, validation_set, counts = _counted_examples(config, prm, rows)
    if state is None:
        step_prior, trajectory_prior = _priors(train_set)
        offset = mean_surprise(prm, train_set, config.batch_size, placement) if prm.step_surprise else 0.0
        prm.start_at_prior(step_prior, trajectory_prior, step_offset=offset)
    base_fingerprint = _add_lora(prm, config, state) if lora else None  # before sharding splits the weights
    fingerprint = data_fingerprint(train_set + validation_set)
    if state is not None and state["data_fingerprint"] != fingerprint:
        hint = unmeasured_steps_hint(read_saved_config(run_dir) or {}, config)
        raise TrainingError(f"{run_dir} was trained on other labels{hint}; use the same labels to resume, or another --output")
    processes.barrier()  # every process has read the saved run before process 0 writes
    if processes.is_main:
        write_config(run_dir, config.to_dict())
        validation_problems = sorted({e.problem_id for e in validation_set})
        (run_dir / SPLIT_NAME).write_text(json.dumps({"seed": config.seed, "validation_problem_ids": validation_problems}, indent=1) + "\n")

    prm.to(placement.device)
    data = ExampleTensors(train_set)
    batching = config.batching
    if batching == "packed" and not packing_keeps_solutions_apart(prm, data, placement):
        log.warning(
            "this backbone lets packed solutions attend to each other (its attention does not follow restarting position ids): "
            "training on padded batches instead, the same batches and loss with more padding"
        )
        batching = "padded"

    if config.gradient_checkpointing:
        prm.backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if config.sharding in FSDP:
        units = sharding.shard(prm, offload=config.sharding == "fsdp-offload", compute_dtype=placement.autocast_dtype)
        log.info("sharded across %d processes with FSDP2: %d decoder-layer units and the root", processes.world_size, units)
    heads = {id(p) for p in prm.head_parameters()}
    groups = [
        {"params": [p for p in prm.parameters() if p.requires_grad and id(p) not in heads], "lr": config.learning_rate, "peak_lr": config.learning_rate},
        {"params": prm.head_parameters(), "lr": config.head_learning_rate, "peak_lr": config.head_learning_rate, "weight_decay": 0.0},
    ]  # fmt: skip
    optimizer = torch.optim.AdamW(groups, lr=config.learning_rate, weight_decay=config.weight_decay)
    if state is not None and config.sharding in FSDP:
        sharding.load_full_optimizer_state(prm, optimizer, state["optimizer"])
    elif state is not None and config.sharding != "deepspeed":  # DeepSpeed's engine reads its own checkpoint (_TrainingLoop)
        optimizer.load_state_dict(state["optimizer"])
    if state is not None and lora:  # LoRA rebuilt the PRM from --model: the threshold chosen so far is last/'s
        prm.settings = replace(prm.settings, threshold=saved_threshold(checkpoint_dir(run_dir, LAST)))
    if state is not None:  # this process's random state (dropout draws differ between processes), or process 0's in older runs
        by_rank = state.get("rng_by_rank") or [state["rng"]]
        torch.set_rng_state(by_rank[processes.rank] if processes.rank < len(by_rank) else by_rank[0])
        if state.get("cuda_rng_by_rank") and torch.cuda.is_available():  # this process's own GPU's
            torch.cuda.set_rng_state(state["cuda_rng_by_rank"][processes.rank])
        elif "cuda_rng" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
    loop = _TrainingLoop(config, prm, optimizer, placement, run_dir, data, validation_set, fingerprint, state, processes, batching, base_fingerprint)
    loop.counts = counts
    return loop.run()


def saved_threshold(folder: Path | None) -> float | None:
    """The threshold a checkpoint's prm.json holds (None: none chosen yet, or no checkpoint)."""
    if folder is None or not (folder / "prm.json").is_file():
        return None
    return json.loads((folder / "prm.json").read_text()).get("threshold")


def _add_lora(prm: ProcessRewardModel, config: TrainConfig, state: dict | None) -> list[float]:
    """LoRA adapters in the backbone (labeler.prm.lora); on resume, the adapters and heads as last/'s state holds them.
    The frozen base's fingerprint, which last/ keeps for a resume to check."""
    alpha = config.resolved_lora_alpha
    try:
        frozen = (prm.output_layer,) if prm.output_layer is not None else ()
        layers = add_adapters(prm.backbone, config.lora_rank, alpha, config.lora_dropout, config.lora_target_modules, frozen)
    except LoRAError as error:
        raise TrainingError(str(error)) from error
    trained = sum(p.numel() for p in prm.parameters() if p.requires_grad)
    whole = sum(weight_count(p) for p in prm.parameters())  # a 4-bit weight counted unpacked
    log.info("LoRA rank %d, alpha %g on %d layers: %d of %d parameters train (%.2f%%)", config.lora_rank, alpha, layers, trained, whole, 100 * trained / whole)
    fingerprint = frozen_fingerprint(prm)
    if state is not None:
        saved = state.get("trainable")
        if saved is None:
            raise TrainingError("the saved run holds no LoRA adapters to resume (it was trained without --lora-rank): use another --output")
        missing = sorted(set(trainable_names(prm)) - set(saved))
        if missing:
            raise TrainingError(f"the saved run's adapters do not match this backbone (missing {missing[0]}): use the same settings, or another --output")
        if state.get("frozen_fingerprint") is not None and state["frozen_fingerprint"] != fingerprint:
            raise TrainingError(
                f"{config.model} is not the base model the saved adapters were trained on (its frozen weights changed since: "
                "a hub model updated?): resume with that base, or start another --output"
            )
        prm.load_state_dict(saved, strict=False)
    return fingerprint


@torch.no_grad()
def packing_keeps_solutions_apart(prm: ProcessRewardModel, data: ExampleTensors, placement: Placement) -> bool:
    """Whether a solution packed after another gets the hidden states it gets alone: transformers
    keeps packed solutions apart by their position ids for the usual attention kernels, but a
    model with its own attention code might not. Checked on the first two training solutions."""
    if len(data) < 2:
        return True
    was_training = prm.training
    prm.eval()
    packed = collate_packed(data, [0, 1], prm.pad_token_id, pack_length=data.lengths[0] + data.lengths[1]).to(placement.device)
    with placement.autocast():  # as in training (flash attention runs in bfloat16 only)
        together = prm.backbone(input_ids=packed.input_ids, position_ids=packed.position_ids, use_cache=False).last_hidden_state[0]
        alone = prm.backbone(input_ids=data.input_ids[1][None].to(placement.device), use_cache=False).last_hidden_state[0]
    prm.train(was_training)
    start, end = data.lengths[0], data.lengths[0] + data.lengths[1]
    difference = (together[start:end].float() - alone.float()).norm(dim=-1) / alone.float().norm(dim=-1).clamp_min(1e-6)
    full_precision = placement.weight_dtype == torch.float32 and placement.autocast_dtype is None
    tolerance = 1e-3 if full_precision else 5e-2  # attending to another solution moves hidden states far more than either
    return bool(difference.max() <= tolerance)


def _wants_trajectory_head(config: TrainConfig, rows: list[list[LabelledRow]]) -> bool:
    """A trajectory head when its loss counts and some solution of some source has a trajectory label to train it on."""
    labelled = any(row.trajectory_label is not None for source_rows in rows for row in source_rows)
    if config.trajectory_loss_weight > 0 and not labelled:
        log.info("no trajectory labels in the labels (schema 1.3 or older, or imported): the PRM gets no trajectory head")
    return config.trajectory_loss_weight > 0 and labelled


def _resumable_state(run_dir: Path, config: TrainConfig, processes: Processes) -> dict | None:
    state = load_training_state(run_dir)
    if state is None:
        return None
    if state.get("world_size", 1) != processes.world_size:
        raise TrainingError(
            f"{run_dir} was trained on {state.get('world_size', 1)} processes, this run has {processes.world_size}: "
            "resume with as many (an optimizer step takes batch x accumulation x processes solutions)"
        )
    saved = read_saved_config(run_dir) or {}
    changed = [_with_values(name, saved, config) for name in config.changed_settings(saved)]
    if changed:
        raise TrainingError(
            f"{run_dir} holds a run with other settings (changed: {'; '.join(changed)}); "
            "use the same settings to resume, or another --output"
        )
    return state


def _finished(state: dict, config: TrainConfig) -> bool:
    """A saved run that has trained its epochs (--epochs, or more for --min-steps: the global step tells), or stopped
    at its --max-steps: a rerun has nothing to do (Trainer.run)."""
    trained_min_steps = state["global_step"] >= config.min_steps
    return (state["epoch"] >= config.epochs and trained_min_steps) or _reached_max_steps(state["global_step"], config)


def _reached_max_steps(global_step: int, config: TrainConfig) -> bool:
    return config.max_steps is not None and global_step >= config.max_steps


def _with_values(name: str, saved: dict, config: TrainConfig) -> str:
    """`name: saved -> now` for a changed setting (one that names its values already, as labels' weights do, as it is)."""
    now = json.loads(json.dumps(config.to_dict()))
    if name not in now:
        return name
    return f"{name}: {json.dumps(saved.get(name, 'not recorded'))} -> {json.dumps(now[name])}"


def _examples(config: TrainConfig, prm: ProcessRewardModel, rows: list[list[LabelledRow]]) -> tuple[list[PRMExample], list[PRMExample]]:
    """The examples of every source, in --labels order, split by problem across all of them."""
    return _counted_examples(config, prm, rows)[:2]


def _counted_examples(
    config: TrainConfig, prm: ProcessRewardModel, rows: list[list[LabelledRow]]
) -> tuple[list[PRMExample], list[PRMExample], StepCounts]:
    """The examples of every source, in --labels order, split by problem across all of them, and their steps counted."""
    examples: list[PRMExample] = []
    counts = StepCounts()
    for index, (source, source_rows) in enumerate(zip(config.sources, rows)):
        settings = prm.settings
        built, stats = build_examples(
            source_rows, prm.tokenizer, config.target, settings.max_length, source.weight, index, settings.rendering, config.unmeasured_steps
        )  # fmt: skip
        one = StepCounts()
        one.add(stats, source.path)
        log.info(
            "labels %s [%s]: %d solutions; steps: %s %d (%d solutions left without a target)",
            source.describe(),
            ", ".join(sorted({row.label_source for row in source_rows})) or "empty",
            stats.solutions,
            one.describe(),
            settings.max_length,  # --max-length, capped to the backbone's context
            stats.solutions_dropped,
        )
        for line in source_warnings(stats, one, source.describe()):  # trained whole on hard labels, or steps left out
            log.warning("%s", line)
        if not built:
            left = sum(stats.left_out.values())
            why = f", {left} not measured at N left out of the soft loss: pass --target hard, or --unmeasured-steps hard" if left else ""
            raise TrainingError(
                f"{source.path}: no step with a {config.target} label to train on "
                f"({stats.steps_unlabelled} steps unlabelled, {stats.steps_truncated} cut by --max-length {settings.max_length}{why})"
            )
        counts.add(stats, source.path)
        if any(row.label_source == TRL_STEPWISE for row in source_rows):
            log.info("labels %s: TRL stepwise supervision has hard labels only: a soft target is the hard label, 0 or 1", source.describe())
        examples += built
    train_set, validation_set = split_by_problem(examples, config.validation_fraction, config.seed)
    if config.train_on_last_step_only:
        kept = last_step_only(train_set)
        log.info(
            "--train-on-last-step-only: %d of %d train solutions keep their last step's target alone, %d left out "
            "(their last step has no target: no label, not measured at N under --target soft, or cut by --max-length); validation measures every step",
            len(kept),
            len(train_set),
            len(train_set) - len(kept),
        )
        if not kept:
            raise TrainingError("--train-on-last-step-only: no train solution has a target on its last step")
        train_set = kept
    counts.split(train_set, validation_set)
    log.info(
        "split by problem: %d train solutions, %d validation solutions (%d problems); steps: %s",
        len(train_set),
        len(validation_set),
        len({e.problem_id for e in validation_set}),
        counts.describe(),
    )
    if config.validation_fraction > 0 and not validation_set:
        log.warning("only one problem: no validation split; the best checkpoint follows the training loss")
    small = validation_too_small(validation_set)
    if small:
        log.warning("%s", small)
    return train_set, validation_set, counts


SURPRISE_SAMPLE = 256  # training solutions whose steps' mean surprise sets the starting bias


def mean_surprise(prm: ProcessRewardModel, examples: list[PRMExample], batch_size: int, placement: Placement) -> float:
    """The mean step-surprise term (weight x surprise) over the target steps of the first SURPRISE_SAMPLE training
    solutions, with the head's own part at 0: what the bias must offset for the PRM to start at the prior."""
    sample = [e for e in examples[:SURPRISE_SAMPLE] if e.step_spans is not None]
    if not sample:
        return 0.0
    weight, bias = prm.head.weight.detach().clone(), prm.head.bias.detach().clone()
    with torch.no_grad():
        prm.head.weight.zero_()
        prm.head.bias.zero_()
        prm.to(placement.device)
        sequences = [(e.input_ids, e.score_positions, None, e.step_spans) for e in sample]
        logits, _ = step_and_trajectory_logits(prm, sequences, batch_size, placement)
        prm.head.weight.copy_(weight)
        prm.head.bias.copy_(bias)
    values = [x for row in logits for x in row]
    return sum(values) / len(values) if values else 0.0


def _priors(examples: list[PRMExample]) -> tuple[float | None, float | None]:
    """The weighted mean of the training steps' targets, and of the trajectory targets (None: none)."""
    steps = sum(e.weight * len(e.targets) for e in examples)
    step_prior = sum(e.weight * t for e in examples for t in e.targets) / steps if steps else None
    trajectories = [e.trajectory_target for e in examples if e.trajectory_target is not None]
    return step_prior, (sum(trajectories) / len(trajectories) if trajectories else None)


class _BothHeads(torch.nn.Module):
    """The PRM's step and trajectory logits as a module's forward, what DistributedDataParallel wraps."""

    def __init__(self, prm: ProcessRewardModel):
        super().__init__()
        self.prm = prm

    def forward(self, *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.prm.step_and_trajectory_logits(*args, **kwargs)


class _TrainingLoop:
    def __init__(self, config, prm, optimizer, placement: Placement, run_dir, data: ExampleTensors, validation_set, fingerprint, state,
                 processes: Processes, batching: str, base_fingerprint: list[float] | None = None):  # fmt: skip
        self.config = config
        self.prm = prm
        self.optimizer = optimizer
        self.placement = placement
        self.run_dir = run_dir
        self.data = data
        self.train_set = data.examples
        self.validation_set = validation_set
        self.fingerprint = fingerprint
        self.processes = processes
        self.batching = batching
        self.pack_length = config.pack_length  # None: rows as wide as pads least within the padded batch's attention work
        # What the training steps call: both heads' logits, through DistributedDataParallel under torchrun.
        self.model = _BothHeads(prm)
        self.sharded = config.sharding != "none"  # the PRM's weights split across the processes (FSDP2 or ZeRO-3)
        self.deepspeed = config.sharding == "deepspeed"
        if self.deepspeed:  # the engine runs forward, backward and the optimizer step
            bf16 = placement.autocast_dtype == torch.bfloat16
            try:
                self.model = zero.engine(self.model, prm, optimizer, config.batch_size, processes.world_size, config.max_grad_norm, bf16)
                prm.most_across_processes = processes.most  # as many calls of the output layer everywhere (model.py)
                if state:
                    zero.load(self.model, checkpoint_dir(run_dir, LAST) / zero.CHECKPOINT_FOLDER)
            except (zero.DeepSpeedUnavailable, FileNotFoundError) as error:
                raise TrainingError(str(error)) from error
        elif processes.distributed and not self.sharded:  # FSDP2's hooks are on the PRM itself: no wrapper
            from torch.nn.parallel import DistributedDataParallel

            self.model = DistributedDataParallel(self.model, device_ids=[placement.device.index] if placement.device.type == "cuda" else None)
        # An optimizer step takes the next `group` micro-batches of the epoch, spread over the processes.
        self.group = config.gradient_accumulation_steps * processes.world_size
        batches_per_epoch = math.ceil(len(self.train_set) / config.batch_size)
        self.steps_per_epoch = math.ceil(batches_per_epoch / self.group)
        self.epochs = epochs_to_train(config, self.steps_per_epoch)
        self.total_steps = self.steps_per_epoch * self.epochs
        self.warmup_steps = math.ceil(config.warmup_ratio * self.total_steps)
        state = state or {}
        self.resumed = bool(state)
        self.epoch = state.get("epoch", 0)
        self.batches_done = state.get("batches_done", 0)  # micro-batches of the current epoch already trained, on all processes
        self.global_step = self.first_step = state.get("global_step", 0)
        self.best_metric = state.get("best_metric")
        self.best_epoch = state.get("best_epoch")
        # The current epoch's loss so far: this process's part, on the device (read at log points
        # only, not at every step); a resumed epoch starts from the saved sum, held by process 0.
        main = processes.is_main
        self.loss_sum = torch.tensor(state.get("loss_sum", 0.0) if main else 0.0, dtype=torch.float64, device=placement.device)
        self.loss_count = state.get("loss_count", 0) if main else 0
        self._reset_throughput()
        self.history: list[dict] = []
        self._warned_no_auc = False
        self.counts = StepCounts()  # set by the caller: the steps of all sources by what they train on
        self.small_validation = validation_too_small(validation_set) is not None
        self.started = time.monotonic()  # this call's start, for the run's ETA
        self.best_metric_name = state.get("best_metric_name")
        self.trainable = trainable_names(prm)  # LoRA: the adapters and heads, saved unmerged for a resume
        self.frozen_fingerprint = base_fingerprint  # LoRA: the frozen base's, that a resume checks
        if self.resumed and processes.is_main:
            restore_metrics(run_dir, self.epoch, state.get("epoch_record"))

    def run(self) -> TrainResult:
        config = self.config
        if self.epoch >= self.epochs:
            log.info("%s already holds %d trained epochs: nothing to do (raise --epochs or --min-steps to train on)", self.run_dir, self.epoch)
            return self._result(stopped=False)
        if self._at_max_steps():  # a rerun of a run that --max-steps stopped: not one step more
            log.info(
                "%s already holds %d optimizer steps, --max-steps %d: nothing to do (raise --max-steps or drop it to train on)",
                self.run_dir,
                self.global_step,
                config.max_steps,
            )
            return self._result(stopped=True)
        rows = f"rows of up to {self.pack_length} tokens" if self.pack_length else "rows that pad least within the padded batch's attention work"
        layout = f"each micro-batch packed in {rows}" if self.batching == "packed" else "padded batches"
        processes = f" x {self.processes.world_size} processes" if self.processes.distributed else ""
        if self.epochs > config.epochs:
            log.info(
                "--min-steps %d: %d optimizer steps an epoch, so this run trains %d epochs, not --epochs %d (--min-steps 0 for --epochs alone)",
                config.min_steps,
                self.steps_per_epoch,
                self.epochs,
                config.epochs,
            )
        self.started = time.monotonic()
        log.info(
            "training on %s: %d epochs of %d optimizer steps (batch %d x %d accumulation%s), lr %g, heads' lr %g (%s), %s, %s attention",
            self.placement.describe(),
            self.epochs,
            self.steps_per_epoch,
            config.batch_size,
            config.gradient_accumulation_steps,
            processes,
            config.learning_rate,
            config.head_learning_rate,
            config.lr_scheduler,
            layout,
            config.attention,
        )
        stopped = False
        while self.epoch < self.epochs and not stopped:
            stopped = self._run_epoch()
        return self._result(stopped)

    def _at_max_steps(self) -> bool:
        return _reached_max_steps(self.global_step, self.config)

    def _result(self, stopped: bool) -> TrainResult:
        return TrainResult(
            output=str(self.run_dir),
            epochs_done=self.epoch,
            global_step=self.global_step,
            best_epoch=self.best_epoch,
            best_metric=self.best_metric,
            stopped_early=stopped,
            resumed=self.resumed,
            history=self.history,
            process_rank=self.processes.rank,
            steps_trained=self.global_step - self.first_step,
            checkpoints=[str(folder) for name in (BEST, LAST) if (folder := checkpoint_dir(self.run_dir, name)) is not None],
            best_metric_name=self.best_metric_name,
            epochs_planned=self.epochs,
            steps=self.counts.to_dict(),
            validation_warning=validation_too_small(self.validation_set),
        )

    def _eta(self) -> str:
        """The time left for the whole run (up to --max-steps when given) at this call's pace so far, validations included."""
        done = self.global_step - self.first_step
        if not done:
            return "ETA unknown"
        end = self.total_steps if self.config.max_steps is None else min(self.total_steps, self.config.max_steps)
        left = max(0, end - self.global_step)
        seconds = (time.monotonic() - self.started) / done * left
        return f"ETA {_duration(seconds)} for the run's {left} step{'' if left == 1 else 's'} left"

    def _run_epoch(self) -> bool:
        """Train the rest of the current epoch; True when --max-steps stopped it part-way."""
        config = self.config
        started = time.monotonic()
        groups = micro_batches(len(self.train_set), epoch_order(len(self.train_set), config.seed, self.epoch), config.batch_size)
        log_every = max(1, self.steps_per_epoch // 10)
        self.prm.train()
        self.optimizer.zero_grad(set_to_none=True)
        while self.batches_done < len(groups):
            step_batches = groups[self.batches_done : self.batches_done + self.group]
            self._accumulate(step_batches[self.processes.rank :: self.processes.world_size], len(step_batches))
            self.batches_done += len(step_batches)
            self._optimizer_step()
            step_in_epoch = math.ceil(self.batches_done / self.group)
            if step_in_epoch % log_every == 0 and step_in_epoch < self.steps_per_epoch:
                counts = [self.loss_sum.item(), self.loss_count, self.real_tokens, self.padded_tokens]
                loss_sum, loss_count, real, padded = self.processes.sum(counts)
                log.info(
                    "epoch %d/%d step %d/%d: loss %.4f, lr %.3g, %.2f tokens per real token; %s",
                    self.epoch + 1,
                    self.epochs,
                    step_in_epoch,
                    self.steps_per_epoch,
                    loss_sum / max(1, loss_count),
                    self._learning_rate(self.global_step),
                    padded / max(1, real),
                    self._eta(),
                )
            if self.batches_done >= len(groups):
                break
            if self._at_max_steps():
                self._save_last()
                log.info("stopped after %d optimizer steps (--max-steps); rerun without it to continue", self.global_step)
                return True
            if config.save_steps and self.global_step % config.save_steps == 0:
                self._save_last()
        totals = self.processes.sum([self.loss_sum.item(), self.loss_count, self.real_tokens, self.padded_tokens, self.solutions])
        self._finish_epoch(time.monotonic() - started, *totals)
        return self._at_max_steps() and self.epoch < self.epochs

    def _accumulate(self, mine: list[list[int]], in_step: int) -> None:
        """Forward and backward this process's micro-batches of one optimizer step (`in_step` in all,
        over all processes), each loss weighted so the gradient is their mean over the step."""
        distributed = self.processes.distributed
        weight = in_step / self.processes.world_size  # DistributedDataParallel and FSDP average over processes
        if self.sharded:  # every process gathers each layer for each pass: all make as many passes (the extra ones count 0)
            passes = math.ceil(in_step / self.processes.world_size)
            for k in range(passes):  # each pass's gradients reduced to the shards at once (sharding.py)
                if k < len(mine):
                    self._train_on(mine[k], weight)
                else:
                    self._backward(self._dummy_logits().sum() * 0)
            return
        if not mine and distributed:  # more processes than micro-batches left: join the gradient exchange with nothing
            (self._dummy_logits().sum() * 0).backward()
            return
        for k, indices in enumerate(mine):
            last = k == len(mine) - 1
            with contextlib.nullcontext() if last or not distributed else self.model.no_sync():
                self._train_on(indices, weight)

    def _train_on(self, indices: list[int], weight: float) -> None:
        """Forward and backward one micro-batch, its loss divided by `weight`."""
        batch = self._batch(indices)
        with self.placement.autocast():
            loss = self._loss(batch)
        self._backward(loss / weight)
        self.loss_sum += loss.detach()
        self.loss_count += 1

    def _backward(self, loss: torch.Tensor) -> None:
        if self.deepspeed:  # the engine's backward reduces the gradients to their shards; the loop has scaled the loss
            self.model.backward(loss, scale_wrt_gas=False)
        else:
            loss.backward()

    def _batch(self, indices: list[int]):
        if self.batching == "packed":
            batch = collate_packed(self.data, indices, self.prm.pad_token_id, self.pack_length, self.prm.settings.max_length)
            self.real_tokens += batch.real_tokens
        else:
            batch = collate([self.train_set[i] for i in indices], self.prm.pad_token_id)
            self.real_tokens += int(batch.attention_mask.sum())
        self.padded_tokens += batch.input_ids.numel()
        self.solutions += len(indices)
        if self.placement.device.type == "cuda" and isinstance(batch, PackedBatch):
            batch = batch.pin_memory()  # so the copy to the GPU does not wait for the host
        return batch.to(self.placement.device)

    def _loss(self, batch) -> torch.Tensor:
        """The weighted step loss, plus --trajectory-loss-weight x the trajectory head's loss on the
        batch's solutions with a trajectory target (labeler/prm/trajectory.py)."""
        if isinstance(batch, PackedBatch):
            steps, trajectories = self.model(
                batch.input_ids, position_ids=batch.position_ids, score_index=batch.score_index, trajectory_index=batch.trajectory_index,
                spans=batch.spans,
            )  # fmt: skip
            loss = weighted_loss(steps, batch.targets, batch.weights)
            trajectory_targets = batch.trajectory_targets
        else:
            width = batch.input_ids.shape[1]
            score_index = batch.step_mask.reshape(-1).nonzero(as_tuple=True)[0]
            rows = (batch.trajectory_positions >= 0).nonzero(as_tuple=True)[0]
            trajectory_index = rows * width + batch.trajectory_positions[rows]
            steps, trajectories = self.model(
                batch.input_ids, batch.attention_mask, score_index=score_index, trajectory_index=trajectory_index, spans=batch.spans
            )
            mask = batch.step_mask
            loss = weighted_loss(steps, batch.targets[mask], batch.weights[mask])
            trajectory_targets = batch.trajectory_targets[rows]
        if trajectories is None:
            return loss
        extra = trajectory_loss(trajectories, trajectory_targets)
        if extra is None:  # the head stays in the graph (with no gradient): data-parallel processes exchange its gradient
            return loss + trajectories.sum() * 0
        return loss + self.config.trajectory_loss_weight * extra

    def _dummy_logits(self) -> torch.Tensor:
        batch = collate_packed(self.data, [0], self.prm.pad_token_id).to(self.placement.device)
        with self.placement.autocast():
            steps, trajectories = self.model(
                batch.input_ids, position_ids=batch.position_ids, score_index=batch.score_index, trajectory_index=batch.trajectory_index,
                spans=batch.spans,
            )  # fmt: skip
        return steps if trajectories is None else steps.sum() + trajectories.sum()

    def _reset_throughput(self) -> None:
        """Tokens and solutions trained in this call, for padded-per-real-token and speed."""
        self.real_tokens = self.padded_tokens = self.solutions = 0

    def _optimizer_step(self) -> None:
        if not self.deepspeed:  # DeepSpeed clips at --max-grad-norm in its step (gradient_clipping)
            torch.nn.utils.clip_grad_norm_(self.prm.parameters(), self.config.max_grad_norm)
        for group in self.optimizer.param_groups:  # the backbone's and the heads' peaks, on one schedule
            group["lr"] = self._learning_rate(self.global_step, group["peak_lr"])
        if self.deepspeed:
            self.model.step()  # clips, steps the optimizer on this process's shards, zeroes the gradients
        else:
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        self.global_step += 1

    def _learning_rate(self, step: int, peak: float | None = None) -> float:
        """The rate of optimizer step `step` at `peak` (default: the backbone's --learning-rate)."""
        peak = self.config.learning_rate if peak is None else peak
        return learning_rate_at(step, peak, self.warmup_steps, self.total_steps, self.config.lr_scheduler)

    def _finish_epoch(self, seconds: float, loss_sum: float, loss_count: float, real: float, padded: float, solutions: float) -> None:
        train_loss = loss_sum / max(1, loss_count)
        record = {"epoch": self.epoch + 1, "global_step": self.global_step, "train_loss": train_loss}
        if self.processes.is_main or self.sharded:  # a sharded PRM runs on every process at once; process 0 records
            measured = self._validate()
            if self.processes.is_main:
                record |= measured
        record |= {"learning_rate": self._learning_rate(self.global_step - 1), "seconds": round(seconds, 3)}
        record |= {
            "padded_per_real_token": round(padded / real, 4) if real else None,
            "solutions_per_second": round(solutions / seconds, 2) if seconds else None,
            "tokens_per_second": round(real / seconds, 1) if seconds else None,
        }
        metric_name = self.config.select_best if self.validation_set else "train_loss"
        if metric_name == "val_auc" and record.get("val_auc") is None and self.processes.is_main:
            # the validation's hard labels are all of one kind (they are the same every epoch): no AUC, ever
            if not self._warned_no_auc:
                log.warning("the validation split has no wrong step or no right one: no step AUC; best/ follows the validation loss")
                self._warned_no_auc = True
            metric_name = "val_loss"
        metric = record.get(metric_name)
        self.best_metric_name = metric_name
        lower_is_better = metric_name.endswith("loss")
        improved = metric is not None and (
            self.best_metric is None or (metric < self.best_metric if lower_is_better else metric > self.best_metric)
        )
        if self.sharded:  # the checkpoint is gathered by all processes: they follow process 0's verdict
            improved = self.processes.broadcast(improved)
        if improved:
            self.best_metric, self.best_epoch = metric, self.epoch + 1
        record["best"] = improved
        self.epoch += 1
        self.batches_done, self.loss_count = 0, 0
        self.loss_sum.zero_()
        self._reset_throughput()
        first = self.processes.broadcast(checkpoint_dir(self.run_dir, BEST) is None)
        model_state = self._model_state()  # gathered once (sharded) for best/ and last/
        if (improved or first) and self.processes.is_main:
            save_checkpoint(self.run_dir, BEST, self.prm, model_state=model_state)
        self._save_last(record, model_state)
        if self.processes.is_main:
            append_metrics(self.run_dir, record)
        self.history.append(record)
        log.info(
            "epoch %d/%d done in %.1fs: train loss %.4f, val loss %s, val step accuracy %s, val AUC %s, "
            "val first-error F1 %s at threshold %s%s; %.2f tokens per real token, %.1f solutions/s; %s",
            record["epoch"],
            self.epochs,
            seconds,
            train_loss,
            _fmt(record.get("val_loss")),
            _fmt(record.get("val_step_accuracy")),
            _fmt(record.get("val_auc")),
            _fmt(record.get("val_first_error_f1")),
            _fmt(record.get("val_threshold")),
            (" (best so far, by a validation split too small to choose by)" if self.small_validation else " (best so far)") if improved else "",
            record["padded_per_real_token"] or 0,
            record["solutions_per_second"] or 0,
            self._eta(),
        )

    def _validate(self) -> dict:
        if not self.validation_set:
            return {}
        sequences = [(e.input_ids, e.score_positions, e.trajectory_position, e.step_spans) for e in self.validation_set]
        with zero.gathered_parameters(self.prm) if self.deepspeed else contextlib.nullcontext():
            logits, trajectory_logits = step_and_trajectory_logits(self.prm, sequences, self.config.batch_size, self.placement)
        record = _validation_metrics(logits, self.validation_set)
        threshold = choose_threshold([[sigmoid(x) for x in row] for row in logits], self.validation_set)
        record |= {"val_threshold": threshold.threshold, "val_first_error_f1": threshold.f1}
        # best/ and last/ carry the threshold of their own validation (PRMSettings.threshold; None: 0.5)
        self.prm.settings = replace(self.prm.settings, threshold=threshold.threshold)
        record |= trajectory_metrics(trajectory_logits, [e.trajectory_target for e in self.validation_set])
        if len(self.config.sources) > 1:  # how the PRM fits each source's labels, unweighted
            by_source = {}
            for index, source in enumerate(self.config.sources):
                mine = [(row, e) for row, e in zip(logits, self.validation_set) if e.source == index]
                if mine:
                    by_source[source.path] = _validation_metrics([row for row, _ in mine], [e for _, e in mine], weighted=False)["val_loss"]
            record["val_loss_by_source"] = by_source
        return record

    def _save_last(self, epoch_record: dict | None = None, model_state: dict | None = None) -> None:
        """last/ with the training state; every process takes part (the loss so far is summed over them), process 0 writes.
        `epoch_record`: the metrics line of the epoch just finished, kept so that a run killed before it reached
        metrics.jsonl writes it on resume (restore_metrics); `model_state`: the PRM's state already gathered for it."""
        loss_sum, loss_count = self.processes.sum([self.loss_sum.item(), self.loss_count])
        if model_state is None:
            model_state = self._model_state()
        if self.deepspeed:  # DeepSpeed's own checkpoint of the partitioned optimizer, into last/'s staging folder
            if self.processes.is_main:
                start_checkpoint(self.run_dir, LAST)
            self.processes.barrier()
            zero.save(self.model, staging_dir(self.run_dir, LAST) / zero.CHECKPOINT_FOLDER)
            self.processes.barrier()
            optimizer_state = None
        elif self.sharded:
            optimizer_state = sharding.full_optimizer_state(self.prm, self.optimizer)
        else:
            optimizer_state = self.optimizer.state_dict()
        rng_by_rank = self.processes.gather(torch.get_rng_state())
        cuda_rng_by_rank = self.processes.gather(torch.cuda.get_rng_state()) if torch.cuda.is_available() else None
        if not self.processes.is_main:
            return
        state = {
            "epoch": self.epoch,
            "batches_done": self.batches_done,
            "global_step": self.global_step,
            "best_metric": self.best_metric,
            "best_epoch": self.best_epoch,
            "best_metric_name": self.best_metric_name,
            "loss_sum": loss_sum,
            "loss_count": int(loss_count),
            "world_size": self.processes.world_size,
            "data_fingerprint": self.fingerprint,
            "optimizer": optimizer_state,
            "rng": torch.get_rng_state(),
            "rng_by_rank": rng_by_rank,
            "epoch_record": json.dumps(epoch_record) if epoch_record is not None else None,
        }
        if torch.cuda.is_available():
            state["cuda_rng"] = torch.cuda.get_rng_state_all()
            state["cuda_rng_by_rank"] = cuda_rng_by_rank
        if self.config.lora_rank:  # the adapters and heads as they are, unmerged: what a resume starts from (last/ holds them merged)
            whole = self.prm.state_dict() if model_state is None else model_state
            state["trainable"] = {name: whole[name].detach().cpu().clone() for name in self.trainable}
            state["frozen_fingerprint"] = self.frozen_fingerprint
        save_checkpoint(self.run_dir, LAST, self.prm, state, model_state=model_state, started=self.deepspeed)

    def _model_state(self) -> dict | None:
        """A sharded PRM's whole state, gathered on process 0 (every process calls this); None: the PRM saves its own."""
        if self.deepspeed:
            return zero.full_model_state(self.prm, self.processes.is_main)
        return sharding.full_model_state(self.prm) if self.sharded else None


def restore_metrics(run_dir: Path, epochs: int, epoch_record: str | None) -> None:
    """metrics.jsonl as a run saved after `epochs` epochs left it: one line per epoch up to it. A kill between
    saving last/ and appending the epoch's line left that line out: it is written from last/'s state; lines past
    the saved epochs (none are written before last/ is saved) are dropped."""
    path = run_dir / METRICS_NAME
    lines = path.read_text().splitlines() if path.is_file() else []
    kept = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:  # a line cut by a kill mid-write (or a full disk): dropped, and written again below when it is the saved epoch's
            log.warning("metrics.jsonl: dropped a line that is not JSON (cut by a stop mid-write?): %r", line[:80])
            continue
        if isinstance(record, dict) and record.get("epoch", 0) <= epochs:
            kept.append(line)
    if epoch_record is not None and not any(json.loads(line).get("epoch") == epochs for line in kept):
        log.info("metrics.jsonl lacked epoch %d (the run stopped before writing it): written from last/", epochs)
        kept.append(epoch_record)
    if kept != lines:
        temp = path.with_suffix(".tmp")
        temp.write_text("".join(line + "\n" for line in kept))
        temp.replace(path)


def epochs_to_train(config: TrainConfig, steps_per_epoch: int) -> int:
    """--epochs, or more when that many epochs take fewer than --min-steps optimizer steps."""
    return max(config.epochs, math.ceil(config.min_steps / max(1, steps_per_epoch)))


def learning_rate_at(step: int, peak: float, warmup_steps: int, total_steps: int, schedule: str = "linear") -> float:
    """The learning rate of optimizer step `step` (0-based) of `total_steps`: a linear warm-up over the
    first `warmup_steps` (step s at peak x (s + 1) / warmup_steps), then, over the steps left, `linear`
    decay from the peak towards 0 (reached one step past the last), `cosine` decay (half a cosine wave,
    from the peak towards 0 likewise) or `constant` (the peak). A schedule is a function of the step
    alone, so a resumed run replays it."""
    if step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    if schedule == "constant":
        return peak
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    if schedule == "linear":
        return peak * (1 - progress)
    if schedule == "cosine":
        return peak * 0.5 * (1 + math.cos(math.pi * progress))
    raise ValueError(f"unknown learning-rate schedule {schedule!r}")


@dataclass(frozen=True)
class ChosenThreshold:
    threshold: float | None  # None: no validation solution of each kind, nothing to choose on
    f1: float | None  # the validation first-error F1 at it
    erroneous: int
    correct: int


def choose_threshold(probabilities: list[list[float]], examples: list[PRMExample]) -> ChosenThreshold:
    """The step probability below which a step is called wrong, chosen as ProcessBench practice does: the one
    that maximises the first-error F1 on the validation solutions (the first step below it against the first
    step whose hard label is wrong; a solution whose steps are all right, up to its last, is correct). Only the
    steps with a target count; a solution with neither a wrong step nor its last step labelled is left out.
    Of equal F1s, the one nearest 0.5."""
    solutions = []
    for row, e in zip(probabilities, examples):
        wrong = next((k for k, hard in enumerate(e.hard_labels) if hard is False), None)
        if wrong is not None and all(hard is True for hard in e.hard_labels[:wrong]):
            solutions.append((wrong, row))
        elif wrong is None and e.ends_at_last_step and all(hard is True for hard in e.hard_labels):
            solutions.append((-1, row))
    erroneous, correct = sum(label >= 0 for label, _ in solutions), sum(label < 0 for label, _ in solutions)
    best = best_first_error_threshold(solutions)
    return ChosenThreshold(best[0], best[1], erroneous, correct) if best else ChosenThreshold(None, None, erroneous, correct)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _validation_metrics(logits: list[list[float]], examples: list[PRMExample], weighted: bool = True) -> dict:
    """Validation loss (weighted as in training, or not), and step accuracy and AUC against hard labels."""
    flat_logits = torch.tensor([x for row in logits for x in row], dtype=torch.float64)
    flat_targets = torch.tensor([t for e in examples for t in e.targets], dtype=torch.float64)
    flat_weights = torch.tensor([e.weight if weighted else 1.0 for e in examples for _ in e.targets], dtype=torch.float64)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(flat_logits, flat_targets, weight=flat_weights).item()
    hard_pairs = [(x, h) for row, e in zip(logits, examples) for x, h in zip(row, e.hard_labels) if h is not None]
    accuracy = sum((x >= 0) == h for x, h in hard_pairs) / len(hard_pairs) if hard_pairs else None
    auc = roc_auc([x for x, _ in hard_pairs], [h for _, h in hard_pairs])
    return {"val_loss": loss, "val_step_accuracy": accuracy, "val_auc": auc, "val_steps": len(flat_targets)}
