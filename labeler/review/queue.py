"""Review queues (`labeler select --queue`): the few solutions most worth a human's look, written as an
input that `labeler label`, `labeler judge` and `labeler view` read.

Human step labels are expensive, so spend them where a label teaches the PRM most. PRM800K (Lightman
et al., "Let's Verify Step by Step", 2023) did not show its labellers random solutions: it showed
them "convincing wrong-answer" solutions, those the current PRM scored highest among the solutions
whose final answer is wrong. Such a solution has a step the PRM accepts but should not, so its
human labels correct the PRM where it errs, and the PRM, retrained, picks the next batch: active
learning. Two queues:

convincing-wrong
    The solutions whose final answer is known to be wrong, ranked by the PRM's score (`--by`, an
    aggregate of the step scores; `min` by default, which any PRM has, a public one without a
    trajectory head included), highest first. "Known wrong": in a labels output, trajectory_verdict
    `incorrect` or `unparseable` (it states no answer); in any other input, the answer checker's
    verdict on the final step (a trace's response) against the row's reference answer, the check
    `labeler label` makes. A solution whose verdict is not known (a timed-out check, a solution that
    stops before its answer, labels imported unchecked, a row without a reference answer) is never
    queued, and nor is a wrong one the PRM could not fully score (no `--by` score): both are counted
    in the summary, never dropped unseen.

uncertain
    The solutions the labels are least sure of, by either or both of two signals:
    - the PRM: its uncertainty over the steps it scored, 1 minus the least distance of a step's score p
      from the threshold t, as a share of the room on its side ((t - p) / t below t, (p - t) / (1 - t)
      above: 1 for a step scored exactly t, 0 when every step is scored 0 or 1; at t = 0.5,
      1 - 2 x min |p - 0.5|); t is the threshold the PRM calls a first error below (`threshold`:
      --threshold, else the one a checkpoint of `labeler train` stored, else 0.5); a solution with no
      scored step has none;
    - with `--judgments` (a `labeler judge` output of the same labels): whether the Monte-Carlo
      first error differs from the judge's. The Monte-Carlo first error is known only when no
      unlabelled step comes before it (schemas/tables.py), and only for labels made by
      Monte-Carlo; a solution where it is not known, or that the judge did not judge, is never a
      disagreement and is counted apart.
    Every disagreement comes before every other solution, and the PRM's uncertainty orders each of
    the two groups; with no PRM, disagreements only are queued. The queue score says both: 1 for a
    disagreement, plus the PRM uncertainty. Equal scores go to the judge's least agreed verdict
    first (the share of its votes that name it), then input order.

Steps are numbered from 0 in the reasons, as first_error numbers them. Every queue keeps at most
`budget` solutions, in rank order. A solution a reviewer already corrected (a correction of its steps
as they are, in the labels output's corrections/) is left out of both, counted as already_reviewed,
unless `include_reviewed`. Each record:

    {"problem_id", "solution_id", "queue", "queue_rank" (1-based), "queue_score", "queue_reason",
     "id" (= problem_id), "problem", "answer" (the reference answer, null when the input has none),
     "steps" (list) | "response" (a trace: `<think>thinking</think>response`)}

Queue records are read by the presets (labeler/inputs/presets.py): plain solutions as `processbench`
rows (`problem`, `steps`, `answer`), traces as `trace` rows (`problem`, `response`, `answer`; a
`steps` list beside them would fit two presets), with `id` as the problem id. `label` and `judge`
detect the preset and derive a solution_id from the problem id, problem, reference answer and
steps, exactly as they derived it from the source row: a queued solution keeps its solution_id.
Not when it cannot: a solution a labeling job sampled (its id derives from the problem row and a
sample number, not its steps), a trace whose thinking was split with a --max-steps other than the
default, identical solutions of which only a later one is queued. `write_queue` reads the file back
as `label` and `judge` will and counts those (ids_changed). The record's own `solution_id` stays the
source's, the one `labeler view` joins the labels on.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from labeler.evaluation.human_agreement import DEFAULT_SCORE_THRESHOLD
from labeler.evaluation.metrics import first_predicted_error
from labeler.evaluation.solutions import SolutionToScore
from labeler.inputs.traces import render_trace, response_part
from labeler.labeling.config import check_choices, check_numbers, setting
from labeler.prm.solution_scores import SELECT_BY
from labeler.review.joins import same_steps
from schemas.tables import MONTE_CARLO

log = logging.getLogger("labeler.select")

CONVINCING_WRONG, UNCERTAIN = "convincing-wrong", "uncertain"
QUEUES = (CONVINCING_WRONG, UNCERTAIN)
QUEUE = "review queue"  # the --help section
DEFAULT_BY = "min"  # every PRM has it (`combined` needs a trajectory head)
DEFAULT_BUDGET = 100
DEFAULT_THRESHOLD = DEFAULT_SCORE_THRESHOLD  # the point of most doubt for scores whose PRM stored none: where eval calls a step wrong

WRONG = ("incorrect", "unparseable")  # the trajectory verdicts of a final answer known to be wrong
CORRECT = "correct"
UNFINISHED = "unfinished"
NO_REFERENCE = "no reference answer"  # the verdict of a solution whose row has none: not known

PLAIN_LAYOUT, TRACE_LAYOUT = "processbench", "trace"  # the presets a queue file is read with


class QueueError(ValueError):
    """A queue that cannot be made as asked; the message is for the user."""


@dataclass(frozen=True)
class QueueConfig:
    queue: str = setting(
        choices=QUEUES,
        help="write a review queue instead of a --top selection: convincing-wrong (wrong final answers the PRM scores "
        "highest, PRM800K's choice) or uncertain (step scores nearest --threshold, Monte-Carlo and judge first errors that differ)",
        cli_default=None,
        default_text="none: pass --top or --queue",
        group=QUEUE,
    )
    budget: int = setting(
        DEFAULT_BUDGET,
        at_least=1,
        metavar="N",
        help="at most N solutions in the queue",
        cli_default=None,  # not given: this default with --queue; given with --top: refused
        default_text=DEFAULT_BUDGET,
        group=QUEUE,
    )
    by: str = setting(DEFAULT_BY, choices=SELECT_BY, cli=False, help="the PRM score that ranks convincing-wrong (the flag --by)")
    threshold: float | None = setting(
        None,
        above=0,
        below=1,
        metavar="P",
        help="the uncertain queue's score of most doubt: a step is the more uncertain the nearer its PRM score is to P "
        "(a first error is called below it)",
        default_text="the threshold a PRM of `labeler train` chose on its validation split (stored with it), else 0.5",
        group=QUEUE,
    )
    include_reviewed: bool = setting(
        False,
        help="queue solutions a reviewer already corrected in `labeler view` too (the corrections of a labels --input, "
        "OUT/corrections/); by default they are left out, and counted in the summary",
        group=QUEUE,
    )

    def __post_init__(self) -> None:
        check_choices(self)
        check_numbers(self)


# --- the ranking (pure) ----------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """A solution and what the queues know of it."""

    solution: SolutionToScore
    score: float | None = None  # the PRM's --by score; None without a PRM, or when it could not score every step
    step_scores: tuple[float | None, ...] = ()  # the PRM's, per step (None: past its length); () without a PRM
    verdict: str | None = None  # the trajectory verdict of its final answer (NO_REFERENCE...); None: not asked
    stated: str | None = None  # the final answer it states, as the checker reads it
    label_source: str | None = None  # who made its step labels (a labels input); None: not labelled
    monte_carlo_first_error: int | None = None  # None: not known (an unlabelled step before it), or not labelled
    judge_first_error: int | None = None  # None: not judged
    judge_agreement: float | None = None  # the share of the judge's votes that name its first error
    reviewed: bool = False  # a reviewer corrected it (a correction of its steps as they are)


@dataclass(frozen=True)
class Queued:
    candidate: Candidate
    rank: int  # 1-based
    score: float
    reason: str


@dataclass
class QueueResult:
    queue: str
    queued: list[Queued]
    counts: dict[str, int]  # how the candidates were sorted out: each queue's own names (module docstring)
    unknown_verdicts: dict[str, int] = field(default_factory=dict)  # convincing-wrong: why each unknown one is


def _unreviewed(candidates: Sequence[Candidate], include_reviewed: bool, counts: Counter) -> Sequence[Candidate]:
    """The candidates to rank: those a reviewer corrected are left out (counted) unless `include_reviewed`,
    so that a queue does not spend its budget on a solution a human already labelled."""
    kept = candidates if include_reviewed else [c for c in candidates if not c.reviewed]
    counts["already_reviewed"] = len(candidates) - len(kept)
    return kept


def rank_convincing_wrong(candidates: Sequence[Candidate], budget: int, by: str, include_reviewed: bool = False) -> QueueResult:
    """The known-wrong solutions with a `by` score, highest first (ties: input order), at most `budget`."""
    counts = Counter(candidates=len(candidates), correct=0, wrong=0, wrong_unscored=0, unknown_verdict=0)
    unknown: Counter[str] = Counter()
    ranked = []
    for candidate in _unreviewed(candidates, include_reviewed, counts):
        if candidate.verdict == CORRECT:
            counts["correct"] += 1
        elif candidate.verdict in WRONG:
            counts["wrong"] += 1
            if candidate.score is None:
                counts["wrong_unscored"] += 1
            else:
                ranked.append(candidate)
        else:
            counts["unknown_verdict"] += 1
            unknown[candidate.verdict or "not checked"] += 1
    ranked.sort(key=lambda c: -c.score)  # stable: ties keep input order
    queued = [Queued(c, rank, c.score, _wrong_reason(c, by)) for rank, c in enumerate(ranked[:budget], 1)]
    counts["queued"] = len(queued)
    counts["over_budget"] = len(ranked) - len(queued)
    return QueueResult(CONVINCING_WRONG, queued, dict(counts), dict(unknown))


def prm_uncertainty(step_scores: Sequence[float | None], threshold: float = DEFAULT_THRESHOLD) -> tuple[float, int] | None:
    """1 - the least distance of a scored step from `threshold` (in (0, 1)), as a share of the room on its side
    ((t - p) / t below, (p - t) / (1 - t) above: a step scored 0 or 1 is certain, whatever t), and that step
    (the first on ties); at 0.5 this is 1 - 2 x min |p - 0.5|. None: no step scored."""
    if not 0 < threshold < 1:
        raise ValueError(f"the uncertain queue's threshold must lie strictly between 0 and 1, not {threshold}")
    scored = [((threshold - p) / threshold if p < threshold else (p - threshold) / (1 - threshold), i)
              for i, p in enumerate(step_scores) if p is not None and math.isfinite(p)]  # fmt: skip
    if not scored:
        return None
    distance, step = min(scored)
    return 1 - distance, step


def rank_uncertain(candidates: Sequence[Candidate], budget: int, *, prm: bool, judged: bool, include_reviewed: bool = False,
                   threshold: float = DEFAULT_THRESHOLD) -> QueueResult:  # fmt: skip
    """Disagreements of Monte-Carlo and the judge first (`judged`), then by PRM uncertainty (`prm`): module docstring."""
    if not (prm or judged):
        raise QueueError("the uncertain queue needs PRM scores (--prm or --scores), --judgments, or both")
    counts = Counter(candidates=len(candidates))
    kept = _unreviewed(candidates, include_reviewed, counts)
    if judged:
        counts.update(disagree=0, agree=0, not_judged=0, monte_carlo_unknown=0, not_monte_carlo=0)
    if prm:
        counts.update(unscored=0)
    keyed = []
    for index, candidate in enumerate(kept):
        disagrees = judged and _disagreement(candidate, counts)
        uncertainty = prm_uncertainty(candidate.step_scores, threshold) if prm else None
        if prm and uncertainty is None:
            counts["unscored"] += 1
        if not disagrees and uncertainty is None:
            continue
        score = (1.0 if disagrees else 0.0) + (uncertainty[0] if uncertainty else 0.0)
        agreement = candidate.judge_agreement if disagrees and candidate.judge_agreement is not None else 1.0
        keyed.append(((not disagrees, -score, agreement, index), score, candidate, _uncertain_reason(candidate, disagrees, uncertainty)))
    keyed.sort(key=lambda item: item[0])
    queued = [Queued(candidate, rank, score, reason) for rank, (_, score, candidate, reason) in enumerate(keyed[:budget], 1)]
    counts["queued"] = len(queued)
    counts["over_budget"] = len(keyed) - len(queued)
    return QueueResult(UNCERTAIN, queued, dict(counts))


def _disagreement(candidate: Candidate, counts: Counter) -> bool:
    """Whether the judge names another first error than Monte-Carlo; counts why not when it cannot tell."""
    if candidate.judge_first_error is None:
        counts["not_judged"] += 1
    elif candidate.label_source != MONTE_CARLO:
        counts["not_monte_carlo"] += 1
    elif candidate.monte_carlo_first_error is None:
        counts["monte_carlo_unknown"] += 1
    elif candidate.monte_carlo_first_error != candidate.judge_first_error:
        counts["disagree"] += 1
        return True
    else:
        counts["agree"] += 1
    return False


def _wrong_reason(candidate: Candidate, by: str) -> str:
    reference = candidate.solution.reference_answer
    stated = f"stated {candidate.stated}" if candidate.stated is not None else "no answer stated"
    return f"PRM {by} {candidate.score:.2f}, final answer {candidate.verdict} (gold {reference}, {stated})"


def _uncertain_reason(candidate: Candidate, disagrees: bool, uncertainty: tuple[float, int] | None) -> str:
    parts = []
    if disagrees:
        votes = "" if candidate.judge_agreement is None else f" ({candidate.judge_agreement:.0%} of its votes)"
        monte_carlo, judge = _step(candidate.monte_carlo_first_error), _step(candidate.judge_first_error)
        parts.append(f"Monte-Carlo first error {monte_carlo}, judge {judge}{votes}")
    if uncertainty is not None:
        step = uncertainty[1]
        parts.append(f"PRM step {step} scores {candidate.step_scores[step]:.2f}")
    return "; ".join(parts)


def _step(index: int | None) -> str:
    return "none" if index == -1 else str(index)


# --- what the queues know of each solution ------------------------------------------------


@dataclass
class LabelsFacts:
    """What a labels output says of its solutions, by solution_id."""

    verdicts: dict[str, str]
    label_sources: dict[str, str]
    monte_carlo_first_errors: dict[str, int | None]
    reviewed: frozenset[str] = frozenset()  # those a reviewer corrected (OUT/corrections/, of their steps as they are)


def labels_facts(spec: str, rows) -> LabelsFacts:
    """The trajectory verdicts of the labels at `spec` (`unchecked` for shards older than schema 1.4),
    and the first error of each of `rows` (LabelledRow) where it is known."""
    from labeler.store.reader import LabelsError, read_labels_table
    from schemas.tables import UNCHECKED

    try:
        table = read_labels_table(spec, columns=["solution_id", "trajectory_verdict"])
    except LabelsError:  # a shard older than the column: read whole, its rows have no verdict
        table = read_labels_table(spec)
    if "trajectory_verdict" in table.column_names:
        pairs = zip(table.column("solution_id").to_pylist(), table.column("trajectory_verdict").to_pylist())
        verdicts = {solution_id: verdict or UNCHECKED for solution_id, verdict in pairs}
    else:
        verdicts = {}
    return LabelsFacts(
        verdicts={row.solution_id: verdicts.get(row.solution_id, UNCHECKED) for row in rows},
        label_sources={row.solution_id: row.label_source for row in rows},
        monte_carlo_first_errors={row.solution_id: first_predicted_error(row.hard_labels) for row in rows},
        reviewed=reviewed_solutions(spec, rows),
    )


def reviewed_solutions(spec: str, rows) -> frozenset[str]:
    """The solution_ids of `rows` (LabelledRow) that a reviewer corrected: a correction kept in the labels
    output at `spec` names their steps as they are (a stale one, of other steps, does not count)."""
    from labeler.store.corrections import applicable, read_corrections
    from labeler.store.location import OutputLocation
    from schemas.corrections import CORRECTIONS_DIR

    location = OutputLocation(spec)
    if not location.exists(CORRECTIONS_DIR):
        return frozenset()
    by_solution = read_corrections(location).by_solution()  # a line that cannot be read stopped reading the rows already
    return frozenset(row.solution_id for row in rows if applicable(by_solution.get(row.solution_id, []), row.steps))


def stated_answer(solution: SolutionToScore) -> str | None:
    """The final answer `solution` states, as the checker reads it for its reference answer (None: none)."""
    from labeler.checking.checker import read_answers

    if solution.reference_answer is None or not solution.steps:
        return None
    try:
        return read_answers(response_part(solution.steps[-1]), solution.reference_answer, solution.problem).answer
    except Exception:  # noqa: BLE001 - the checker's in-process layers failed on it: only the reason's text is lost
        return None


def check_final_answers(solutions: Sequence[SolutionToScore], timeout_s: float) -> list[tuple[str, str | None]]:
    """(verdict, stated answer) of each solution's final answer, checked as `labeler label` checks it
    (labeler/labeling/trajectory.py): `unfinished` for one known to stop before its answer, NO_REFERENCE
    for a row without a reference answer."""
    from labeler.checking import AnswerChecker

    results: list[tuple[str, str | None]] = [(NO_REFERENCE, None)] * len(solutions)
    to_check = []
    for i, solution in enumerate(solutions):
        if solution.reference_answer is None:
            continue
        if not solution.complete or solution.thinking_steps >= len(solution.steps):  # no response to check
            results[i] = (UNFINISHED, None)
        else:
            to_check.append(i)
    if to_check:
        with AnswerChecker(timeout_s=timeout_s) as checker:
            pairs = [(response_part(solutions[i].steps[-1]), solutions[i].reference_answer) for i in to_check]
            checked = checker.check_many(pairs, [solutions[i].problem for i in to_check])
        for i, result in zip(to_check, checked, strict=True):
            results[i] = (result.verdict.value, result.extracted)
    return results


def judge_facts(path: str, solutions: Sequence[SolutionToScore]) -> dict[str, tuple[int, float]]:
    """(first error, agreement) of each of `solutions` that the judgments at `path` judged, by solution_id;
    QueueError when a judgment's steps are not those of the solution it names."""
    from labeler.store.reader import read_judgments_table

    table = read_judgments_table(path)
    missing = sorted({"solution_id", "steps", "first_error", "agreement"} - set(table.column_names))
    if missing:
        raise QueueError(f"{path}: not a `labeler judge` output (no {', '.join(missing)} column)")
    steps_of = {solution.solution_id: list(solution.steps) for solution in solutions}
    found = {}
    for row in table.select(["solution_id", "steps", "first_error", "agreement"]).to_pylist():
        steps = steps_of.get(row["solution_id"])
        if steps is None:
            continue
        if not same_steps(row["steps"], steps):
            raise QueueError(
                f"{path}: solution {row['solution_id']}'s steps in the judgments differ from those in the labels "
                f"({len(row['steps'])} and {len(steps)} steps): these judgments are not of these labels"
            )
        found[row["solution_id"]] = (row["first_error"], row["agreement"])
    return found


