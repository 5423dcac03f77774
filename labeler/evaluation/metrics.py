"""Metrics that compare step labels (or a PRM's step scores) with human judgement.

ProcessBench (Zheng et al., 2024), per subset: every solution has a human first-error index
(-1: all steps correct). A prediction is the index of the first step predicted wrong, or -1.

    erroneous accuracy = share of solutions with label >= 0 whose prediction equals the label
    correct accuracy   = share of solutions with label == -1 predicted -1
    F1                 = harmonic mean of the two (0 when both are 0)

PRM800K: human step ratings +1 / 0 / -1. `neutral` says what a 0 is: "positive", "negative", or
"exclude" (left out of step metrics and not an error for the first-error metrics). Step metrics
compare predicted step correctness with the rating; first-error metrics are ProcessBench's, with
the human first error being the first negative step.

Missing is never a value: a solution whose first predicted error is unknown (a step without a
prediction comes before it, or any step for -1) is counted apart ("no prediction") and left out of
the figures; MISSING_MODES' "as-correct" reads such steps as predicted right instead, when asked.
Steps without a prediction are likewise out of the step metrics unless read as correct.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from labeler.inputs.human_labels import NEUTRAL_MODES, rating_is_positive  # noqa: F401 (part of this module's interface)
from schemas.tables import first_error

MISSING_MODES = ("exclude", "as-correct")  # what a step without a prediction counts as (eval's --missing)


@dataclass(frozen=True)
class FirstErrorMetrics:
    erroneous: int  # solutions with a human first error
    correct: int  # solutions judged all correct
    erroneous_accuracy: float | None
    correct_accuracy: float | None
    f1: float | None

    def to_dict(self) -> dict:
        return asdict(self)


def harmonic_mean(a: float, b: float) -> float:
    return 0.0 if a + b == 0 else 2 * a * b / (a + b)


def first_error_metrics(pairs: Sequence[tuple[int, int]]) -> FirstErrorMetrics:
    """`pairs` of (human first error, predicted first error), -1 meaning no error."""
    erroneous = [(label, predicted) for label, predicted in pairs if label >= 0]
    correct = [(label, predicted) for label, predicted in pairs if label < 0]
    erroneous_accuracy = sum(label == predicted for label, predicted in erroneous) / len(erroneous) if erroneous else None
    correct_accuracy = sum(predicted < 0 for _, predicted in correct) / len(correct) if correct else None
    f1 = None
    if erroneous_accuracy is not None and correct_accuracy is not None:
        f1 = harmonic_mean(erroneous_accuracy, correct_accuracy)
    return FirstErrorMetrics(len(erroneous), len(correct), erroneous_accuracy, correct_accuracy, f1)


def best_first_error_threshold(solutions: Sequence[tuple[int, Sequence[float]]]) -> tuple[float, float] | None:
    """(threshold, F1): the step score below which a step is called wrong that maximises the first-error F1 over
    `solutions`, each (its first error, -1 for none; its step scores up to at least that step); of equal F1s the
    one nearest 0.5. None without an erroneous and a correct solution. O(n log n): each solution is predicted
    right for the thresholds in one interval, so each candidate's counts are two bisections."""
    erroneous, correct = sum(label >= 0 for label, _ in solutions), sum(label < 0 for label, _ in solutions)
    values = sorted({p for _, row in solutions for p in row})
    if not erroneous or not correct or not values:
        return None
    # an erroneous solution with first error L is right for t in (p_L, lowest before L], a correct one for t <= its lowest
    opens, closes, lowest_of_correct = [], [], []
    for label, row in solutions:
        if label < 0:
            lowest_of_correct.append(min(row, default=1.0))
            continue
        before = min(row[:label], default=math.inf)
        if row[label] < before:
            opens.append(row[label])
            closes.append(before)
    opens.sort(), closes.sort(), lowest_of_correct.sort()
    candidates = {0.5} | {(a + b) / 2 for a, b in zip(values, values[1:])} | {values[0] / 2, (values[-1] + 1) / 2}
    best = None
    for threshold in candidates:
        found = bisect.bisect_left(opens, threshold) - bisect.bisect_left(closes, threshold)  # p_L < t <= lowest before
        kept = correct - bisect.bisect_left(lowest_of_correct, threshold)  # t <= lowest
        f1 = harmonic_mean(found / erroneous, kept / correct)
        key = (f1, -abs(threshold - 0.5))
        if best is None or key > best[0]:
            best = (key, threshold, f1)
    return best[1], best[2]


def first_predicted_error(step_correct: Sequence[bool | None], missing: str = "exclude") -> int | None:
    """Index of the first step predicted wrong, or -1 when every step is predicted right. None (unknown)
    when a step before the first predicted wrong one (any step, for -1) has no prediction: an unlabelled
    step, a score cut at the PRM's max length. With missing="as-correct" such a step reads as predicted right.
    The labels table's first_error column is this, of the hard labels (schemas/tables.py first_error)."""
    if missing != "exclude":
        step_correct = [True if ok is None else ok for ok in step_correct]
    return first_error(step_correct)


def unpredicted_step(step_correct: Sequence[bool | None]) -> int | None:
    """The first step without a prediction that leaves the first predicted error unknown; None when it is known."""
    for i, ok in enumerate(step_correct):
        if ok is False:
            return None
        if ok is None:
            return i
    return None


@dataclass(frozen=True)
class StepMetrics:
    steps: int
    accuracy: float | None
    error_precision: float | None  # of steps predicted wrong, the share rated wrong
    error_recall: float | None  # of steps rated wrong, the share predicted wrong
    error_f1: float | None
    auc: float | None  # of the step scores against the ratings, when scores are given

    def to_dict(self) -> dict:
        return asdict(self)


def step_metrics(human: Sequence[bool], predicted: Sequence[bool], scores: Sequence[float] | None = None) -> StepMetrics:
    """Step-by-step agreement; True means "step correct" on both sides."""
    n = len(human)
    true_errors = sum(not h and not p for h, p in zip(human, predicted))
    predicted_errors = sum(not p for p in predicted)
    human_errors = sum(not h for h in human)
    precision = true_errors / predicted_errors if predicted_errors else None
    recall = true_errors / human_errors if human_errors else None
    f1 = harmonic_mean(precision, recall) if precision is not None and recall is not None else None
    return StepMetrics(
        steps=n,
        accuracy=sum(h == p for h, p in zip(human, predicted)) / n if n else None,
        error_precision=precision,
        error_recall=recall,
        error_f1=f1,
        auc=roc_auc(scores, human) if scores is not None else None,
    )


def roc_auc(scores: Sequence[float], positives: Sequence[bool]) -> float | None:
    """Area under the ROC curve: the chance that a random positive scores above a random
    negative, ties counting half (Mann-Whitney U over average ranks). None without both classes."""
    n_pos = sum(1 for p in positives if p)
    n_neg = len(positives) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and scores[order[end + 1]] == scores[order[start]]:
            end += 1
        for k in range(start, end + 1):
            ranks[order[k]] = (start + end) / 2 + 1
        start = end + 1
    positive_rank_sum = sum(rank for rank, p in zip(ranks, positives) if p)
    return (positive_rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
