"""Labels shards to PRM training examples: rendering, targets, the split by problem, batches.

Targets per step: `soft` is the soft label, the Monte-Carlo estimate c/N. A step whose label was not
measured at N (schemas/tables.py NOT_MEASURED_AT_N: `early_stop`, `inferred`, `retraced`: a hard label
only, resting on fewer rollouts of its own prefix or none) has no such estimate. `unmeasured_steps` says
what such steps train on under `soft`, per label source:
- `auto` (the default): a source whose rollouts were stopped on their outcome (an `early_stop` step, or a
  strategy in OUTCOME_STOPPING: posterior and adaptive stop a prefix at its first correct rollout) trains
  whole on its hard labels. Its steps that kept N rollouts are those whose early rounds failed, so leaving
  the others out would keep soft labels chosen by their outcome (28 of 300 steps of true rate 0.3 kept,
  at a mean of 0.08); the hard label, any rollout correct, is what exhaustive gives a prefix stopped at its
  first correct rollout on the same draws. Any other source (exhaustive, first-error) is as under `skip`.
- `skip`: such steps are left out of the loss (trained at 1.0 beside measured steps at c/N they would pull
  the targets up, 0.71 against 0.30 on steps of true rate 0.3); measured steps keep c/N.
- `hard`: such steps train on their hard label as 0/1 beside measured steps at c/N (a biased mix).
A step whose only label is a hard one that was measured ("human" from an import, "judge", TRL's stepwise
rows) trains on it as 0/1. `hard` is the hard label of every step. Steps with no label
("unlabelled") and steps cut off by the length limit get no target. `ExampleStats` counts the steps by
what they trained on, per label method. Accuracy and AUC are always
measured against hard labels. Each example carries its label source's index and weight (--labels
DIR:WEIGHT): `weighted_loss` scales each step's loss by it (labeler/prm/config.py says why).
With --train-on-last-step-only, `last_step_only` keeps each training solution's last step's target
alone (TRL's option of that name).

Batches. An epoch's shuffled order (`epoch_order`) is cut into micro-batches of `batch_size`
solutions. `packed` (the default) lays a micro-batch's solutions end to end in rows, balanced so
they come out about equally long (`pack_rows`), as wide as pads least without more attention work
than padding would do, or of at most `pack_length` tokens (`plan_rows`); each solution's position
ids restart at 0, which keeps its attention within itself (transformers reads packed rows from the
position ids). The same solutions train together as with `padded`, the layout before packing,
where each solution is a row padded to the longest of its micro-batch: the same loss, with far
fewer pad tokens (on ProcessBench MATH by the SmolLM2 tokenizer, 1.05 tokens per real token at
batch 16 instead of 2.28) and less attention work.

The trajectory target (labels of schema 1.4) is the solution's trajectory label, 0/1, read at the
last step's position; a solution cut by the length limit, or without a trajectory label, has none.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

import torch

from labeler.store.reader import LabelledRow
from labeler.prm.model import StepSpans
from labeler.prm.rendering import render_solution
from labeler.prm.config import TARGETS, UNMEASURED_STEPS
from schemas.tables import NOT_MEASURED_AT_N


@dataclass(frozen=True)
class PRMExample:
    problem_id: str
    solution_id: str
    input_ids: list[int]
    score_positions: list[int]  # steps with a target only
    targets: list[float]
    hard_labels: list[bool | None]
    weight: float = 1.0  # of its label source, on each of its steps' loss
    source: int = 0  # index of its label source among --labels
    trajectory_position: int | None = None  # the last step's score position, when the whole solution fits
    trajectory_target: float | None = None  # 1.0 when the trajectory reaches the answer, 0.0 when not
    ends_at_last_step: bool = False  # its last target is the solution's last step (labelled, within --max-length)
    step_spans: list[tuple[int, int]] | None = None  # [start, end) of each target step's own tokens (a step-surprise PRM reads them)
    target_methods: list[tuple[str, str]] | None = None  # each target's (label method, "soft" or "hard"), for the counts


@dataclass(frozen=True)
class ExampleStats:
    solutions: int
    steps_with_target: int
    steps_unlabelled: int
    steps_truncated: int
    solutions_dropped: int  # no step left with a target
    # steps with a target, by label method, then by what they train on ("soft": c/N, "hard": the hard label as 0/1)
    trained: dict[str, dict[str, int]] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)  # by method: not measured at N, with no soft target (skip)
    outcome_stopped: str | None = None  # auto: why this source trains whole on its hard labels (outcome_stopped)


# Strategies that stop a prefix's rollouts on their outcome (at its first correct one): their soft labels are chosen by it.
OUTCOME_STOPPING = ("posterior", "adaptive")


def outcome_stopped(rows: Sequence[LabelledRow]) -> str | None:
    """Why a source's soft labels are chosen by their outcome (its strategy stops rollouts at the first correct one,
    or some step of it was stopped early), or None."""
    strategies = sorted({row.strategy for row in rows if row.strategy in OUTCOME_STOPPING})
    if strategies:
        return f"{' and '.join(strategies)} stop{'s' if len(strategies) == 1 else ''} rollouts at the first correct one"
    stopped = sum(method == "early_stop" for row in rows for method in row.label_method)
    if stopped:
        return f"{stopped} of its steps were stopped early (early_stop: rollouts stopped on their outcome)"
    return None


def source_targets(rows: Sequence[LabelledRow], target: str, unmeasured_steps: str) -> tuple[str, str, str | None]:
    """The target and unmeasured-steps rule a source trains under, and, where auto trains it whole on its hard
    labels, why (module docstring)."""
    if target != "soft" or unmeasured_steps != "auto":
        return target, unmeasured_steps, None
    why = outcome_stopped(rows)
    if why is None:
        return "soft", "skip", None
    return "hard", "skip", f"{why}, so its soft labels are chosen by outcome: trained on hard labels"


def outcome_stopped_hint() -> str:
    return " (pass --target hard to say so, or --unmeasured-steps hard to train its measured steps soft anyway)"


def build_examples(
    rows: Sequence[LabelledRow], tokenizer, target: str, max_length: int, weight: float = 1.0, source: int = 0, rendering: str = "plain",
    unmeasured_steps: str = "auto",
) -> tuple[list[PRMExample], ExampleStats]:  # fmt: skip
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    if unmeasured_steps not in UNMEASURED_STEPS:
        raise ValueError(f"unmeasured_steps must be one of {', '.join(UNMEASURED_STEPS)}, got {unmeasured_steps!r}")
    target, unmeasured_steps, why = source_targets(rows, target, unmeasured_steps)
    examples: list[PRMExample] = []
    unlabelled = truncated = dropped = 0
    trained: dict[str, dict[str, int]] = {}
    left_out: dict[str, int] = {}
    for row in rows:
        rendered = render_solution(tokenizer, row.problem, row.steps, max_length, row.thinking_steps, rendering)
        truncated += len(row.steps) - rendered.steps_kept
        positions, targets, hard, spans, methods, last = [], [], [], [], [], -1
        for i, position in enumerate(rendered.score_positions):
            value, kind, method = step_target(row, i, target, unmeasured_steps)
            if kind == "left out":
                left_out[method] = left_out.get(method, 0) + 1
                continue
            if value is None:
                unlabelled += 1
                continue
            by_kind = trained.setdefault(method, {})
            by_kind[kind] = by_kind.get(kind, 0) + 1
            positions.append(position)
            targets.append(value)
            hard.append(row.hard_labels[i])
            spans.append(rendered.step_spans[i])
            methods.append((method, kind))
            last = i
        if not positions:
            dropped += 1
            continue
        whole = rendered.steps_kept == len(row.steps)
        trajectory = _as_float(row.trajectory_label) if whole else None
        examples.append(
            PRMExample(
                row.problem_id, row.solution_id, rendered.input_ids, positions, targets, hard, weight, source,
                trajectory_position=rendered.score_positions[-1] if trajectory is not None else None,
                trajectory_target=trajectory,
                ends_at_last_step=last == len(row.steps) - 1,
                step_spans=spans,
                target_methods=methods,
            )
        )  # fmt: skip
    stats = ExampleStats(len(rows), sum(len(e.targets) for e in examples), unlabelled, truncated, dropped, trained, left_out, why)
    return examples, stats


def step_target(row: LabelledRow, i: int, target: str, unmeasured_steps: str = "skip") -> tuple[float | None, str, str]:
    """Step i's target, what it is ("soft", "hard", or "left out": not measured at N, no soft target under
    skip) and its label method. A value of None with kind "soft"/"hard": the step has no label."""
    method = row.label_method[i] if i < len(row.label_method) else "unlabelled"
    hard = _as_float(row.hard_labels[i])
    if target == "hard":
        return hard, "hard", method
    if method in NOT_MEASURED_AT_N:  # whatever soft value an old shard holds: it is not c/N of N rollouts
        if hard is not None and unmeasured_steps == "skip":
            return None, "left out", method
        return hard, "hard", method
    soft = row.soft_labels[i]
    return (soft, "soft", method) if soft is not None else (hard, "hard", method)


@dataclass
class StepCounts:
    """Steps over all label sources: with a target, by method and kind (counted on the examples trained and validated
    on, after the split and --train-on-last-step-only, once `split` is called), in the train and validation splits;
    left out, unlabelled, cut by the length limit; and the sources trained whole on their hard labels, and why."""

    trained: dict[str, dict[str, int]] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)
    unlabelled: int = 0
    cut: int = 0
    train: int | None = None  # None: before the split (one source's counts)
    validation: int | None = None
    outcome_stopped: list[str] = field(default_factory=list)  # one line per source auto trained whole on hard labels

    def add(self, stats: ExampleStats, source: str = "") -> None:
        for method, kinds in stats.trained.items():
            mine = self.trained.setdefault(method, {})
            for kind, count in kinds.items():
                mine[kind] = mine.get(kind, 0) + count
        for method, count in stats.left_out.items():
            self.left_out[method] = self.left_out.get(method, 0) + count
        self.unlabelled += stats.steps_unlabelled
        self.cut += stats.steps_truncated
        if stats.outcome_stopped:
            self.outcome_stopped.append(f"{source}: {stats.outcome_stopped}{outcome_stopped_hint()}")

    def split(self, train: Sequence[PRMExample], validation: Sequence[PRMExample]) -> None:
        """The steps with a target as trained and validated on: after the split and --train-on-last-step-only."""
        self.train = sum(len(e.targets) for e in train)
        self.validation = sum(len(e.targets) for e in validation)
        self.trained = {}
        for example in [*train, *validation]:
            for method, kind in example.target_methods or ():
                by_kind = self.trained.setdefault(method, {})
                by_kind[kind] = by_kind.get(kind, 0) + 1

    def describe(self) -> str:
        """`24 with a target (20 train, 4 validation): 20 rollouts on their soft label, 4 inferred on their hard label;
        left out: ...; N unlabelled; N cut` (the split's part once it is known)."""
        total = sum(count for kinds in self.trained.values() for count in kinds.values())
        parts = [
            f"{count} {method} on their {kind} label"
            for method, kinds in sorted(self.trained.items(), key=lambda item: _method_order(item[0]))
            for kind, count in sorted(kinds.items(), key=lambda item: item[0] != "soft")
        ]
        split = "" if self.train is None else f" ({self.train} train, {self.validation} validation)"
        text = f"{total} with a target{split}: {', '.join(parts) or 'none'}"
        if self.left_out:
            left = ", ".join(f"{count} {method}" for method, count in sorted(self.left_out.items(), key=lambda item: _method_order(item[0])))
            text += f"; left out: {left} (not measured at N: no soft target)"
        return text + f"; {self.unlabelled} unlabelled; {self.cut} cut by --max-length"

    def to_dict(self) -> dict:
        return {"trained": self.trained, "train": self.train, "validation": self.validation, "left_out": self.left_out,
                "unlabelled": self.unlabelled, "cut": self.cut, "outcome_stopped": self.outcome_stopped}  # fmt: skip


def source_warnings(stats: ExampleStats, counts: StepCounts, name: str) -> list[str]:
    """What a source's log says of its steps not trained on c/N: trained whole on hard labels (auto), or left out."""
    lines = list(counts.outcome_stopped)
    if stats.left_out:
        lines.append(
            f"labels {name}: left out of the soft loss: {', '.join(f'{count} {method}' for method, count in stats.left_out.items())} "
            "steps not measured at N (a hard label only: trained at 1.0 beside measured steps at c/N they would pull the targets "
            "up); --unmeasured-steps hard trains them on it, --target hard trains every step so"
        )
    return lines


def _method_order(method: str) -> tuple[int, str]:
    """Measured methods first, then those not measured at N, then the rest (human, judge, ...), by name."""
    order = {"rollouts": 0, "final_answer": 1, **{m: 2 + k for k, m in enumerate(NOT_MEASURED_AT_N)}}
    return order.get(method, len(order) + 2), method


def last_step_only(examples: Sequence[PRMExample]) -> list[PRMExample]:
    """--train-on-last-step-only: each example with its last step's target alone; an example whose
    solution's last step has no target (unlabelled, or cut by the length limit) is left out. The
    trajectory target stays (it is read at the same position)."""
    return [
        replace(e, score_positions=e.score_positions[-1:], targets=e.targets[-1:], hard_labels=e.hard_labels[-1:],
                step_spans=None if e.step_spans is None else e.step_spans[-1:],
                target_methods=None if e.target_methods is None else e.target_methods[-1:])  # fmt: skip
        for e in examples
        if e.ends_at_last_step
    ]


def _as_float(value: bool | None) -> float | None:
    return None if value is None else float(value)


def split_by_problem(examples: Sequence[PRMExample], validation_fraction: float, seed: int) -> tuple[list[PRMExample], list[PRMExample]]:
    """All solutions of a problem land on the same side. The order of problems is a hash of
    (seed, problem_id), so the split does not depend on row order; the first
    ceil(fraction * problems) are validation, at least one when the fraction is positive and
    there are two problems or more."""
    if not 0 <= validation_fraction < 1:
        raise ValueError(f"validation fraction must be in [0, 1), got {validation_fraction}")
    problems = sorted({e.problem_id for e in examples}, key=lambda pid: hashlib.sha256(f"{seed}\x1f{pid}".encode()).hexdigest())
    count = math.ceil(validation_fraction * len(problems))
    if validation_fraction > 0 and len(problems) >= 2:
        count = min(max(count, 1), len(problems) - 1)
    else:
        count = 0
    validation = set(problems[:count])
    return [e for e in examples if e.problem_id not in validation], [e for e in examples if e.problem_id in validation]


# Below these the validation split cannot choose best/ or the threshold: its AUC and F1 move by whole steps.
MIN_VALIDATION_PROBLEMS = 5
MIN_VALIDATION_STEPS_EACH = 10


def validation_too_small(validation: Sequence[PRMExample]) -> str | None:
    """What makes a non-empty validation split too small to choose by (few problems, or few right or wrong steps), or None."""
    if not validation:
        return None
    problems = len({e.problem_id for e in validation})
    right = sum(h is True for e in validation for h in e.hard_labels)
    wrong = sum(h is False for e in validation for h in e.hard_labels)
    if problems >= MIN_VALIDATION_PROBLEMS and min(right, wrong) >= MIN_VALIDATION_STEPS_EACH:
        return None
    return (
        f"the validation split ({problems} problem{'s' if problems != 1 else ''}, {right} right and {wrong} wrong steps) is too "
        f"small to choose best/ or the threshold by (wanted: {MIN_VALIDATION_PROBLEMS} problems, {MIN_VALIDATION_STEPS_EACH} "
        "steps of each kind): its AUC and first-error F1 are noise; raise --validation-fraction or label more problems"
    )


@dataclass
class Batch:
    input_ids: torch.Tensor  # [batch, length], right-padded
    attention_mask: torch.Tensor
    step_mask: torch.Tensor  # True at score positions that carry a target
    targets: torch.Tensor  # float, meaningful where step_mask
    weights: torch.Tensor  # float, the step's label-source weight where step_mask
    # [batch]: where each solution's trajectory score is read (-1: no trajectory target), and its target
    trajectory_positions: torch.Tensor | None = None
    trajectory_targets: torch.Tensor | None = None
    spans: StepSpans | None = None  # the target steps' spans, their owners in step_mask's row-major order

    def to(self, device: torch.device) -> Batch:
        tensors = (self.input_ids, self.attention_mask, self.step_mask, self.targets, self.weights, self.trajectory_positions, self.trajectory_targets)
        moved = Batch(*(None if tensor is None else tensor.to(device) for tensor in tensors))
        moved.spans = None if self.spans is None else self.spans.to(device)
        return moved


def pad(sequences: Sequence[list[int]], pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded token ids and their attention mask."""
    shape = (len(sequences), max(len(ids) for ids in sequences))
    input_ids = torch.full(shape, pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros(shape, dtype=torch.long)
    for row, ids in enumerate(sequences):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention_mask[row, : len(ids)] = 1
    return input_ids, attention_mask


def collate(examples: Sequence[PRMExample], pad_token_id: int) -> Batch:
    input_ids, attention_mask = pad([e.input_ids for e in examples], pad_token_id)
    step_mask = torch.zeros(input_ids.shape, dtype=torch.bool)
    targets = torch.zeros(input_ids.shape, dtype=torch.float32)
    weights = torch.zeros(input_ids.shape, dtype=torch.float32)
    for row, example in enumerate(examples):
        step_mask[row, example.score_positions] = True
        targets[row, example.score_positions] = torch.tensor(example.targets)
        weights[row, example.score_positions] = example.weight
    trajectory_positions = torch.tensor([-1 if e.trajectory_position is None else e.trajectory_position for e in examples])
    trajectory_targets = torch.tensor([0.0 if e.trajectory_target is None else e.trajectory_target for e in examples])
    width = input_ids.shape[1]
    spans = flat_spans([(e.step_spans, row * width) for row, e in enumerate(examples)])
    return Batch(input_ids, attention_mask, step_mask, targets, weights, trajectory_positions, trajectory_targets, spans)


def flat_spans(pieces: Sequence[tuple[list[tuple[int, int]] | None, int]]) -> StepSpans | None:
    """The spans of several solutions' scored steps, each solution's `(spans, offset)` with the flat index
    where it starts, its steps numbered after the previous solutions'; None when a solution has none
    recorded (examples built before spans were)."""
    if any(spans is None for spans, _ in pieces):
        return None
    return StepSpans.from_lists([span for spans, _ in pieces for span in spans], [offset for spans, offset in pieces for _ in spans])


def weighted_loss(logits: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Mean over the steps of weight x binary cross-entropy (of the logits against soft or hard
    targets): a step of weight 2 counts as two steps; all weights 1 is the plain mean."""
    return torch.nn.functional.binary_cross_entropy_with_logits(logits.float(), targets, weight=weights)


def epoch_order(count: int, seed: int, epoch: int) -> list[int]:
    """The shuffled order of epoch `epoch`, a function of (seed, epoch) only, so a resumed run
    replays the same batches."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return torch.randperm(count, generator=generator).tolist()


def batches(examples: Sequence[PRMExample], order: Sequence[int], batch_size: int, pad_token_id: int, skip: int = 0) -> Iterator[Batch]:
    """Batches of `examples` taken in `order`, leaving out the first `skip` batches."""
    for start in range(skip * batch_size, len(order), batch_size):
        yield collate([examples[i] for i in order[start : start + batch_size]], pad_token_id)


class ExampleTensors:
    """The training examples as tensors, made once, so that building a batch in the training loop
    is a few concatenations and no per-token Python work."""

    def __init__(self, examples: Sequence[PRMExample]):
        self.examples = list(examples)
        self.input_ids = [torch.tensor(e.input_ids, dtype=torch.long) for e in examples]
        self.positions = [torch.tensor(e.score_positions, dtype=torch.long) for e in examples]
        self.targets = [torch.tensor(e.targets, dtype=torch.float32) for e in examples]
        self.weights = [torch.full((len(e.targets),), e.weight, dtype=torch.float32) for e in examples]
        self.lengths = [len(e.input_ids) for e in examples]
        self.trajectory_positions = [e.trajectory_position for e in examples]
        self.trajectory_targets = [e.trajectory_target for e in examples]
        self.step_spans = [e.step_spans for e in examples]

    def __len__(self) -> int:
        return len(self.examples)


@dataclass
class PackedBatch:
    """Solutions laid end to end in rows; no attention mask (position ids restart at 0 in each
    solution); the score positions as flat indices into the [rows, length] grid."""

    input_ids: torch.Tensor  # [rows, length]
    position_ids: torch.Tensor  # [rows, length]
    score_index: torch.Tensor  # [steps] indices into input_ids.flatten()
    targets: torch.Tensor  # [steps]
    weights: torch.Tensor  # [steps], each step's label-source weight
    solutions: int
    real_tokens: int
    # the solutions with a trajectory target: where their trajectory logit is read (flat, as score_index), and the target
    trajectory_index: torch.Tensor | None = None
    trajectory_targets: torch.Tensor | None = None
    spans: StepSpans | None = None  # the steps' spans, flat as score_index, their owners in score_index's order

    @property
    def padded_tokens(self) -> int:
        return self.input_ids.numel()

    def to(self, device: torch.device) -> PackedBatch:
        return self._map(lambda t: t.to(device, non_blocking=True))

    def pin_memory(self) -> PackedBatch:
        return self._map(lambda t: t.pin_memory())

    def _map(self, change) -> PackedBatch:
        tensors = (self.input_ids, self.position_ids, self.score_index, self.targets, self.weights)
        trajectory = (self.trajectory_index, self.trajectory_targets)
        spans = None if self.spans is None else StepSpans(change(self.spans.tokens), change(self.spans.owners))
        return PackedBatch(*(change(t) for t in tensors), self.solutions, self.real_tokens, *(change(t) for t in trajectory), spans)


def pack_rows(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Indices of `lengths` grouped into rows: the fewest rows of at most `capacity` tokens
    (capacity is raised to the longest item) that longest-first placement, each item into the
    shortest row so far, fits them in; rows then differ little in length, so little is padded."""
    capacity = max(capacity, max(lengths))
    rows = max(1, math.ceil(sum(lengths) / capacity))
    by_length = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    while True:
        members: list[list[int]] = [[] for _ in range(rows)]
        filled = [0] * rows
        for i in by_length:
            row = min(range(rows), key=lambda r: (filled[r], r))
            members[row].append(i)
            filled[row] += lengths[i]
        if max(filled) <= capacity or rows >= len(lengths):
            return [sorted(row) for row in members if row]
        rows += 1


ROW_WIDTHS = (1.0, 1.25, 1.5, 2.0, 3.0, 4.0)  # the default's candidate row capacities, in longest solutions


def plan_rows(lengths: Sequence[int], pack_length: int | None = None, max_length: int | None = None) -> list[list[int]]:
    """The rows of a micro-batch of solutions of `lengths`, as lists of indices.

    With `pack_length`: the fewest rows of at most that many tokens (`pack_rows`). By default: of
    the capacities 1 to 4 times the longest solution (and `max_length`, the trainer's limit per
    solution), the one whose rows hold the fewest tokens in all while their attention work (rows x
    width squared, what SDPA's masked kernels compute whole) stays within the padded batch's
    (solutions x longest squared). Rows as wide as the longest solution always qualify, so packing
    never pads more nor attends more than padding each solution to the longest would."""
    longest = max(lengths)
    if pack_length is not None:
        return pack_rows(lengths, max(longest, pack_length))
    budget = len(lengths) * longest * longest
    capacities = {math.ceil(factor * longest) for factor in ROW_WIDTHS}
    if max_length is not None:
        capacities = {min(capacity, max(longest, max_length)) for capacity in capacities} | {max(longest, max_length)}
    best: tuple[tuple[int, int], list[list[int]]] | None = None
    for capacity in sorted(capacities):
        rows = pack_rows(lengths, capacity)
        width = max(sum(lengths[i] for i in row) for row in rows)
        if len(rows) * width * width > budget:
            continue
        cost = (len(rows) * width, width)  # fewest tokens, then the narrower rows
        if best is None or cost < best[0]:
            best = (cost, rows)
    return best[1]


def collate_packed(
    data: ExampleTensors, indices: Sequence[int], pad_token_id: int, pack_length: int | None = None, max_length: int | None = None
) -> PackedBatch:
    rows = plan_rows([data.lengths[i] for i in indices], pack_length, max_length)
    rows = [[indices[k] for k in row] for row in rows]
    width = max(sum(data.lengths[i] for i in row) for row in rows)
    input_ids = torch.full((len(rows), width), pad_token_id, dtype=torch.long)
    position_ids = torch.zeros((len(rows), width), dtype=torch.long)
    score_index, targets, weights = [], [], []
    trajectory_index, trajectory_targets, span_pieces = [], [], []
    for r, row in enumerate(rows):
        offset = 0
        for i in row:
            length = data.lengths[i]
            input_ids[r, offset : offset + length] = data.input_ids[i]
            position_ids[r, offset : offset + length] = torch.arange(length)
            score_index.append(data.positions[i] + (r * width + offset))
            span_pieces.append((data.step_spans[i], r * width + offset))
            targets.append(data.targets[i])
            weights.append(data.weights[i])
            if data.trajectory_positions[i] is not None:
                trajectory_index.append(r * width + offset + data.trajectory_positions[i])
                trajectory_targets.append(data.trajectory_targets[i])
            offset += length
        if offset < width:  # the pad tail is a sequence of its own: nothing real attends to it
            position_ids[r, offset:] = torch.arange(width - offset)
    real = sum(data.lengths[i] for i in indices)
    return PackedBatch(
        input_ids, position_ids, torch.cat(score_index), torch.cat(targets), torch.cat(weights), len(indices), real,
        torch.tensor(trajectory_index, dtype=torch.long), torch.tensor(trajectory_targets, dtype=torch.float32), flat_spans(span_pieces),
    )  # fmt: skip


def micro_batches(count: int, order: Sequence[int], batch_size: int) -> list[list[int]]:
    """The epoch's order cut into micro-batches of `batch_size` (the last may be smaller)."""
    return [list(order[start : start + batch_size]) for start in range(0, count, batch_size)]


def padding_ratio(
    lengths: Sequence[int], groups: Sequence[Sequence[int]], batching: str, pack_length: int | None = None, max_length: int | None = None
) -> float:
    """Tokens in the batch tensors per real token, for micro-batches `groups` of items of `lengths`."""
    real = sum(lengths[i] for group in groups for i in group)
    if batching == "padded":
        padded = sum(len(group) * max(lengths[i] for i in group) for group in groups)
    else:
        padded = 0
        for group in groups:
            members = [lengths[i] for i in group]
            rows = plan_rows(members, pack_length, max_length)
            padded += len(rows) * max(sum(lengths[group[k]] for k in row) for row in rows)
    return padded / real


def data_fingerprint(examples: Sequence[PRMExample]) -> str:
    """Which solutions, from which source with which weight, with which targets: a resumed run must
    train on the same data. (A first source of weight 1 adds nothing: runs on one source started
    before several sources were possible keep their fingerprint.)"""
    digest = hashlib.sha256()
    for example in sorted(examples, key=lambda e: (e.source, e.solution_id)):
        origin = "" if (example.source, example.weight) == (0, 1.0) else f"{example.source}:{example.weight}:"
        trajectory = "" if example.trajectory_target is None else f":{example.trajectory_target}"  # runs on older labels keep their fingerprint
        digest.update(f"{origin}{example.solution_id}:{len(example.input_ids)}:{example.targets}{trajectory}\n".encode())
    return digest.hexdigest()[:16]
