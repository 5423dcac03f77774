"""`labeler eval`: how far step labels, a PRM's step scores, or a judge's verdicts agree with human labels.

Predictions come from labels shards (a step is predicted wrong when its hard label is False, or,
with a threshold, when its soft label is below it), from `labeler score` output (wrong when the
step's probability is below the threshold), from a step scorer run on the reference solutions
themselves (wrong likewise), or from judgments shards (`labeler judge`: the steps before the
judge's first error predicted right, that step wrong, the later ones not predicted: a critique
names the earliest error only). They are matched to reference rows by problem_id;
when several predicted solutions share a problem_id, the one with the reference's steps is used.
A match whose step count differs from the reference's is not compared.

Several sources (labels of several jobs: Monte-Carlo, judge, consensus, imported human labels, or
PRM scores) are compared in one table, each by its name, against the same references; with
`common`, each subset holds only the reference rows that every source matched, so the figures
of the sources count the same solutions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from statistics import mean

from labeler.evaluation.metrics import first_error_metrics, first_predicted_error, rating_is_positive, step_metrics
from labeler.store.reader import read_judgments_table, read_labelled_rows
from labeler.evaluation.references import ReferenceSet, ReferenceSolution
from labeler.evaluation.solutions import SolutionToScore

DEFAULT_SCORE_THRESHOLD = 0.5


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


def predictions_from_labels(path: str, threshold: float | None = None) -> list[Prediction]:
    predictions = []
    for row in read_labelled_rows(path):
        scores = tuple(row.soft_or_hard(i) for i in range(len(row.steps)))
        if threshold is None:
            correct = row.hard_labels
        else:
            correct = tuple(None if score is None else score >= threshold for score in scores)
        predictions.append(Prediction(row.problem_id, row.solution_id, row.steps, len(row.steps), tuple(correct), scores, row.label_source))
    return predictions


def predictions_from_scores(path: str, threshold: float = DEFAULT_SCORE_THRESHOLD) -> list[Prediction]:
    predictions = []
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                record = json.loads(line)
                scores = tuple(record["step_scores"])
                correct = tuple(None if score is None else score >= threshold for score in scores)
                predictions.append(Prediction(str(record["problem_id"]), str(record["solution_id"]), None, len(scores), correct, scores))
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
    solutions: list[SolutionToScore], step_scores: list[list[float | None]], threshold: float = DEFAULT_SCORE_THRESHOLD
) -> list[Prediction]:
    """Predictions from a step scorer's probabilities (as `labeler score` writes them, without the file)."""
    predictions = []
    for solution, scores in zip(solutions, step_scores, strict=True):
        scores = tuple(scores) + (None,) * (len(solution.steps) - len(scores))  # steps past the PRM's length limit
        correct = tuple(None if score is None else score >= threshold for score in scores)
        predictions.append(Prediction(solution.problem_id, solution.solution_id, solution.steps, len(solution.steps), correct, scores))
    return predictions


def predictions_from_judgments(path: str) -> list[Prediction]:
    """A judge as a critic: its verdict (the majority first error) on each judged solution."""
    predictions = []
    table = read_judgments_table(path).select(["problem_id", "solution_id", "steps", "first_error"])
    for row in table.to_pylist():
        steps, first = tuple(row["steps"]), row["first_error"]
        correct = tuple(True if first < 0 or i < first else (False if i == first else None) for i in range(len(steps)))
        scores = tuple(None if value is None else float(value) for value in correct)
        predictions.append(Prediction(row["problem_id"], row["solution_id"], steps, len(steps), correct, scores))
    return predictions


@dataclass
class Matched:
    reference: ReferenceSolution
    prediction: Prediction


def match(reference: ReferenceSet, predictions: list[Prediction]) -> tuple[list[Matched], dict[str, int]]:
    by_problem: dict[str, list[Prediction]] = {}
    for prediction in predictions:
        by_problem.setdefault(prediction.problem_id, []).append(prediction)
    matched, counts = [], {"unmatched": 0, "ambiguous": 0, "step_count_mismatch": 0}
    for solution in reference.solutions:
        candidates = by_problem.get(solution.problem_id, [])
        if len(candidates) > 1:
            candidates = [c for c in candidates if c.steps == solution.steps]
            if len(candidates) != 1:
                counts["ambiguous"] += 1
                continue
        if not candidates:
            counts["unmatched"] += 1
        elif candidates[0].n_steps != len(solution.steps):
            counts["step_count_mismatch"] += 1
        else:
            matched.append(Matched(solution, candidates[0]))
    return matched, counts


def subset_result(reference: ReferenceSet, predictions: list[Prediction], neutral: str = "exclude") -> dict:
    return _subset_result(reference, *match(reference, predictions), neutral)


def _subset_result(reference: ReferenceSet, matched: list[Matched], counts: dict[str, int], neutral: str) -> dict:
    result = {"subset": reference.name, "format": reference.format, "reference_rows": len(reference.solutions) + reference.rejected}
    result |= {"matched": len(matched), **counts, "reference_rows_unreadable": reference.rejected}
    if reference.format == "processbench":
        pairs = [(m.reference.first_error, first_predicted_error(m.prediction.correct)) for m in matched]
        return result | first_error_metrics(pairs).to_dict()
    return result | _prm800k_result(matched, neutral)


