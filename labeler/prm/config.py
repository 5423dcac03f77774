"""Settings of a PRM training run (`labeler train`), saved beside its checkpoints as train_config.json."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

TARGETS = ("soft", "hard")
SELECT_BEST = ("val_loss", "val_auc")
PRECISIONS = ("auto", "fp32", "bf16-mixed", "bf16")
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class TrainConfig:
    labels: str  # a labeling job's output directory, a folder of labels shards, or one shard
    output: str
    model: str  # hub id or local folder of a causal LM
    model_name: str | None = None  # what the checkpoints record as the base model; default: model
    target: str = "soft"
    epochs: int = 3
    batch_size: int = 8
    gradient_accumulation_steps: int = 1
    learning_rate: float = 1e-5
    weight_decay: float = 0.0
    warmup_ratio: float = 0.05
    max_grad_norm: float = 1.0
    max_length: int = 2048
    validation_fraction: float = 0.1
    select_best: str = "val_loss"
    seed: int = 0
    device: str = "auto"
    precision: str = "auto"
    gradient_checkpointing: bool = False
    trust_remote_code: bool = False
    save_steps: int | None = None  # also save `last` every N optimizer steps within an epoch
    max_steps: int | None = None  # stop (resumable) after N optimizer steps in all

    # Settings a resumed run may change: they do not alter what the finished model is.
    RESUMABLE = frozenset({"output", "epochs", "device", "save_steps", "max_steps", "labels"})

    def __post_init__(self):
        checks = [
            (self.target in TARGETS, f"--target must be one of {', '.join(TARGETS)}"),
            (self.epochs >= 1, "--epochs must be at least 1"),
            (self.batch_size >= 1, "--batch-size must be at least 1"),
            (self.gradient_accumulation_steps >= 1, "--gradient-accumulation-steps must be at least 1"),
            (self.learning_rate > 0, "--learning-rate must be positive"),
            (self.weight_decay >= 0, "--weight-decay must be >= 0"),
            (0 <= self.warmup_ratio < 1, "--warmup-ratio must be in [0, 1)"),
            (self.max_grad_norm > 0, "--max-grad-norm must be positive"),
            (self.max_length >= 8, "--max-length must be at least 8 tokens"),
            (0 <= self.validation_fraction < 1, "--validation-fraction must be in [0, 1)"),
            (self.select_best in SELECT_BEST, f"--select-best must be one of {', '.join(SELECT_BEST)}"),
            (self.device in DEVICES, f"--device must be one of {', '.join(DEVICES)}"),
            (self.precision in PRECISIONS, f"--precision must be one of {', '.join(PRECISIONS)}"),
            (self.save_steps is None or self.save_steps >= 1, "--save-steps must be at least 1"),
            (self.max_steps is None or self.max_steps >= 1, "--max-steps must be at least 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    def to_dict(self) -> dict:
        return asdict(self)

    def changed_settings(self, saved: dict) -> list[str]:
        """Settings that differ from a saved run's and would change the model a resume produces."""
        names = [f.name for f in fields(self) if f.name not in self.RESUMABLE]
        return sorted(name for name in names if saved.get(name) != getattr(self, name))
