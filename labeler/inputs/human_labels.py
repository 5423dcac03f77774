"""What a dataset of step labels says about each step of a row: ProcessBench, PRM800K, Math-Shepherd.

The presets (labeler/inputs/presets.py) read a row's problem and steps; these functions read its
labels, one per step of the preset's steps, for `labeler import` (labels shards) and `labeler eval`
(reference labels):

- processbench: `label` is the 0-based index of the first wrong step, -1 when every step is right.
  Steps before it are right, it is wrong; the steps after it were not judged (ProcessBench's
  annotators stop at the first error), so they get no label, with that reason.
- prm800k: each chosen step's completion is rated +1 (right), 0 (neutral: neither wrong nor
  progress) or -1 (wrong); a step the rater wrote (`human_completion`) counts as +1; a trajectory
  ends at a step with no chosen completion, rated by its first completion. `neutral` says what a 0
  is: positive, negative, or exclude (no label). A step without a rating has no label.
- math-shepherd: `label` is `input` with each `ки` step tag replaced by `+` or `-`. These are
  Math-Shepherd's released automatic labels (hard estimation from its own Monte-Carlo
  completions), not human judgements. OpenRLHF's process reward rows (its train_prm's dataset,
  placeholder `ки`, reward tokens `+`/`-`) are read too: `label` is then the list of reward tokens,
  one per tag of `input`.

A row whose labels cannot be read raises RowError naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass

from labeler.inputs.splitting import KI_TAG, KI_TAGS
from labeler.records import RowError

HUMAN_LABEL_PRESETS = ("prm800k", "processbench", "math-shepherd")
NEUTRAL_MODES = ("positive", "negative", "exclude")

AFTER_FIRST_ERROR = "after the first error: ProcessBench does not judge the steps after it"
NO_RATING = "no rating: PRM800K holds none for this step"
NEUTRAL_EXCLUDED = "PRM800K rating 0 (neutral), left out by --neutral exclude"


@dataclass(frozen=True)
class StepLabel:
    """One step as the dataset labels it: right (True), wrong (False), or no label (None) and why."""

    correct: bool | None
    reason: str | None = None


def step_labels(preset: str, row: dict, n_steps: int, neutral: str = "exclude", input_column: str = "input") -> list[StepLabel]:
    """One StepLabel per step of the `n_steps` steps the preset read from `row` (math-shepherd: from
    its `input_column`, `--solution-column` when given)."""
    if preset == "processbench":
        first_error = processbench_first_error(row, n_steps)
        if first_error < 0:
            return [StepLabel(True)] * n_steps
        return [StepLabel(True)] * first_error + [StepLabel(False)] + [StepLabel(None, AFTER_FIRST_ERROR)] * (n_steps - first_error - 1)
    if preset == "prm800k":
        if neutral not in NEUTRAL_MODES:
            raise ValueError(f"neutral must be one of {', '.join(NEUTRAL_MODES)}, got {neutral!r}")
        return [_rated(rating, neutral) for rating in prm800k_ratings(row, n_steps)]
    if preset == "math-shepherd":
        return [StepLabel(tag) for tag in math_shepherd_tags(row, n_steps, input_column)]
    raise ValueError(f"preset {preset!r} carries no step labels; one of {', '.join(HUMAN_LABEL_PRESETS)} does")


def processbench_first_error(row: dict, n_steps: int) -> int:
    label = row.get("label")
    if not isinstance(label, int) or isinstance(label, bool) or label < -1:
        raise RowError("label", f"expected the first wrong step's index or -1, got {label!r}")
    if label >= n_steps:
        raise RowError("label", f"first error {label} is past the last of {n_steps} steps")
    return label


def prm800k_ratings(row: dict, n_steps: int) -> tuple[int | None, ...]:
    """The rating of each of the first `n_steps` steps (those the prm800k preset reads), None when it has none."""
    return tuple(_step_rating(i, step) for i, step in enumerate(row["label"]["steps"][:n_steps]))


def rating_is_positive(rating: int | None, neutral: str) -> bool | None:
    """A PRM800K rating as step correctness; None when it does not count."""
    if rating is None:
        return None
    if rating > 0:
        return True
    if rating < 0:
        return False
    return {"positive": True, "negative": False, "exclude": None}[neutral]


def math_shepherd_tags(row: dict, n_steps: int, input_column: str = "input") -> tuple[bool, ...]:
    """The `+`/`-` of each step tag: `label` must be `input` with each `ки` replaced by one of them, or (OpenRLHF's
    process reward rows) the list of them, one per tag."""
    text, label = row.get(input_column), row.get("label")
    if isinstance(label, list):
        tags_in_text = len(KI_TAGS.split(text)) - 1
        bad = next((k for k, mark in enumerate(label) if mark not in ("+", "-")), None)
        if bad is not None:
            raise RowError("label", f"reward token {bad} is {label[bad]!r}, expected '+' or '-'")
        if len(label) != tags_in_text:
            raise RowError("label", f"{len(label)} reward tokens for {tags_in_text} '{KI_TAG}' tags in '{input_column}'")
        if len(label) != n_steps:
            raise RowError("label", f"{len(label)} step tags for {n_steps} steps (a step with no text, or text after the last tag)")
        return tuple(mark == "+" for mark in label)
    if not isinstance(label, str):
        raise RowError("label", f"expected text with a '+' or '-' in place of each '{KI_TAG}' of 'input', got {type(label).__name__}")
    pieces = KI_TAGS.split(text)  # the tags the steps were split at, not the letters of a word
    tags, position = [], 0
    for index, piece in enumerate(pieces):
        if not label.startswith(piece, position):
            raise RowError("label", f"differs from 'input' before step tag {index}: it must be 'input' with each '{KI_TAG}' replaced by '+' or '-'")
        position += len(piece)
        if index == len(pieces) - 1:
            break
        tag = label[position : position + 1]
        if tag not in ("+", "-"):
            raise RowError("label", f"step tag {index} is {tag!r}, expected '+' or '-'")
        tags.append(tag == "+")
        position += 1
    if position != len(label):
        raise RowError("label", "is longer than 'input' with its step tags replaced")
    if len(tags) != n_steps:
        raise RowError("label", f"{len(tags)} step tags for {n_steps} steps (a step with no text, or text after the last tag)")
    return tuple(tags)


def _rated(rating: int | None, neutral: str) -> StepLabel:
    correct = rating_is_positive(rating, neutral)
    if correct is not None:
        return StepLabel(correct)
    return StepLabel(None, NO_RATING if rating is None else NEUTRAL_EXCLUDED)


def _step_rating(index: int, step: dict) -> int | None:
    completions = step.get("completions") or []
    chosen = step.get("chosen_completion")
    if chosen is not None:
        return _rating(index, completions[chosen])
    if step.get("human_completion"):
        return 1
    return _rating(index, completions[0]) if completions else None


def _rating(index: int, completion) -> int | None:
    rating = completion.get("rating") if isinstance(completion, dict) else None
    if rating is None:
        return None
    if isinstance(rating, bool) or rating not in (-1, 0, 1):
        raise RowError("label", f"label.steps[{index}]: rating {rating!r} is not -1, 0 or 1")
    return int(rating)
