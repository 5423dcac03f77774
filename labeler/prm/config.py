"""Settings of a PRM training run (`labeler train`), saved beside its checkpoints as train_config.json.

`--labels DIR[:WEIGHT]`, repeatable: several label sources (Monte-Carlo, judge, consensus, human)
trained on at once. A source's weight scales the loss of its steps: the loss is the mean over the
batch's labelled steps of weight x binary cross-entropy, so a step of weight 2 counts as two steps
and weight 1 everywhere is the plain mean. (Weighting the loss, not the sampling: every epoch still
holds each solution once, in an order that depends on the seed alone, so a run resumes exactly and a
fractional weight means what it says; oversampling would repeat solutions and blur epochs.)
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields

from labeler.labeling.config import SEED_RANGE, check_choices, check_numbers, names_with, setting

TARGETS = ("soft", "hard")
UNMEASURED_STEPS = ("auto", "skip", "hard")  # under --target soft, what a step not measured at N trains on (labeler/prm/data.py)
SELECT_BEST = ("val_loss", "val_auc")
PRECISIONS = ("auto", "fp32", "bf16-mixed", "bf16")
DEVICES = ("auto", "cpu", "cuda")
BATCHING = ("packed", "padded")
ATTENTION = ("sdpa", "flash_attention_2", "eager")
LR_SCHEDULERS = ("linear", "cosine", "constant")
RENDERING_CHOICES = ("auto", "chat", "plain")
SHARDING = ("none", "fsdp", "fsdp-offload", "deepspeed")
FSDP = ("fsdp", "fsdp-offload")  # the --sharding values run by torch's FSDP2 (labeler.prm.sharding)

DATA, MODEL, OPTIMISATION, RUN = "data and output", "model", "optimisation", "run"
SCALE = "multi-GPU and LoRA"
DEVICE_HELP = "where the model runs: auto is cuda when available, else cpu"
PRECISION_HELP = "auto is bf16-mixed on a GPU with bfloat16, else fp32; bf16 halves weight memory"


@dataclass(frozen=True)
class LabelSource:
    """One --labels: where the labels are and how much their steps weigh in the loss."""

    path: str
    weight: float = 1.0

    @classmethod
    def parse(cls, spec: str) -> LabelSource:
        """`DIR` (weight 1) or `DIR:WEIGHT`: a last `:NUMBER` is the weight, so `s3://bucket/job` is a path
        and `s3://bucket/job:0.5` a path with its weight; ValueError for a weight that is not finite and > 0."""
        path, colon, weight = spec.rpartition(":")
        try:
            value = float(weight) if colon and path else None
        except ValueError:
            value = None
        if value is None:
            return cls(spec)
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"--labels {spec}: the weight must be a finite number > 0, got {weight}")
        return cls(path, value)

    def describe(self) -> str:
        return self.path if self.weight == 1 else f"{self.path} (weight {self.weight:g})"


@dataclass(frozen=True)
class TrainConfig:
    # Paths may change on resume (a moved folder: the data fingerprint still has to match); the number
    # of sources and their weights may not (changed_settings).
    labels: tuple[str, ...] = setting(
        help="labels to train on, DIR[:WEIGHT]: a labeling or import job's output directory, a folder of labels shards, "
        "or one shard; or TRL's stepwise supervision ({prompt, completions, labels} rows: a .jsonl or .parquet file, a "
        "folder of them, or hf:NAME[:CONFIG][@SPLIT], e.g. hf:trl-lib/math_shepherd@train), told apart by their columns; "
        "repeat to train on several sources at once, each step's loss scaled by its source's WEIGHT "
        "(default 1); the validation split is by problem across all sources",
        metavar="DIR[:WEIGHT]",
        group=DATA,
        may_change_on_resume=True,
    )
    output: str = setting(
        help="run folder: best/, last/, metrics.jsonl, train_config.json, split.json", metavar="DIR", group=DATA, may_change_on_resume=True
    )
    model: str = setting(
        help="backbone: hub id or local folder of a causal LM",
        group=MODEL,
        cli_default=None,
        default_text="the embedded SmolLM2-135M-Instruct",
    )
    model_name: str | None = setting(None, cli=False, help="what the checkpoints record as the base model; None: model")
    target: str = setting("soft", choices=TARGETS, help="train on soft labels (MC estimates) or hard labels", group=DATA)
    unmeasured_steps: str = setting(
        "auto",
        choices=UNMEASURED_STEPS,
        help="under --target soft, what steps whose label was not measured at N rollouts (label_method early_stop, inferred "
        "or retraced: a hard label, no soft one) train on, per --labels source. auto: a source whose rollouts were stopped "
        "at the first correct one (posterior, adaptive, or any early_stop step) trains whole on its hard labels, since the "
        "steps it measured at N are those whose early rounds failed (their soft labels are chosen by outcome); any other "
        "source as skip. skip: such steps are left out of the loss, measured steps keep c/N. hard: such steps train on "
        "their hard label as 0/1 beside the soft targets (a biased mix: their 1.0s pull the targets up). The run says what "
        "each source trained on. --target hard trains every step on its hard label",
        group=DATA,
    )
    epochs: int = setting(
        3, at_least=1, help="passes over the training set (more when --min-steps asks for them)", group=OPTIMISATION, may_change_on_resume=True
    )
    min_steps: int = setting(
        300,
        at_least=0,
        metavar="N",
        help="train at least N optimizer steps whatever the data size: a small label set gets as many epochs as that takes "
        "(a head and a backbone learn nothing in two dozen steps); 0: --epochs alone",
        group=OPTIMISATION,
    )
    batch_size: int = setting(8, at_least=1, help="solutions per micro-batch (per process under torchrun)", group=OPTIMISATION)
    gradient_accumulation_steps: int = setting(1, at_least=1, help="micro-batches per optimizer step", group=OPTIMISATION)
    learning_rate: float = setting(1e-5, above=0, help="peak learning rate of AdamW for the backbone", group=OPTIMISATION)
    head_learning_rate: float = setting(
        1e-3,
        above=0,
        help="peak learning rate of the heads (and the step-surprise weight), which start from nothing: they learn at "
        "their own rate while the backbone moves little; each head's bias starts at the log-odds of its targets' mean",
        group=OPTIMISATION,
    )
    weight_decay: float = setting(0.0, at_least=0, help="AdamW weight decay", group=OPTIMISATION)
    warmup_ratio: float = setting(
        0.05, at_least=0, below=1, help="share of steps with linear warm-up to --learning-rate, then --lr-scheduler", group=OPTIMISATION
    )
    lr_scheduler: str = setting(
        "cosine",
        choices=LR_SCHEDULERS,
        help="the learning rate after the warm-up: linear decay from --learning-rate towards 0 (which it would reach "
        "one step past the last), cosine (half a cosine wave, towards 0 likewise), or constant (--learning-rate throughout)",
        group=OPTIMISATION,
    )
    max_grad_norm: float = setting(1.0, above=0, help="gradient clipping", group=OPTIMISATION)
    max_length: int = setting(2048, at_least=8, help="tokens per solution; steps past it get no target", group=DATA)
    train_on_last_step_only: bool = setting(
        False,
        help="only the last step of each training solution gets a target (TRL's option of that name; a solution whose "
        "last step has no label or is cut by --max-length trains on nothing); validation still measures every step",
        group=DATA,
    )
    trajectory_loss_weight: float = setting(
        1.0,
        at_least=0,
        metavar="W",
        help="labels with trajectory labels (schema 1.4) also train a trajectory head, read after the last step: "
        "loss = step loss + W x trajectory loss; 0: no trajectory head",
        group=OPTIMISATION,
    )
    validation_fraction: float = setting(0.1, at_least=0, below=1, help="share of problems held out for validation", group=DATA)
    select_best: str = setting(
        "val_auc",
        choices=SELECT_BEST,
        help="metric that picks the best checkpoint: the validation step AUC (how well the scores rank right steps above "
        "wrong ones, against hard labels) or the validation loss",
        group=OPTIMISATION,
    )
    seed: int = setting(0, **SEED_RANGE, help="split, shuffling and head initialisation", group=OPTIMISATION)
    device: str = setting("auto", choices=DEVICES, help=DEVICE_HELP, group=RUN, may_change_on_resume=True)
    precision: str = setting("auto", choices=PRECISIONS, help=PRECISION_HELP, group=RUN)
    pack_length: int | None = setting(
        None,
        at_least=8,
        help="tokens per packed row: a micro-batch's solutions share rows of at most N tokens (at least its longest "
        "solution), attention kept within each solution; longer rows pad less, but sdpa computes a row's attention whole",
        metavar="N",
        group=RUN,
        default_text="the width that pads least without more attention work than padded batches",
        may_change_on_resume=True,
    )
    # `padded` is the layout before packing (each solution a row, padded to the longest of its
    # micro-batch): the same batches and loss; kept to compare against (tests, bench/trainer.py).
    batching: str = setting(
        "packed", choices=BATCHING, cli=False, help="packed rows or one padded row per solution", may_change_on_resume=True
    )
    attention: str = setting(
        "sdpa",
        choices=ATTENTION,
        help="attention kernels: sdpa is torch's fused scaled-dot-product attention; flash_attention_2 needs the "
        "flash-attn package and reads packed rows without a mask; eager is plain PyTorch",
        group=RUN,
        may_change_on_resume=True,
    )
    gradient_checkpointing: bool = setting(False, help="trade compute for memory on large backbones", group=MODEL)
    step_surprise: bool = setting(
        True,
        help="add to each step's logit a learnt weight (starting at 1) x the lowest log-probability the backbone's own "
        "language model gives a token of the step: the head starts from what the model already finds unlikely; "
        "vLLM cannot serve such a PRM (`labeler score` uses torch); --no-step-surprise for a plain token-classifier head",
        group=MODEL,
    )
    rendering: str = setting(
        "auto",
        choices=RENDERING_CHOICES,
        help="how the PRM reads a solution: chat (the backbone's chat template around the labeler's prompt, as the "
        "completer saw it), plain (problem and steps separated by blank lines), or auto (chat where the tokenizer has a template)",
        group=MODEL,
    )
    trust_remote_code: bool = setting(False, help="let the model repository run its own code", group=MODEL)
    sharding: str = setting(
        "none",
        choices=SHARDING,
        help="under torchrun (or accelerate launch): none keeps a whole model in each process (DistributedDataParallel); "
        "fsdp shards parameters, gradients and AdamW state across the processes with torch's FSDP2 (fully_shard, one unit "
        "per decoder layer: what DeepSpeed calls ZeRO-3); fsdp-offload also keeps the shards in CPU memory between uses "
        "(GPUs only); deepspeed shards the same way with DeepSpeed's ZeRO stage 3. Checkpoints are gathered whole, so every "
        "reader loads them as they are",
        group=SCALE,
    )
    lora_rank: int = setting(
        0,
        at_least=0,
        metavar="R",
        help="train low-rank adapters of rank R (peft's LoRA) in the backbone instead of all its weights; the heads train "
        "whole; checkpoints hold the adapters merged into full weights. 0: train the whole backbone",
        group=SCALE,
    )
    lora_alpha: float | None = setting(
        None, above=0, help="LoRA's scale numerator: an adapter's update is scaled by ALPHA / R", metavar="ALPHA", group=SCALE,
        default_text="2 x --lora-rank",
    )  # fmt: skip
    lora_dropout: float = setting(0.0, at_least=0, below=1, help="dropout on the adapters' input", group=SCALE)
    lora_target_modules: str = setting(
        "all-linear",
        help="the backbone's layers that get adapters: all-linear (every linear layer of the decoder), or comma-separated "
        "module names such as q_proj,k_proj,v_proj,o_proj",
        metavar="NAMES",
        group=SCALE,
    )
    load_in_4bit: bool = setting(
        False,
        help="QLoRA (TRL's load_in_4bit): load the backbone's linear layers frozen in 4 bits under the --lora-rank adapters "
        "(bitsandbytes NF4 with double quantization, computed in bfloat16 under bf16-mixed, float32 otherwise); checkpoints "
        "hold the dequantized base with the adapters merged, a full PRM. One process or DDP, not --sharding",
        group=SCALE,
    )
    save_steps: int | None = setting(
        None,
        at_least=1,
        help="also save last/ every N optimizer steps within an epoch",
        metavar="N",
        group=RUN,
        default_text="at the end of each epoch only",
        may_change_on_resume=True,
    )
    max_steps: int | None = setting(
        None,
        at_least=1,
        help="stop after N optimizer steps in all (resumable)",
        metavar="N",
        group=RUN,
        default_text="no limit",
        may_change_on_resume=True,
    )

    def __post_init__(self):
        if isinstance(self.labels, str):  # one source, as Python callers write it
            object.__setattr__(self, "labels", (self.labels,))
        object.__setattr__(self, "labels", tuple(self.labels))
        check_choices(self)
        check_numbers(self)
        if not self.labels:
            raise ValueError("--labels: give at least one source of labels")
        paths = [source.path for source in self.sources]
        repeated = sorted({path for path in paths if paths.count(path) > 1})
        if repeated:
            raise ValueError(f"--labels {repeated[0]} is given twice: give it once, with a weight if it should count more")
        if not self.lora_target_modules.strip(" ,"):
            raise ValueError("--lora-target-modules: name at least one module, or all-linear")
        targets = [name.strip().lower() for name in self.lora_target_modules.split(",") if name.strip()]
        if "all-linear" in targets and len(targets) > 1:
            raise ValueError(f"--lora-target-modules {self.lora_target_modules}: all-linear already names every linear layer; give it alone")
        lora_settings = {"--lora-alpha": self.lora_alpha is not None, "--lora-dropout": self.lora_dropout != 0.0,
                         "--lora-target-modules": targets != ["all-linear"]}  # fmt: skip
        given = [flag for flag, set_ in lora_settings.items() if set_]
        if self.lora_rank == 0 and given:
            raise ValueError(f"{', '.join(given)} without --lora-rank: give the adapters' rank, or drop {'them' if len(given) > 1 else 'it'}")
        if self.sharding == "deepspeed" and self.precision == "bf16":
            raise ValueError(
                "--sharding deepspeed with --precision bf16: DeepSpeed's bf16 mode keeps float32 master weights in the optimizer, "
                "which is --precision bf16-mixed; use that (or fp32)"
            )
        if self.target == "hard" and self.unmeasured_steps != "auto":
            raise ValueError("--unmeasured-steps is for --target soft: under --target hard every step trains on its hard label already")
        if self.load_in_4bit and not self.lora_rank:
            raise ValueError(
                "--load-in-4bit without --lora-rank: a 4-bit base is frozen, only LoRA adapters can train on it; give --lora-rank R"
            )
        if self.load_in_4bit and self.sharding != "none":
            raise ValueError(
                f"--load-in-4bit with --sharding {self.sharding}: QLoRA runs on one process or with DDP (--sharding none); "
                "sharded QLoRA is not built"
            )
        if self.lora_rank and self.precision == "bf16":
            raise ValueError(
                "--lora-rank with --precision bf16: bfloat16 weights round away most of an adapter's update when it is merged into "
                "the checkpoint; use bf16-mixed (float32 weights, bfloat16 compute)"
            )

    @property
    def resolved_lora_alpha(self) -> float:
        """--lora-alpha, or twice --lora-rank when not given: an adapter's update B @ A is scaled by it / the rank."""
        return self.lora_alpha if self.lora_alpha is not None else 2 * self.lora_rank

    @property
    def sources(self) -> tuple[LabelSource, ...]:
        return tuple(LabelSource.parse(spec) for spec in self.labels)

    def to_dict(self) -> dict:
        return asdict(self)

    def changed_settings(self, saved: dict) -> list[str]:
        """Settings that differ from a saved run's and would change the model a resume produces
        (for --labels: the number of sources and their weights; the data itself is checked apart)."""
        # unmeasured_steps: the data fingerprint (its targets) decides, whatever the saved run holds (unmeasured_steps_hint)
        names = [f.name for f in fields(self) if f.name not in self.RESUMABLE and f.name != "unmeasured_steps"]
        mine = json.loads(json.dumps(self.to_dict()))  # as the saved config holds them (tuples as lists)
        changed = [name for name in names if saved.get(name, ADDED_LATER.get(name)) != mine[name]]
        saved_labels = saved.get("labels", ())
        saved_weights = [LabelSource.parse(spec).weight for spec in ([saved_labels] if isinstance(saved_labels, str) else saved_labels)]
        weights = [source.weight for source in self.sources]
        if saved_weights != weights:
            changed.append(f"labels (weights {_weights(saved_weights)} -> {_weights(weights)})")
        return sorted(changed)