def gather(
    solutions: Sequence[SolutionToScore],
    *,
    scored=None,
    by: str = DEFAULT_BY,
    verdicts: Sequence[tuple[str, str | None]] | None = None,
    labels: LabelsFacts | None = None,
    judgments: dict[str, tuple[int, float]] | None = None,
) -> list[Candidate]:
    """The candidates of `solutions`, in input order, with what is known of them: `scored` (ScoredSolution,
    one per solution) the PRM's scores; `verdicts` each final answer's (verdict, stated answer), checked
    here; `labels` what a labels output says (its verdicts, when `verdicts` is None); `judgments` the judge's."""
    candidates = []
    for i, solution in enumerate(solutions):
        facts: dict = {}
        if scored is not None:
            score = scored[i].aggregates.get(by)
            facts |= {"score": score if score is not None and math.isfinite(score) else None, "step_scores": tuple(scored[i].step_scores)}
        if verdicts is not None:
            facts |= {"verdict": verdicts[i][0], "stated": verdicts[i][1]}
        if labels is not None:
            sid = solution.solution_id
            facts |= {
                "label_source": labels.label_sources[sid],
                "monte_carlo_first_error": labels.monte_carlo_first_errors[sid],
                "reviewed": sid in labels.reviewed,
            }
            if verdicts is None:
                verdict = labels.verdicts[sid]
                facts |= {"verdict": verdict, "stated": stated_answer(solution) if verdict in WRONG else None}
        if judgments is not None and solution.solution_id in judgments:
            facts |= dict(zip(("judge_first_error", "judge_agreement"), judgments[solution.solution_id]))
        candidates.append(Candidate(solution, **facts))
    return candidates


