"""One solution as the review app shows it: its steps and labels, its rollouts, what the other outputs
say of it (imported human labels, consensus, the judge's critiques, PRM scores) and its corrections."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow.compute as pc

from labeler.evaluation.metrics import first_predicted_error
from labeler.store.corrections import Correction, StepReview, applicable, resolve, steps_hash
from labeler.review.index import OTHER_SOLUTION, Located, SolutionIndex, scores_join
from labeler.review.index import SCORES_UNCHECKED
from labeler.review.joins import same_steps
from labeler.review.queue import is_record_of
from schemas.tables import MONTE_CARLO, UNCHECKED

THINKING, RESPONSE = "thinking", "response"


@dataclass
class StepView:
    index: int
    text: str
    part: str  # "thinking" or "response" of a trace; "" for a plain solution
    soft: float | None
    hard: bool | None
    method: str
    n_correct: int
    n_rollouts: int
    n_truncated: int | None  # None: the shard does not record it
    n_timeouts: int | None
    unlabelled_reason: str | None
    review: StepReview | None  # a reviewer's label, when there is one
    others: list[tuple[str, bool | None, str]] = field(default_factory=list)  # (output, hard label, method)
    # (PRM, step score; None: not scored or not shown, a note: why the join is unchecked)
    scores: list[tuple[str, float | None, str | None]] = field(default_factory=list)


@dataclass
class SolutionView:
    located: Located
    row: dict
    steps: list[StepView]
    steps_hash: str
    first_error_known: bool
    corrected_first_error: int | None  # after the corrections; None when none is applied
    corrected_first_error_known: bool  # no unlabelled step before it (before any step, for none)
    history: list[Correction]  # every correction of the solution, oldest first (stale ones too)
    stale: list[Correction]
    judgments: list[dict]  # per judgments output: its row (critiques, indices, first_error, agreement), other_solution
    has_rollouts: bool
    queue: list[dict]  # per queue: its line, other_solution


def solution_view(index: SolutionIndex, located: Located, row: dict) -> SolutionView:
    """The page of one solution: `row`, its labels row (every column) at `located`."""
    output = located.output
    steps = row["steps"]
    history = index.corrections.get(output.number)
    mine = history.of(row["solution_id"]) if history else []
    current = applicable(mine, steps)
    reviews = resolve(current, len(steps))
    thinking = row.get("thinking_steps") or 0
    n = len(steps)

    def per_step(column):
        values = row.get(column)
        return values if values is not None else [None] * n

    views = [
        StepView(
            i, text, (THINKING if i < thinking else RESPONSE) if thinking else "",
            soft, hard, method, correct, rollouts, truncated, timeouts, reason, reviews.get(i),
        )
        for i, (text, soft, hard, method, correct, rollouts, truncated, timeouts, reason) in enumerate(
            zip(steps, per_step("soft_labels"), per_step("hard_labels"), per_step("label_method"), per_step("n_correct"),
                per_step("n_rollouts"), per_step("n_truncated"), per_step("n_timeouts"), per_step("unlabelled_reason"))
        )
    ]  # fmt: skip
    for other in index.others(row["solution_id"], output.number):
        other_row = other.output.shards.read(other.file).slice(other.row, 1).to_pylist()
        if not other_row or other_row[0]["solution_id"] != row["solution_id"]:
            continue  # that shard was rewritten since the table was built: it is read again on the next page
        other_row = other_row[0]
        if not same_steps(other_row["steps"], steps):
            continue  # the same id with other steps: not comparable step by step
        name = f"#{other.output.number} {other.output.given} ({other_row.get('label_source') or MONTE_CARLO})"
        for view, hard, method in zip(views, other_row["hard_labels"], other_row["label_method"]):
            view.others.append((name, hard, method))
    for scores in index.sources.scores:
        step_scores = scores.scores.get(row["solution_id"])
        if step_scores is None:
            continue
        join = scores_join(scores, row["solution_id"], row["problem"], steps)
        if join == OTHER_SOLUTION or len(step_scores) != n:  # scores of another solution under this id: none is this step's
            why = "of a different solution with this id" if join == OTHER_SOLUTION else f"of {len(step_scores)} steps, not {n}"
            for view in views:
                view.scores.append((f"{scores.name} (its scores are {why}: not shown)", None, None))
            continue
        note = "unchecked: the scores do not say which steps they scored (written before solution_fingerprint)" if join == SCORES_UNCHECKED else None
        for view in views:
            view.scores.append((scores.name, step_scores[view.index], note))
    first_error = row["first_error"]
    if first_error is None:  # written as undetermined: where the first wrong step stands, to say what comes before it
        first_error = row["first_error"] = first_predicted_error(per_step("hard_labels"), missing="as-correct")
    before = [s.method for s in views[: first_error if first_error >= 0 else n]]
    corrected_first, corrected_known = None, False
    if reviews:
        hard = [r.label if (r := reviews.get(i)) is not None else v.hard for i, v in enumerate(views)]
        corrected_first = first_predicted_error(hard, missing="as-correct")
        corrected_known = first_predicted_error(hard) is not None
    judgments = []
    for judged in index.sources.judgments:
        for relative, _ in judged.shards.files:
            table = judged.shards.read(relative, filters=pc.field("solution_id") == row["solution_id"])
            judgments += [dict(r, judge_output=judged.given, other_solution=not same_steps(r["steps"], steps)) for r in table.to_pylist()]
    queue = [
        dict(entry, queue_file=q.given, other_solution=not is_record_of(entry, steps, thinking))
        for q in index.sources.queues
        if (entry := q.entries.get(row["solution_id"])) is not None
    ]
    row.setdefault("trajectory_verdict", UNCHECKED)
    row.setdefault("label_source", MONTE_CARLO)
    return SolutionView(
        located, row, views, steps_hash(steps), "unlabelled" not in before, corrected_first, corrected_known,
        mine, [c for c in mine if c not in current], judgments, output.shards.rollouts_of(located.file) is not None, queue,
    )  # fmt: skip


def step_rollouts(located: Located, solution_id: str, step: int) -> list[dict] | None:
    """The rollouts sampled from the prefix ending at `step` (and its final-answer check); None when the
    output keeps no rollouts (an import, a consensus, a folder of labels shards alone)."""
    relative = located.output.shards.rollouts_of(located.file)
    if relative is None:
        return None
    table = located.output.shards.read(relative, filters=(pc.field("solution_id") == solution_id) & (pc.field("step_index") == step))
    return sorted(table.to_pylist(), key=lambda r: r["rollout_index"])
