"""`labeler eval`: how far step labels, a PRM's step scores, or a judge's verdicts agree with human labels.

Predictions come from labels shards (a step is predicted wrong when its hard label is False, or,
with a threshold, when its soft label is below it), from `labeler score` output (wrong when the
step's probability is below the threshold), from a step scorer run on the reference solutions
themselves (wrong likewise), or from judgments shards (`labeler judge`: the steps before the
judge's first error predicted right, that step wrong, the later ones not predicted: a critique
names the earliest error only). They are matched to reference rows by problem_id;
when several predicted solutions share a problem_id, the one with the reference's steps is used.
A match whose step count differs from the reference's is not compared.

A matched row whose first predicted error is unknown (a step without a prediction before it: an
unlabelled step, step scores cut at the PRM's max length) has no prediction: it is counted apart,
by reason, and left out of the figures unless `missing` is "as-correct" (such steps read as right).
Every subset says how many rows it scored and how many had no prediction.

Several sources (labels of several jobs: Monte-Carlo, judge, consensus, imported human labels, or
PRM scores) are compared in one table, each by its name, against the same references; with
`common`, each subset holds only the reference rows that every source matched, so the figures
of the sources count the same solutions.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from statistics import mean

from labeler.evaluation.metrics import (
    MISSING_MODES,
    best_first_error_threshold,
    roc_auc,
    first_error_metrics,
    first_predicted_error,
    rating_is_positive,
    step_metrics,
    unpredicted_step,
)
from labeler.labeling.config import check_choices, setting
from labeler.store.reader import read_judgments_table, read_labelled_rows
from labeler.evaluation.references import ReferenceSet, ReferenceSolution
from labeler.evaluation.solutions import SolutionToScore
from labeler.records import is_score
from labeler.ids import same_solution

DEFAULT_SCORE_THRESHOLD = 0.5
# Where a source's threshold comes from (PredictionSource.threshold_from), and how the text report says it
GIVEN, DEFAULT, VALIDATION_SPLIT, HARD_LABELS, JUDGE_VERDICTS = "--threshold", "default", "validation split", "hard labels", "judge verdicts"
THRESHOLD_FROM = {
    GIVEN: "--threshold",
    DEFAULT: "the default for scores; --threshold sets another",
    VALIDATION_SPLIT: "chosen on the PRM's validation split by `labeler train`; --threshold sets another",
    HARD_LABELS: "hard labels; --threshold reads soft labels instead",
    JUDGE_VERDICTS: "a judge's verdicts name a step",
}
CUT_AT_MAX_LENGTH = "step scores cut at max_length"  # why a scored step has no score
UNLABELLED = "unlabelled step"


@dataclass(frozen=True)
class EvalSettings:
    missing: str = setting(
        "exclude",
        choices=MISSING_MODES,
        help="a row whose first predicted error is unknown (an unlabelled step or a score cut at max_length before it): "
        "exclude leaves it out of the metrics (counted as 'no prediction'); as-correct reads such steps as predicted right",
    )

    def __post_init__(self) -> None:
        check_choices(self)


class PredictionsError(ValueError):
    """The predictions cannot be read; the message is for the user."""


@dataclass(frozen=True)
class Prediction:
    problem_id: str
    solution_id: str
    steps: tuple[str, ...] | None  # None when the source does not carry the texts (score files)
    n_steps: int
    correct: tuple[bool | None, ...]  # per step: predicted correct, wrong, or no prediction
    scores: tuple[float | None, ...]  # per step, for AUC
    label_source: str | None = None  # labels: who made them (schemas/tables.py LABEL_SOURCES); scores: None
    why_unpredicted: tuple[str | None, ...] = ()  # per step without a prediction: why
    fingerprint: str | None = None  # score lines: the scored solution's (labeler/review/joins.py); None: not carried

    def unpredicted_reason(self, i: int) -> str:
        return (self.why_unpredicted[i] if i < len(self.why_unpredicted) else None) or "no prediction"


def predictions_from_labels(path: str, threshold: float | None = None) -> list[Prediction]:
    predictions = []
    for row in read_labelled_rows(path):
        scores = tuple(row.soft_or_hard(i) for i in range(len(row.steps)))
        if threshold is None:
            correct = row.hard_labels
        else:
            correct = tuple(None if score is None else score >= threshold for score in scores)
        why = tuple(None if ok is not None else _unlabelled(method) for ok, method in zip(correct, row.label_method))
        predictions.append(
            Prediction(row.problem_id, row.solution_id, row.steps, len(row.steps), tuple(correct), scores, row.label_source, why)
        )
    return predictions


def _unlabelled(label_method: str) -> str:
    return UNLABELLED if label_method == "unlabelled" else f"{UNLABELLED} ({label_method})"


def predictions_from_scores(path: str, threshold: float = DEFAULT_SCORE_THRESHOLD) -> list[Prediction]:
    predictions = []
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                record = json.loads(line)
                if not isinstance(record["step_scores"], list):
                    raise TypeError(f"step_scores is {type(record['step_scores']).__name__}, not a list")
                correct, scores, why = _step_predictions(tuple(record["step_scores"]), threshold, CUT_AT_MAX_LENGTH)
                problem_id, solution_id = str(record["problem_id"]), str(record["solution_id"])
                fingerprint = record.get("solution_fingerprint")  # lines written before score lines carried it: unchecked
                predictions.append(Prediction(problem_id, solution_id, None, len(scores), correct, scores, None, why, fingerprint))
    except OSError as error:
        raise PredictionsError(f"{path}: cannot read: {error.strerror or error}") from error
    except (ValueError, KeyError, TypeError) as error:
        raise PredictionsError(f"{path}:{number}: not a `labeler score` line ({error})") from error
    return predictions


def reference_solutions(references: list[ReferenceSet]) -> list[SolutionToScore]:
    """The distinct solutions of the reference files (problem and steps), for a PRM to score."""
    seen: dict[tuple[str, tuple[str, ...]], SolutionToScore] = {}
    for reference in references:
        for solution in reference.solutions:
            key = (solution.problem_id, solution.steps)
            if key not in seen:
                solution_id = f"{reference.name}:{solution.row_index}"
                seen[key] = SolutionToScore(solution.problem_id, solution_id, solution.problem, solution.steps, solution.row_index)
    return list(seen.values())


def predictions_from_step_scores(
    solutions: list[SolutionToScore],
    step_scores: list[list[float | None]],
    threshold: float = DEFAULT_SCORE_THRESHOLD,
    why_unscored: Callable[[SolutionToScore], str | None] | None = None,
) -> list[Prediction]:
    """Predictions from a step scorer's probabilities (as `labeler score` writes them, without the file);
    `why_unscored` says why the scorer gave a solution no score at all (labeler/prm/scorers.py render_problem:
    its own step marker in the text), where it can."""
    predictions = []
    for solution, scores in zip(solutions, step_scores, strict=True):
        scores = tuple(scores) + (None,) * (len(solution.steps) - len(scores))  # steps past the PRM's length limit
        unscored = all(score is None for score in scores) and why_unscored is not None and why_unscored(solution)
        correct, scores, why = _step_predictions(scores, threshold, unscored or CUT_AT_MAX_LENGTH)
        n = len(solution.steps)
        predictions.append(Prediction(solution.problem_id, solution.solution_id, solution.steps, n, correct, scores, None, why))
    return predictions


def _step_predictions(raw: tuple, threshold: float, missing: str) -> tuple[tuple, tuple, tuple]:
    """Per step: predicted correct (score >= threshold) or wrong; no prediction where the PRM gave no score
    (why: `missing`) or a value that is not a finite score (NaN, inf: named, never compared with the threshold)."""
    scores = tuple(float(score) if is_score(score) else None for score in raw)
    correct = tuple(None if score is None else score >= threshold for score in scores)
    why = tuple(
        None if score is not None else (missing if given is None else f"the PRM gave {str(given)[:40]}, not a finite score")
        for given, score in zip(raw, scores)
    )  # fmt: skip
    return correct, scores, why


def predictions_from_judgments(path: str) -> list[Prediction]:
    """A judge as a critic: its verdict (the majority first error) on each judged solution."""
    predictions = []
    table = read_judgments_table(path).select(["problem_id", "solution_id", "steps", "first_error"])
    for row in table.to_pylist():
        steps, first = tuple(row["steps"]), row["first_error"]
        correct = tuple(True if first < 0 or i < first else (False if i == first else None) for i in range(len(steps)))
        scores = tuple(None if value is None else float(value) for value in correct)
        why = tuple(None if value is not None else "after the judge's first error" for value in correct)
        predictions.append(Prediction(row["problem_id"], row["solution_id"], steps, len(steps), correct, scores, None, why))
    return predictions


@dataclass
class Matched:
    reference: ReferenceSolution
    prediction: Prediction

    def unpredicted(self) -> int | None:
        """The step whose missing prediction leaves the first predicted error unknown; None when it is known."""
        return unpredicted_step(self.prediction.correct)


def match(reference: ReferenceSet, predictions: list[Prediction]) -> tuple[list[Matched], dict[str, int]]:
    by_problem: dict[str, list[Prediction]] = {}
    for prediction in predictions:
        by_problem.setdefault(prediction.problem_id, []).append(prediction)
    matched, counts = [], {"unmatched": 0, "ambiguous": 0, "step_count_mismatch": 0, "other_solution": 0}
    for solution in reference.solutions:
        candidates = by_problem.get(solution.problem_id, [])
        if len(candidates) > 1:  # told apart by their steps, or a score line by the fingerprint of what it scored
            candidates = [
                c for c in candidates
                if c.steps == solution.steps or (c.steps is None and same_solution(c.fingerprint, solution.problem, solution.steps))
            ]  # fmt: skip
            if len(candidates) != 1:
                counts["ambiguous"] += 1
                continue
        if not candidates:
            counts["unmatched"] += 1
        elif candidates[0].n_steps != len(solution.steps):
            counts["step_count_mismatch"] += 1
        elif solution.problem and same_solution(candidates[0].fingerprint, solution.problem, solution.steps) is False:
            counts["other_solution"] += 1  # scores of another problem or other steps under these ids
        else:
            matched.append(Matched(solution, candidates[0]))
    return matched, counts


def subset_result(reference: ReferenceSet, predictions: list[Prediction], neutral: str = "exclude", missing: str = "exclude",
                  sweep: bool = False) -> dict:  # fmt: skip
    return _subset_result(reference, *match(reference, predictions), neutral, missing, sweep)


SWEPT_KINDS = ("scores", "prm")  # the sources whose scores a threshold is applied to: they get F1 at their best threshold


def _subset_result(reference: ReferenceSet, matched: list[Matched], counts: dict[str, int], neutral: str, missing: str,
                   sweep: bool = False) -> dict:  # fmt: skip
    result = {"subset": reference.name, "format": reference.format, "reference_rows": len(reference.solutions) + reference.rejected}
    result |= {"matched": len(matched), **counts, "reference_rows_unreadable": reference.rejected}
    unpredicted = [
        {"row_index": m.reference.row_index, "problem_id": m.reference.problem_id, "step": i, "reason": m.prediction.unpredicted_reason(i)}
        for m in matched
        if (i := m.unpredicted()) is not None
    ]
    reasons = Counter(row["reason"] for row in unpredicted)
    scored = [m for m in matched if missing == "as-correct" or m.unpredicted() is None]
    result |= {"missing": missing, "scored": len(scored), "no_prediction": len(unpredicted), "no_prediction_by_reason": dict(reasons)}
    result["no_prediction_rows"] = unpredicted  # each: the reference row, and its first step without a prediction (0-based)
    if reference.format == "processbench":
        pairs = [(m.reference.first_error, first_predicted_error(m.prediction.correct, missing)) for m in scored]
        result |= first_error_metrics(pairs).to_dict() | {"step_auc": processbench_step_auc(matched)}
        return result | (best_threshold_result(matched, missing) if sweep else {})
    return result | _prm800k_result(matched, scored, neutral, missing)


def best_threshold_result(matched: list[Matched], missing: str = "exclude") -> dict:
    """The threshold that maximises the first-error F1 on this very reference, and that F1: optimistic (chosen
    on the data it is scored on), but the same advantage for every scorer, so that a scorer with no threshold
    of its own (a baseline, a public PRM at 0.5) is compared at its best. A step without a score (past the
    scorer's length) reads as right with `missing` as-correct (it is never below a threshold); else its
    solution, when the step is at or before the first error (all steps, for a correct one), cannot be placed
    at every threshold: it is left out of the sweep and counted (`best_threshold_unscored`), so that F1 and
    this one may be over different rows (the report says so)."""
    solutions, unscored = [], 0
    for m in matched:
        label = m.reference.first_error
        scores = m.prediction.scores[: label + 1] if label >= 0 else m.prediction.scores
        if missing == "as-correct":
            scores = tuple(1.0 if score is None else score for score in scores)
        if not scores or any(score is None for score in scores):
            unscored += 1
            continue
        solutions.append((label, scores))
    best = best_first_error_threshold(solutions)
    return {"best_threshold": best[0] if best else None, "f1_at_best_threshold": best[1] if best else None,
            "best_threshold_rows": len(solutions), "best_threshold_unscored": unscored}  # fmt: skip


def processbench_step_auc(matched: list[Matched]) -> float | None:
    """Step AUC on ProcessBench references: the steps before a solution's first error are right, the first
    error is wrong, the steps after it unknown (left out), every step of a correct solution right; a step
    without a score is left out (a labels source's scores are its soft labels, or 0/1 hard ones). None
    without steps of both kinds."""
    scores, right = [], []
    for m in matched:
        label = m.reference.first_error
        for i, score in enumerate(m.prediction.scores):
            if label >= 0 and i > label:
                break
            if score is not None:
                scores.append(score)
                right.append(label < 0 or i < label)
    return roc_auc(scores, right)


def _prm800k_result(matched: list[Matched], scored: list[Matched], neutral: str, missing: str) -> dict:
    human, predicted, scores, unpredicted_steps = [], [], [], 0
    for m in matched:
        positive = [rating_is_positive(r, neutral) for r in m.reference.ratings]
        for h, p, s in zip(positive, m.prediction.correct, m.prediction.scores):
            if h is None:
                continue
            if p is None:
                unpredicted_steps += 1
                if missing != "as-correct":
                    continue
                p = True
            human.append(h)
            predicted.append(p)
            scores.append(s if s is not None else float(p))
    # the human side: a neutral rating left out (None) is not an error, so it reads as right
    pairs = [
        (first_predicted_error([rating_is_positive(r, neutral) for r in m.reference.ratings], "as-correct"),
         first_predicted_error(m.prediction.correct, missing))
        for m in scored
    ]
    steps = {f"step_{key}": value for key, value in step_metrics(human, predicted, scores).to_dict().items()}
    return {"neutral": neutral} | first_error_metrics(pairs).to_dict() | steps | {"step_no_prediction": unpredicted_steps}


def evaluate(references: list[ReferenceSet], predictions: list[Prediction], neutral: str = "exclude", missing: str = "exclude",
             sweep: bool = False) -> dict:  # fmt: skip
    """One source against each reference set; `sweep`: its F1 at its best threshold too (score sources, SWEPT_KINDS)."""
    subsets = [subset_result(reference, predictions, neutral, missing, sweep) for reference in references]
    return {"subsets": subsets, **_average_f1(subsets)}


def _average_f1(subsets: list[dict]) -> dict:
    """The mean of the subsets' F1, None when any subset has none (a subset never vanishes from the average);
    with the count of subsets averaged and the subsets without an F1."""
    without = [s["subset"] for s in subsets if s.get("f1") is None]
    if without or not subsets:
        return {"average_f1": None, "average_f1_subsets": 0, "subsets_without_f1": without}
    return {"average_f1": mean(s["f1"] for s in subsets), "average_f1_subsets": len(subsets), "subsets_without_f1": []}


def _average_line(report: dict) -> str:
    if report["average_f1"] is not None:
        return f"{report['average_f1']:.1%}"
    return f"n/a (no F1 for {', '.join(report['subsets_without_f1'])}; 0 of {len(report['subsets'])} subsets averaged)"


@dataclass
class PredictionSource:
    """One source of predictions in a comparison: a labels output, a score file or a judge's verdicts, by its name."""

    name: str
    kind: str  # "labels", "scores" (a score file), "prm" (a PRM run on the references) or "judgments"
    path: str
    threshold: float | None  # None: hard labels
    predictions: list[Prediction]
    threshold_from: str | None = None  # where the threshold comes from (THRESHOLD_FROM); None: not said


    @property
    def label_source(self) -> str:
        found = sorted({p.label_source for p in self.predictions if p.label_source is not None})
        unlabelled = {"scores": "PRM scores", "prm": "PRM scores", "judgments": "judge verdicts"}
        return ", ".join(found) if found else unlabelled.get(self.kind, "none")

    def header(self) -> dict:
        return {"name": self.name, "predictions": self.path, "kind": self.kind, "label_source": self.label_source, "threshold": self.threshold,
                "threshold_from": self.threshold_from}  # fmt: skip


def evaluate_sources(
    references: list[ReferenceSet],
    sources: list[PredictionSource],
    neutral: str = "exclude",
    common: bool = False,
    missing: str = "exclude",
) -> dict:
    """Each source against each reference set; with `common`, on the reference rows every source matched
    and (unless `missing` reads them as right) every source has a prediction for."""
    reports = [source.header() | {"subsets": []} for source in sources]
    for reference in references:
        matches = [match(reference, source.predictions) for source in sources]
        if common:
            matched_by_all = set.intersection(*({id(m.reference) for m in matched} for matched, _ in matches))
            shared = matched_by_all
            if missing == "exclude":
                predicted = [{id(m.reference) for m in matched if m.unpredicted() is None} for matched, _ in matches]
                shared = set.intersection(matched_by_all, *predicted)
            left_out = {"not_matched_by_every_source": len(reference.solutions) - len(matched_by_all)}
            left_out["not_predicted_by_every_source"] = len(matched_by_all) - len(shared)
            matches = [([m for m in matched if id(m.reference) in shared], counts) for matched, counts in matches]
        for report, source, (matched, counts) in zip(reports, sources, matches):
            result = _subset_result(reference, matched, counts, neutral, missing, sweep=source.kind in SWEPT_KINDS)
            if common:
                result |= left_out
            report["subsets"].append(result)
    for report in reports:
        report |= _average_f1(report["subsets"])
    return {"sources": reports, "common": common}


_COLUMNS = [
    ("subset", "subset", "{}"),
    ("format", "format", "{}"),
    ("matched", "matched", "{}"),
    ("scored", "scored", "{}"),
    ("no_prediction", "no prediction", "{}"),
    ("erroneous", "erroneous", "{}"),
    ("erroneous_accuracy", "acc erroneous", "{:.1%}"),
    ("correct", "correct", "{}"),
    ("correct_accuracy", "acc correct", "{:.1%}"),
    ("f1", "F1", "{:.1%}"),
    ("step_accuracy", "step acc", "{:.1%}"),
    ("step_auc", "step AUC", "{:.3f}"),
    ("f1_at_best_threshold", "F1 at best t*", "{:.1%}"),
]
BEST_THRESHOLD_NOTE = ("* F1 at best t: at the threshold that maximises it on this reference, optimistic (chosen on the data it "
                       "scores) but alike for every source: a scorer without a threshold of its own compared at its best")  # fmt: skip
_SKIPPED = ("unmatched", "ambiguous", "step_count_mismatch", "other_solution")


def format_table(report: dict) -> str:
    """One source's report as a table: a row per subset."""
    lines = _table([], [((), subset) for subset in report["subsets"]])
    if any(subset.get("best_threshold_rows") is not None for subset in report["subsets"]):
        lines.append(BEST_THRESHOLD_NOTE)
        lines += [_best_threshold_line(subset) for subset in report["subsets"] if subset.get("best_threshold_rows") is not None]
    if len(report["subsets"]) > 1:
        lines.append(f"average F1: {_average_line(report)}")
    skipped = _skipped(report["subsets"])
    if skipped:
        lines.append(f"not compared: {skipped}")
    lines += _unpredicted(report["subsets"])
    if "threshold" in report:
        lines.append(f"threshold: {_threshold(report)}")
    return "\n".join(lines)


def _threshold(source: dict) -> str:
    """A source's threshold and where it came from, as the text reports name it."""
    value = "none" if source.get("threshold") is None else f"{source['threshold']:.4g}"
    from_ = THRESHOLD_FROM.get(source.get("threshold_from"))
    return f"{value} ({from_})" if from_ else value


def format_comparison(report: dict) -> str:
    """Several sources' reports in one table: a row per source and subset."""
    rows = [((source["name"], source["label_source"]), subset) for source in report["sources"] for subset in source["subsets"]]
    lines = _table(["source", "label source"], rows)
    if any(subset.get("best_threshold_rows") is not None for _, subset in rows):
        lines.append(BEST_THRESHOLD_NOTE)
        lines += [_best_threshold_line(subset, f" ({names[0]})") for names, subset in rows if subset.get("best_threshold_rows") is not None]
    if any(len(source["subsets"]) > 1 for source in report["sources"]):
        lines.append("average F1: " + ", ".join(f"{source['name']} {_average_line(source)}" for source in report["sources"]))
    for source in report["sources"]:
        skipped = _skipped(source["subsets"])
        if skipped:
            lines.append(f"not compared ({source['name']}): {skipped}")
        lines += _unpredicted(source["subsets"], f" ({source['name']})")
    lines += [f"threshold ({source['name']}): {_threshold(source)}" for source in report["sources"]]
    if report["common"]:
        for key, why in (("not_matched_by_every_source", "not matched by"), ("not_predicted_by_every_source", "without a prediction from")):
            left_out = {s["subset"]: s[key] for s in report["sources"][0]["subsets"] if s[key]}
            if left_out:
                lines.append(f"left out (--common), {why} every source: " + ", ".join(f"{n} {name}" for name, n in left_out.items()))
    else:
        for subset in dict.fromkeys(s["subset"] for source in report["sources"] for s in source["subsets"]):
            matched = {s["matched"] for source in report["sources"] for s in source["subsets"] if s["subset"] == subset}
            if len(matched) > 1:
                lines.append(f"{subset}: the sources matched different rows; --common compares them on the rows all of them match")
    return "\n".join(lines)


def _table(lead: list[str], rows: list[tuple[tuple[str, ...], dict]]) -> list[str]:
    shown = [c for c in _COLUMNS if any(c[0] in subset for _, subset in rows)]
    cells = [lead + [title for _, title, _ in shown]]
    for lead_cells, subset in rows:
        cells.append(list(lead_cells) + [_cell(subset.get(key), fmt) for key, _, fmt in shown])
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in cells]


def _best_threshold_line(subset: dict, whose: str = "") -> str:
    """Where a subset's best threshold lies, and the rows its sweep left out."""
    t = "n/a (no erroneous and correct solution to choose between)" if subset["best_threshold"] is None else f"{subset['best_threshold']:.4g}"
    line = f"  best t{whose}, {subset['subset']}: {t}, over {subset['best_threshold_rows']} rows"
    if subset["best_threshold_unscored"]:
        line += (f"; {subset['best_threshold_unscored']} left out (a step without a score at or before the first error: "
                 "--missing as-correct reads it as right)")  # fmt: skip
    if subset["best_threshold_rows"] != subset.get("scored"):
        line += f"; F1 is over {subset.get('scored')} rows (its own: those whose first predicted error at the threshold given is known)"
    return line


def _skipped(subsets: list[dict]) -> str:
    totals = {key: sum(s[key] for s in subsets) for key in _SKIPPED}
    return ", ".join(f"{value} {key.replace('_', ' ')}" for key, value in totals.items() if value)


def _unpredicted(subsets: list[dict], whose: str = "") -> list[str]:
    """The lines that say which rows and steps had no prediction, and what became of them."""
    lines = []
    reasons = Counter()
    for subset in subsets:
        reasons.update(subset["no_prediction_by_reason"])
    if reasons:
        if subsets[0]["missing"] == "exclude":
            fate = "left out of the metrics (--missing as-correct reads their steps as right)"
        else:
            fate = "their steps read as right (--missing as-correct)"
        detail = ", ".join(f"{n} {reason}" for reason, n in reasons.most_common())
        subset, example = next((subset, subset["no_prediction_rows"][0]) for subset in subsets if subset["no_prediction_rows"])
        where = f"{subset['subset']} row {example['row_index']} ({example['problem_id']}): step {example['step']}, {example['reason']}"
        count = sum(reasons.values())
        lines.append(f"no prediction{whose}: {count} rows ({detail}), {fate}; e.g. {where} (rows and steps from 0, as in --json, which lists every one)")
    steps = sum(subset.get("step_no_prediction", 0) for subset in subsets)
    if steps:
        fate = "left out of the step metrics" if subsets[0]["missing"] == "exclude" else "read as right"
        lines.append(f"steps without a prediction{whose}: {steps}, {fate}")
    return lines


def _cell(value, fmt: str) -> str:
    return "n/a" if value is None else fmt.format(value)