# --- the queue file ---------------------------------------------------------------------------


@dataclass
class QueueSummary:
    path: str
    queue: str
    budget: int
    by: str | None  # the PRM score convincing-wrong ranks by; None for uncertain
    layout: str  # the preset `label` and `judge` detect in the file
    queued: int
    counts: dict[str, int]
    unknown_verdicts: dict[str, int]
    ids_changed: int  # queued solutions that `label` and `judge` read back under another solution_id
    threshold: float | None = None  # the uncertain queue's point of most doubt; None for convincing-wrong


def check_output(output: str) -> Path:
    from labeler.prm.export import OUTPUT_SUFFIXES

    path = Path(output)
    if path.suffix not in OUTPUT_SUFFIXES:
        raise QueueError(f"{output}: the output must end in {' or '.join(OUTPUT_SUFFIXES)}")
    return path


def queue_records(result: QueueResult) -> tuple[list[dict], str]:
    """The records of the queued solutions, in rank order, and the preset that reads them (module docstring)."""
    solutions = [q.candidate.solution for q in result.queued]
    traces = [s.thinking_steps > 0 for s in solutions]
    layout = TRACE_LAYOUT if traces and all(traces) else PLAIN_LAYOUT
    if any(traces) and layout == PLAIN_LAYOUT:
        log.warning("the queue mixes traces and plain solutions: its traces are written as plain steps (their solution ids change)")
    records = []
    for queued in result.queued:
        solution = queued.candidate.solution
        record = {
            "problem_id": solution.problem_id,
            "solution_id": solution.solution_id,
            "queue": result.queue,
            "queue_rank": queued.rank,
            "queue_score": queued.score,
            "queue_reason": queued.reason,
            "id": solution.problem_id,
            "problem": solution.problem,
            "answer": solution.reference_answer,
        }
        if layout == TRACE_LAYOUT:
            record["response"] = render_trace(solution.steps, solution.thinking_steps)
        else:
            record["steps"] = list(solution.steps)
        records.append(record)
    return records, layout