def _prm800k_result(matched: list[Matched], neutral: str) -> dict:
    human, predicted, scores, pairs = [], [], [], []
    for m in matched:
        positive = [rating_is_positive(r, neutral) for r in m.reference.ratings]
        for h, p, s in zip(positive, m.prediction.correct, m.prediction.scores):
            if h is not None and p is not None:
                human.append(h)
                predicted.append(p)
                scores.append(s if s is not None else float(p))
        pairs.append((first_predicted_error(positive), first_predicted_error(m.prediction.correct)))
    steps = step_metrics(human, predicted, scores)
    return {"neutral": neutral} | first_error_metrics(pairs).to_dict() | {f"step_{key}": value for key, value in steps.to_dict().items()}


def evaluate(references: list[ReferenceSet], predictions: list[Prediction], neutral: str = "exclude") -> dict:
    subsets = [subset_result(reference, predictions, neutral) for reference in references]
    return {"subsets": subsets, "average_f1": _average_f1(subsets)}


def _average_f1(subsets: list[dict]) -> float | None:
    f1s = [s["f1"] for s in subsets if s.get("f1") is not None]
    return mean(f1s) if f1s else None


@dataclass
class PredictionSource:
    """One source of predictions in a comparison: a labels output, a score file or a judge's verdicts, by its name."""

    name: str
    kind: str  # "labels", "scores" (a score file), "prm" (a PRM run on the references) or "judgments"
    path: str
    threshold: float | None  # None: hard labels
    predictions: list[Prediction]

    @property
    def label_source(self) -> str:
        found = sorted({p.label_source for p in self.predictions if p.label_source is not None})
        unlabelled = {"scores": "PRM scores", "prm": "PRM scores", "judgments": "judge verdicts"}
        return ", ".join(found) if found else unlabelled.get(self.kind, "none")

    def header(self) -> dict:
        return {"name": self.name, "predictions": self.path, "kind": self.kind, "label_source": self.label_source, "threshold": self.threshold}


def evaluate_sources(references: list[ReferenceSet], sources: list[PredictionSource], neutral: str = "exclude", common: bool = False) -> dict:
    """Each source against each reference set; with `common`, on the reference rows every source matched."""
    reports = [source.header() | {"subsets": []} for source in sources]
    for reference in references:
        matches = [match(reference, source.predictions) for source in sources]
        if common:
            shared = set.intersection(*({id(m.reference) for m in matched} for matched, _ in matches))
            left_out = len(reference.solutions) - len(shared)
            matches = [([m for m in matched if id(m.reference) in shared], counts) for matched, counts in matches]
        for report, (matched, counts) in zip(reports, matches):
            result = _subset_result(reference, matched, counts, neutral)
            if common:
                result["not_matched_by_every_source"] = left_out
            report["subsets"].append(result)
    for report in reports:
        report["average_f1"] = _average_f1(report["subsets"])
    return {"sources": reports, "common": common}


_COLUMNS = [
    ("subset", "subset", "{}"),
    ("format", "format", "{}"),
    ("matched", "matched", "{}"),
    ("erroneous", "erroneous", "{}"),
    ("erroneous_accuracy", "acc erroneous", "{:.1%}"),
    ("correct", "correct", "{}"),
    ("correct_accuracy", "acc correct", "{:.1%}"),
    ("f1", "F1", "{:.1%}"),
    ("step_accuracy", "step acc", "{:.1%}"),
    ("step_auc", "step AUC", "{:.3f}"),
]
_SKIPPED = ("unmatched", "ambiguous", "step_count_mismatch")


def format_table(report: dict) -> str:
    """One source's report as a table: a row per subset."""
    lines = _table([], [((), subset) for subset in report["subsets"]])
    if report["average_f1"] is not None and len(report["subsets"]) > 1:
        lines.append(f"average F1: {report['average_f1']:.1%}")
    skipped = _skipped(report["subsets"])
    if skipped:
        lines.append(f"not compared: {skipped}")
    return "\n".join(lines)


def format_comparison(report: dict) -> str:
    """Several sources' reports in one table: a row per source and subset."""
    rows = [((source["name"], source["label_source"]), subset) for source in report["sources"] for subset in source["subsets"]]
    lines = _table(["source", "label source"], rows)
    averages = [(source["name"], source["average_f1"]) for source in report["sources"] if source["average_f1"] is not None]
    if averages and any(len(source["subsets"]) > 1 for source in report["sources"]):
        lines.append("average F1: " + ", ".join(f"{name} {value:.1%}" for name, value in averages))
    for source in report["sources"]:
        skipped = _skipped(source["subsets"])
        if skipped:
            lines.append(f"not compared ({source['name']}): {skipped}")
    if report["common"]:
        left_out = {s["subset"]: s["not_matched_by_every_source"] for s in report["sources"][0]["subsets"] if s["not_matched_by_every_source"]}
        if left_out:
            lines.append("left out (--common), not matched by every source: " + ", ".join(f"{n} {name}" for name, n in left_out.items()))
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


def _skipped(subsets: list[dict]) -> str:
    totals = {key: sum(s[key] for s in subsets) for key in _SKIPPED}
    return ", ".join(f"{value} {key.replace('_', ' ')}" for key, value in totals.items() if value)


def _cell(value, fmt: str) -> str:
    return "n/a" if value is None else fmt.format(value)
