"""`labeler train`: a small PRM trainer that reads labels shards directly.

One loop, no framework: AdamW, linear warm-up then linear decay, gradient accumulation and
clipping, binary cross-entropy on each labelled step's score (soft or hard targets, see
`labeler.prm.data`), scaled by the weight of the step's label source (--labels DIR:WEIGHT; several
sources train together, split into train and validation by problem across all of them). After
every epoch it measures the validation problems (loss, step accuracy and AUC against hard labels),
appends a line to OUT/metrics.jsonl, writes OUT/last (with the training state) and, when the
selected metric improved, OUT/best. Labels with trajectory labels also train a trajectory head
beside the step head (labeler/prm/trajectory.py), its loss added with --trajectory-loss-weight,
and validate it (val_trajectory_*).

Rerunning the same command resumes from OUT/last: the same epoch order (a function of the seed
and epoch), the optimizer state and the random state, so an interrupted run ends with the model
an uninterrupted one would have. Raising --epochs continues a finished run (the learning-rate
schedule is then recomputed for the new total); changing anything that defines the model or
the data is refused.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from labeler.prm.checkpoints import (
    BEST,
    LAST,
    append_metrics,
    checkpoint_dir,
    load_training_state,
    read_saved_config,
    save_checkpoint,
    write_config,
)
from labeler.prm.devices import Placement, place
from labeler.evaluation.metrics import roc_auc
from labeler.store.reader import LabelledRow, read_labelled_rows
from labeler.prm.data import PRMExample, batches, build_examples, data_fingerprint, epoch_order, split_by_problem, weighted_loss
from labeler.prm.model import ProcessRewardModel
from labeler.prm.scoring import step_and_trajectory_logits
from labeler.prm.trajectory import trajectory_loss, trajectory_metrics
from labeler.prm.config import TrainConfig

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
    history: list[dict] = field(default_factory=list)


def train(config: TrainConfig) -> TrainResult:
    run_dir = Path(config.output)
    run_dir.mkdir(parents=True, exist_ok=True)
    placement = place(config.device, config.precision)
    rows = [read_labelled_rows(source.path) for source in config.sources]  # before loading a model: bad labels fail fast
    state = _resumable_state(run_dir, config)

    if state is not None:
        log.info("resuming from %s (epoch %d, step %d)", checkpoint_dir(run_dir, LAST), state["epoch"] + 1, state["global_step"])
        prm = ProcessRewardModel.load(
            checkpoint_dir(run_dir, LAST), dtype=placement.weight_dtype, trust_remote_code=config.trust_remote_code
        )
    else:
        torch.manual_seed(config.seed)  # the head's initialisation
        log.info("loading backbone %s", config.model_name or config.model)
        prm = ProcessRewardModel.from_backbone(
            config.model,
            max_length=config.max_length,
            target=config.target,
            dtype=placement.weight_dtype,
            trust_remote_code=config.trust_remote_code,
            name=config.model_name,
            trajectory_head=_wants_trajectory_head(config, rows),
        )

    train_set, validation_set = _examples(config, prm, rows)
    fingerprint = data_fingerprint(train_set + validation_set)
    if state is not None and state["data_fingerprint"] != fingerprint:
        raise TrainingError(f"{run_dir} was trained on other labels; use the same labels to resume, or another --output")
    write_config(run_dir, config.to_dict())
    validation_problems = sorted({e.problem_id for e in validation_set})
    (run_dir / SPLIT_NAME).write_text(json.dumps({"seed": config.seed, "validation_problem_ids": validation_problems}, indent=1) + "\n")

    prm.to(placement.device)
    if config.gradient_checkpointing:
        prm.backbone.gradient_checkpointing_enable()
    optimizer = torch.optim.AdamW(prm.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    if state is not None:
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        if "cuda_rng" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])

    loop = _TrainingLoop(config, prm, optimizer, placement, run_dir, train_set, validation_set, fingerprint, state)
    return loop.run()


def _wants_trajectory_head(config: TrainConfig, rows: list[list[LabelledRow]]) -> bool:
    """A trajectory head when its loss counts and some solution of some source has a trajectory label to train it on."""
    labelled = any(row.trajectory_label is not None for source_rows in rows for row in source_rows)
    if config.trajectory_loss_weight > 0 and not labelled:
        log.info("no trajectory labels in the labels (schema 1.3 or older, or imported): the PRM gets no trajectory head")
    return config.trajectory_loss_weight > 0 and labelled


def _resumable_state(run_dir: Path, config: TrainConfig) -> dict | None:
    state = load_training_state(run_dir)
    if state is None:
        return None
    saved = read_saved_config(run_dir) or {}
    changed = config.changed_settings(saved)
    if changed:
        raise TrainingError(
            f"{run_dir} holds a run with other settings (changed: {', '.join(changed)}); "
            "use the same settings to resume, or another --output"
        )
    return state


def _examples(config: TrainConfig, prm: ProcessRewardModel, rows: list[list[LabelledRow]]) -> tuple[list[PRMExample], list[PRMExample]]:
    """The examples of every source, in --labels order, split by problem across all of them."""
    examples: list[PRMExample] = []
    for index, (source, source_rows) in enumerate(zip(config.sources, rows)):
        built, stats = build_examples(source_rows, prm.tokenizer, config.target, config.max_length, source.weight, index)
        log.info(
            "labels %s [%s]: %d solutions, %d steps with a %s target, %d unlabelled, %d cut by --max-length %d, %d solutions left without a target",
            source.describe(),
            ", ".join(sorted({row.label_source for row in source_rows})) or "empty",
            stats.solutions,
            stats.steps_with_target,
            config.target,
            stats.steps_unlabelled,
            stats.steps_truncated,
            config.max_length,
            stats.solutions_dropped,
        )
        if not built:
            raise TrainingError(
                f"{source.path}: no step with a {config.target} label to train on "
                f"({stats.steps_unlabelled} steps unlabelled, {stats.steps_truncated} cut by --max-length {config.max_length})"
            )
        examples += built
    train_set, validation_set = split_by_problem(examples, config.validation_fraction, config.seed)
    log.info(
        "split by problem: %d train solutions, %d validation solutions (%d problems)",
        len(train_set),
        len(validation_set),
        len({e.problem_id for e in validation_set}),
    )
    if config.validation_fraction > 0 and not validation_set:
        log.warning("only one problem: no validation split; the best checkpoint follows the training loss")
    return train_set, validation_set


class _TrainingLoop:
    def __init__(self, config, prm, optimizer, placement: Placement, run_dir, train_set, validation_set, fingerprint, state):
        self.config = config
        self.prm = prm
        self.optimizer = optimizer
        self.placement = placement
        self.run_dir = run_dir
        self.train_set = train_set
        self.validation_set = validation_set
        self.fingerprint = fingerprint
        batches_per_epoch = math.ceil(len(train_set) / config.batch_size)
        self.steps_per_epoch = math.ceil(batches_per_epoch / config.gradient_accumulation_steps)
        self.total_steps = self.steps_per_epoch * config.epochs
        self.warmup_steps = math.ceil(config.warmup_ratio * self.total_steps)
        state = state or {}
        self.resumed = bool(state)
        self.epoch = state.get("epoch", 0)
        self.batches_done = state.get("batches_done", 0)  # micro-batches of the current epoch already trained
        self.global_step = state.get("global_step", 0)
        self.best_metric = state.get("best_metric")
        self.best_epoch = state.get("best_epoch")
        self.loss_sum = state.get("loss_sum", 0.0)  # of the current epoch, so a resumed epoch reports its whole loss
        self.loss_count = state.get("loss_count", 0)
        self.history: list[dict] = []

    def run(self) -> TrainResult:
        config = self.config
        if self.epoch >= config.epochs:
            log.info("%s already holds %d trained epochs: nothing to do (raise --epochs to train on)", self.run_dir, self.epoch)
            return self._result(stopped=False)
        log.info(
            "training on %s: %d epochs of %d optimizer steps (batch %d x %d accumulation), lr %g",
            self.placement.describe(),
            config.epochs,
            self.steps_per_epoch,
            config.batch_size,
            config.gradient_accumulation_steps,
            config.learning_rate,
        )
        stopped = False
        while self.epoch < config.epochs and not stopped:
            stopped = self._run_epoch()
        return self._result(stopped)

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
        )

    def _run_epoch(self) -> bool:
        """Train the rest of the current epoch; True when --max-steps stopped it part-way."""
        config = self.config
        started = time.monotonic()
        accumulation = config.gradient_accumulation_steps
        order = epoch_order(len(self.train_set), config.seed, self.epoch)
        total_batches = math.ceil(len(order) / config.batch_size)
        log_every = max(1, self.steps_per_epoch // 10)
        self.prm.train()
        self.optimizer.zero_grad(set_to_none=True)
        for batch in batches(self.train_set, order, config.batch_size, self.prm.pad_token_id, skip=self.batches_done):
            batch = batch.to(self.placement.device)
            group_size = min(accumulation, total_batches - (self.batches_done // accumulation) * accumulation)
            with self.placement.autocast():
                logits, trajectory_logits = self.prm.step_and_trajectory_logits(batch.input_ids, batch.attention_mask)
            mask = batch.step_mask
            loss = weighted_loss(logits[mask], batch.targets[mask], batch.weights[mask])
            loss = self._plus_trajectory_loss(loss, trajectory_logits, batch)
            (loss / group_size).backward()
            self.loss_sum += loss.item()
            self.loss_count += 1
            self.batches_done += 1
            if self.batches_done % accumulation and self.batches_done < total_batches:
                continue
            self._optimizer_step()
            step_in_epoch = math.ceil(self.batches_done / accumulation)
            if step_in_epoch % log_every == 0 and step_in_epoch < self.steps_per_epoch:
                log.info(
                    "epoch %d/%d step %d/%d: loss %.4f, lr %.3g",
                    self.epoch + 1,
                    config.epochs,
                    step_in_epoch,
                    self.steps_per_epoch,
                    self.loss_sum / self.loss_count,
                    self._learning_rate(self.global_step),
                )
            if self.batches_done >= total_batches:
                break
            if config.max_steps is not None and self.global_step >= config.max_steps:
                self._save_last()
                log.info("stopped after %d optimizer steps (--max-steps); rerun without it to continue", self.global_step)
                return True
            if config.save_steps and self.global_step % config.save_steps == 0:
                self._save_last()
        self._finish_epoch(time.monotonic() - started)
        return config.max_steps is not None and self.global_step >= config.max_steps and self.epoch < config.epochs

    def _plus_trajectory_loss(self, loss: torch.Tensor, trajectory_logits: torch.Tensor | None, batch) -> torch.Tensor:
        """The step loss plus --trajectory-loss-weight x the trajectory head's loss, where the batch has trajectory targets."""
        if trajectory_logits is None or batch.trajectory_positions is None:
            return loss
        extra = trajectory_loss(trajectory_logits, batch.trajectory_positions, batch.trajectory_targets)
        return loss if extra is None else loss + self.config.trajectory_loss_weight * extra

    def _optimizer_step(self) -> None:
        torch.nn.utils.clip_grad_norm_(self.prm.parameters(), self.config.max_grad_norm)
        for group in self.optimizer.param_groups:
            group["lr"] = self._learning_rate(self.global_step)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.global_step += 1

    def _learning_rate(self, step: int) -> float:
        peak = self.config.learning_rate
        if step < self.warmup_steps:
            return peak * (step + 1) / self.warmup_steps
        remaining = max(1, self.total_steps - self.warmup_steps)
        return peak * max(0.0, 1 - (step - self.warmup_steps) / remaining)

    def _finish_epoch(self, seconds: float) -> None:
        train_loss = self.loss_sum / max(1, self.loss_count)
        record = {"epoch": self.epoch + 1, "global_step": self.global_step, "train_loss": train_loss}
        record |= self._validate()
        record |= {"learning_rate": self._learning_rate(self.global_step - 1), "seconds": round(seconds, 3)}
        metric_name = self.config.select_best if self.validation_set else "train_loss"
        metric = record.get(metric_name)
        lower_is_better = metric_name.endswith("loss")
        improved = metric is not None and (
            self.best_metric is None or (metric < self.best_metric if lower_is_better else metric > self.best_metric)
        )
        if improved:
            self.best_metric, self.best_epoch = metric, self.epoch + 1
        record["best"] = improved
        self.epoch += 1
        self.batches_done, self.loss_sum, self.loss_count = 0, 0.0, 0
        if improved or checkpoint_dir(self.run_dir, BEST) is None:
            save_checkpoint(self.run_dir, BEST, self.prm)
        self._save_last()
        append_metrics(self.run_dir, record)
        self.history.append(record)
        log.info(
            "epoch %d/%d done in %.1fs: train loss %.4f, val loss %s, val step accuracy %s, val AUC %s%s",
            record["epoch"],
            self.config.epochs,
            seconds,
            train_loss,
            _fmt(record.get("val_loss")),
            _fmt(record.get("val_step_accuracy")),
            _fmt(record.get("val_auc")),
            " (best so far)" if improved else "",
        )

    def _validate(self) -> dict:
        if not self.validation_set:
            return {}
        sequences = [(e.input_ids, e.score_positions, e.trajectory_position) for e in self.validation_set]
        logits, trajectory_logits = step_and_trajectory_logits(self.prm, sequences, self.config.batch_size, self.placement)
        record = _validation_metrics(logits, self.validation_set)
        record |= trajectory_metrics(trajectory_logits, [e.trajectory_target for e in self.validation_set])
        if len(self.config.sources) > 1:  # how the PRM fits each source's labels, unweighted
            by_source = {}
            for index, source in enumerate(self.config.sources):
                mine = [(row, e) for row, e in zip(logits, self.validation_set) if e.source == index]
                if mine:
                    by_source[source.path] = _validation_metrics([row for row, _ in mine], [e for _, e in mine], weighted=False)["val_loss"]
            record["val_loss_by_source"] = by_source
        return record

    def _save_last(self) -> None:
        state = {
            "epoch": self.epoch,
            "batches_done": self.batches_done,
            "global_step": self.global_step,
            "best_metric": self.best_metric,
            "best_epoch": self.best_epoch,
            "loss_sum": self.loss_sum,
            "loss_count": self.loss_count,
            "data_fingerprint": self.fingerprint,
            "optimizer": self.optimizer.state_dict(),
            "rng": torch.get_rng_state(),
        }
        if torch.cuda.is_available():
            state["cuda_rng"] = torch.cuda.get_rng_state_all()
        save_checkpoint(self.run_dir, LAST, self.prm, state)


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


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"