def is_record_of(record: dict, steps: Sequence[str], thinking_steps: int) -> bool:
    """Whether the queue `record` (queue_records) is of the solution with these steps (labeler/review/joins.py)."""
    if "steps" in record:
        return same_steps(record["steps"], steps)
    return record.get("response") == render_trace(steps, thinking_steps)


def write_queue(result: QueueResult, output: str, budget: int, by: str | None, threshold: float | None = None) -> QueueSummary:
    """Write the queue to `output` (.jsonl or .parquet), then read it back as `label` and `judge` read
    it (no format flags) and count the solutions that come back under another solution_id."""
    from labeler.prm.export import write_records

    path = check_output(output)
    records, layout = queue_records(result)
    write_records(records, path)
    changed = [r for r, back in zip(records, read_back_ids(path, len(records)), strict=True) if back != r["solution_id"]]
    if changed:
        log.warning(
            "%d of the %d queued solutions get another solution_id when `label` or `judge` reads %s (first: rank %d, %s): "
            "solutions a labeling job sampled, traces split with another --max-steps, or repeated solutions; "
            "the records keep the source's solution_id",
            len(changed), len(records), path, changed[0]["queue_rank"], changed[0]["solution_id"],
        )  # fmt: skip
    return QueueSummary(str(path), result.queue, budget, by, layout, len(records), result.counts, result.unknown_verdicts, len(changed), threshold)


def read_back_ids(path: Path, count: int) -> list[str | None]:
    """The solution_id each of the `count` rows of the queue file at `path` gets when read as `labeler judge`
    (and `labeler label`, for rows with a reference answer) read it: preset detected, no format flags."""
    from labeler.evaluation.solutions import read_solutions
    from labeler.inputs.presets import PresetOptions

    if count == 0:
        return []
    ids: list[str | None] = [None] * count
    for solution in read_solutions(str(path), None, PresetOptions()).solutions:
        ids[solution.row_index] = solution.solution_id
    return ids