def _weights(weights: list[float]) -> str:
    return ", ".join(f"{weight:g}" for weight in weights) or "none"


# Settings added after runs were saved without them, and the value such a run trained with (linear decay, a
# target on every step, no minimum of steps, no step-surprise term, the plain rendering): a saved config that
# lacks one reads as holding it. (A run saved before --head-learning-rate trained its heads at the backbone's
# rate, in one optimizer group: it cannot resume under this trainer, and a rerun says so.) unmeasured_steps is not
# checked as a setting: what it changes is the targets, which the data fingerprint holds, so a run resumes under any
# value that gives its labels the same targets (labels with no step not measured at N, --target hard runs, a run saved
# under skip whose sources auto trains as skip), and a refusal says what the run trained with (unmeasured_steps_hint).
ADDED_LATER = {
    "lr_scheduler": "linear", "train_on_last_step_only": False, "min_steps": 0, "step_surprise": False, "rendering": "plain",
    "sharding": "none", "lora_rank": 0, "lora_alpha": None, "lora_dropout": 0.0, "lora_target_modules": "all-linear",
    "load_in_4bit": False,
}  # fmt: skip

# What runs saved before --unmeasured-steps trained their steps not measured at N on: their hard label.
UNMEASURED_STEPS_BEFORE_THE_FLAG = "hard"


def unmeasured_steps_hint(saved: dict, config: TrainConfig) -> str:
    """For a resume its data fingerprint refused: the --unmeasured-steps the saved run trained with, where it is not this
    run's (under --target soft) and so may be what changed its targets; "" otherwise."""
    before = saved.get("unmeasured_steps", UNMEASURED_STEPS_BEFORE_THE_FLAG)
    if config.target != "soft" or before == config.unmeasured_steps:
        return ""
    how = "as runs before --unmeasured-steps did" if "unmeasured_steps" not in saved else "not as this run's"
    return f" (or it trained its steps under --unmeasured-steps {before}, {how}: pass --unmeasured-steps {before})"


# Settings a resumed run may change: they do not alter what the finished model is.
TrainConfig.RESUMABLE = frozenset(names_with(TrainConfig, "may_change_on_resume"))
