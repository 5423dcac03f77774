"""Review queues (`labeler select --queue`, labeler/review/queue.py): the ranking's properties (the budget,
the order, unknowns never queued and always counted), the command end to end from `labeler score` lines
and from a real PRM (torch, and once vLLM), with the real answer checker and a real judge job, and the
queue file read back by `labeler label`'s and `labeler judge`'s readers under the source's solution ids."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labeler.cli import main
from labeler.evaluation.solutions import SolutionToScore, read_solutions
from labeler.inputs.presets import PresetOptions
from labeler.judging.config import JudgeConfig
from labeler.judging.job import plan_judging, run_judge
from labeler.labeling.config import LabelConfig
from labeler.labeling.job import plan_job
from labeler.review.queue import (
    NO_REFERENCE,
    WRONG,
    Candidate,
    QueueConfig,
    QueueError,
    prm_uncertainty,
    rank_convincing_wrong,
    rank_uncertain,
)
from tests.conftest import write_jsonl
from tests.fakes import ScriptedJudge
from tests.synthetic_labels import labels_row, write_labels
from workers.local_executor import LocalExecutor

# --- the ranking: properties -------------------------------------------------------------------

VERDICTS = ("correct", "incorrect", "unparseable", "timeout", "unfinished", "unchecked", NO_REFERENCE)
# a few repeated values, so that ties happen, and any value
PROBABILITY = st.sampled_from([0.0, 0.25, 0.5, 0.9, 1.0]) | st.floats(0, 1)


def solution(i: int) -> SolutionToScore:
    return SolutionToScore(f"p{i}", f"s{i}", f"Problem {i}", ("a step.", "The answer is: 1"), reference_answer="2")


@st.composite
def checked_candidates(draw) -> list[Candidate]:
    count = draw(st.integers(0, 30))
    return [
        Candidate(solution(i), score=draw(st.none() | PROBABILITY), verdict=draw(st.sampled_from(VERDICTS)), stated="1")
        for i in range(count)
    ]


@settings(max_examples=300, deadline=None)
@given(checked_candidates(), st.integers(1, 12))
def test_convincing_wrong_queues_the_best_scored_wrong_answers_within_the_budget(candidates, budget):
    result = rank_convincing_wrong(candidates, budget, "min")
    index = {c.solution.solution_id: i for i, c in enumerate(candidates)}
    eligible = [c for c in candidates if c.verdict in WRONG and c.score is not None]
    queued = [q.candidate for q in result.queued]
    assert len(queued) == min(budget, len(eligible))
    assert [q.rank for q in result.queued] == list(range(1, len(queued) + 1))
    assert all(c.verdict in WRONG and c.score is not None for c in queued)  # unknowns, right answers, unscored: never
    assert [q.score for q in result.queued] == [c.score for c in queued]
    # highest first, ties in input order, and nothing left out outranks what is queued
    keys = [(-c.score, index[c.solution.solution_id]) for c in queued]
    assert keys == sorted(keys)
    left_out = [c for c in eligible if c not in queued]
    assert all((-c.score, index[c.solution.solution_id]) > keys[-1] for c in left_out)
    # every candidate is counted somewhere
    counts = result.counts
    assert counts["candidates"] == len(candidates) == counts["correct"] + counts["wrong"] + counts["unknown_verdict"]
    assert (
        counts["unknown_verdict"] == sum(c.verdict not in (*WRONG, "correct") for c in candidates) == sum(result.unknown_verdicts.values())
    )
    assert counts["wrong_unscored"] == sum(c.verdict in WRONG and c.score is None for c in candidates)
    assert counts["queued"] + counts["over_budget"] + counts["wrong_unscored"] == counts["wrong"]
    for verdict in ("timeout", "unfinished", "unchecked", NO_REFERENCE):
        assert result.unknown_verdicts.get(verdict, 0) == sum(c.verdict == verdict for c in candidates)


FIRST_ERROR = st.none() | st.integers(-1, 3)


@st.composite
def labelled_candidates(draw) -> list[Candidate]:
    count = draw(st.integers(0, 25))
    return [
        Candidate(
            solution(i),
            step_scores=tuple(draw(st.lists(st.none() | PROBABILITY, max_size=4))),
            label_source=draw(st.sampled_from(["monte-carlo", "monte-carlo", "human"])),
            monte_carlo_first_error=draw(FIRST_ERROR),
            judge_first_error=draw(FIRST_ERROR),
            judge_agreement=draw(st.sampled_from([1 / 3, 2 / 3, 1.0])),
        )
        for i in range(count)
    ]


def disagrees(c: Candidate) -> bool:
    known = c.label_source == "monte-carlo" and c.monte_carlo_first_error is not None and c.judge_first_error is not None
    return known and c.monte_carlo_first_error != c.judge_first_error


def uncertainty(c: Candidate) -> float | None:
    scored = [p for p in c.step_scores if p is not None]
    return 1 - 2 * min(abs(p - 0.5) for p in scored) if scored else None


@settings(max_examples=300, deadline=None)
@given(labelled_candidates(), st.integers(1, 12), st.sampled_from([(True, False), (False, True), (True, True)]))
def test_uncertain_queues_disagreements_first_then_the_prm_least_sure(candidates, budget, signals):
    prm, judged = signals
    result = rank_uncertain(candidates, budget, prm=prm, judged=judged)
    index = {c.solution.solution_id: i for i, c in enumerate(candidates)}
    expected = {}  # what each candidate that can be queued scores, worked out here
    for c in candidates:
        d, u = judged and disagrees(c), uncertainty(c) if prm else None
        if d or u is not None:
            expected[c.solution.solution_id] = (1.0 if d else 0.0) + (u or 0.0)
    queued = [q.candidate for q in result.queued]
    assert len(queued) == min(budget, len(expected))
    for q in result.queued:
        assert q.score == pytest.approx(expected[q.candidate.solution.solution_id])
    # every disagreement before every other solution; the score never rises down the queue; ties: the
    # judge's least agreed verdict first, then input order
    flags = [judged and disagrees(c) for c in queued]
    assert flags == sorted(flags, reverse=True)
    keys = [(not flags[i], -q.score, q.candidate.judge_agreement if flags[i] else 1.0, index[q.candidate.solution.solution_id])
            for i, q in enumerate(result.queued)]  # fmt: skip
    assert keys == sorted(keys)
    assert [q.score for q in result.queued] == sorted((q.score for q in result.queued), reverse=True)
    ranked_out = [s for sid, s in expected.items() if sid not in {c.solution.solution_id for c in queued}]
    assert all(s <= result.queued[-1].score + 1e-12 for s in ranked_out)
    if not prm:
        assert all(disagrees(c) for c in queued)  # the judge alone queues disagreements only
    counts = result.counts
    assert counts["queued"] + counts["over_budget"] == len(expected)
    if judged:  # each solution is a disagreement, an agreement, or counted apart for why it cannot be either
        parts = ("disagree", "agree", "not_judged", "monte_carlo_unknown", "not_monte_carlo")
        assert sum(counts[name] for name in parts) == len(candidates)
        assert counts["disagree"] == sum(disagrees(c) for c in candidates)
        assert counts["monte_carlo_unknown"] == sum(
            c.judge_first_error is not None and c.label_source == "monte-carlo" and c.monte_carlo_first_error is None for c in candidates
        )
    if prm:
        assert counts["unscored"] == sum(uncertainty(c) is None for c in candidates)


@settings(max_examples=200, deadline=None)
@given(checked_candidates(), labelled_candidates(), st.lists(st.booleans(), min_size=30, max_size=30), st.integers(1, 12))
def test_a_solution_a_reviewer_corrected_is_left_out_and_counted_unless_included(checked, labelled, reviewed, budget):
    rankers = (
        (lambda cs, **kw: rank_convincing_wrong(cs, budget, "min", **kw), checked),
        (lambda cs, **kw: rank_uncertain(cs, budget, prm=True, judged=True, **kw), labelled),
    )
    for rank, candidates in rankers:
        marked = [replace(c, reviewed=r) for c, r in zip(candidates, reviewed)]
        left_out = rank(marked)
        assert not any(q.candidate.reviewed for q in left_out.queued)
        assert left_out.counts["already_reviewed"] == sum(c.reviewed for c in marked)
        assert left_out.counts["candidates"] == len(marked)
        assert [q.candidate for q in left_out.queued] == [q.candidate for q in rank([c for c in marked if not c.reviewed]).queued]
        included = rank(marked, include_reviewed=True)
        assert included.counts["already_reviewed"] == 0
        assert [q.candidate.solution for q in included.queued] == [q.candidate.solution for q in rank(candidates).queued]


def test_prm_uncertainty_and_the_queue_settings():
    assert prm_uncertainty([0.9, 0.45, None, 0.55]) == (pytest.approx(0.9), 1)  # the first of two equally near
    assert prm_uncertainty([1.0, 0.0]) == (0.0, 0) and prm_uncertainty([None, None]) is None and prm_uncertainty([]) is None
    with pytest.raises(QueueError, match="needs PRM scores"):
        rank_uncertain([], 5, prm=False, judged=False)
    with pytest.raises(ValueError, match="--budget must be >= 1"):
        QueueConfig(queue="uncertain", budget=0)
    with pytest.raises(ValueError, match="--queue must be one of convincing-wrong, uncertain"):
        QueueConfig(queue="random")
    assert QueueConfig(queue="convincing-wrong").by == "min"


# --- the command, end to end ------------------------------------------------------------------


def label_ids(path: Path) -> list[str]:
    """The solution ids `labeler label` gives the rows of `path` (its planner, no flags), in row order."""
    plan = plan_job(LabelConfig(input=str(path), output="unused", model="m"))
    assert not plan.rejected, plan.rejected
    return [row.given_solution().solution_id for unit in plan.units for row in unit.rows]


def judge_ids(path: Path) -> list[str]:
    """The solution ids `labeler judge` gives the rows of `path` (its planner, no flags), in row order."""
    plan = plan_judging(JudgeConfig(input=str(path), output="unused", model="m"))
    assert not plan.rejected, plan.rejected
    return [row.given_solution().solution_id for unit in plan.units for row in unit.rows]


def source_ids(path: Path) -> dict[str, str]:
    """problem_id -> solution_id of each row of `path`, as `labeler score` reads it."""
    return {s.problem_id: s.solution_id for s in read_solutions(str(path), None, PresetOptions()).solutions}


def queue_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def select(capsys, *args: str) -> dict:
    assert main(["select", *args, "--json", "--quiet"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def score_lines(path: Path, ids: dict[str, str], scores: dict[str, list]) -> Path:
    """`labeler score` lines (the fields select reads) of the solutions of problems `scores` names."""
    return write_jsonl(path, [{"problem_id": p, "solution_id": ids[p], "step_scores": s} for p, s in scores.items()])


# ProcessBench-style rows with reference answers: the checker decides which final answers are wrong
ROWS = [
    {"id": "right", "problem": "What is 2 + 3?", "steps": ["2 + 3 = 5.", "The answer is: 5"], "answer": "5"},
    {"id": "wrong-a", "problem": "What is 2 + 4?", "steps": ["2 + 4 = 7.", "The answer is: 7"], "answer": "6"},
    {"id": "wrong-b", "problem": "What is 2 + 5?", "steps": ["2 + 5 = 8.", "The answer is: 8"], "answer": "7"},
    {"id": "no-answer-stated", "problem": "What is 2 + 6?", "steps": ["2 + 6 = 8.", "I am not sure."], "answer": "8"},
    {"id": "no-reference", "problem": "What is 2 + 7?", "steps": ["2 + 7 = 10.", "The answer is: 10"]},
    {"id": "wrong-unscored", "problem": "What is 3 + 3?", "steps": ["3 + 3 = 7.", "The answer is: 7"], "answer": "6"},
    {"id": "wrong-tied", "problem": "What is 3 + 4?", "steps": ["3 + 4 = 8.", "The answer is: 8"], "answer": "7"},
]
SCORES = {
    "right": [0.99, 0.99],
    "wrong-a": [0.9, 0.7],
    "wrong-b": [0.95, 0.9],
    "no-answer-stated": [0.5, 0.6],
    "no-reference": [0.99, 0.98],
    "wrong-unscored": [0.99, None],  # a step past the PRM's length: no min score
    "wrong-tied": [0.7, 0.8],  # ties wrong-a, which comes first in the input
}


def test_convincing_wrong_from_score_lines_checks_final_answers_and_counts_what_it_cannot_queue(tmp_path, capsys):
    data = write_jsonl(tmp_path / "solutions.jsonl", ROWS)
    ids = source_ids(data)
    scores = score_lines(tmp_path / "scores.jsonl", ids, SCORES)
    out = tmp_path / "queue.jsonl"
    summary = select(
        capsys, "--queue", "convincing-wrong", "--scores", str(scores), "--input", str(data), "--budget", "3", "--output", str(out)
    )
    lines = queue_lines(out)
    assert [line["problem_id"] for line in lines] == ["wrong-b", "wrong-a", "wrong-tied"]
    assert [line["queue_rank"] for line in lines] == [1, 2, 3] and [line["queue_score"] for line in lines] == [0.9, 0.7, 0.7]
    assert {line["queue"] for line in lines} == {"convincing-wrong"}
    assert lines[0]["queue_reason"] == "PRM min 0.90, final answer incorrect (gold 7, stated 8)"
    assert lines[0]["steps"] == ["2 + 5 = 8.", "The answer is: 8"] and lines[0]["answer"] == "7" and lines[0]["id"] == "wrong-b"
    assert summary["counts"] == {
        "candidates": 7, "already_reviewed": 0, "correct": 1, "wrong": 5, "wrong_unscored": 1, "unknown_verdict": 1, "queued": 3, "over_budget": 1,
    }  # fmt: skip
    assert summary["unknown_verdicts"] == {NO_REFERENCE: 1} and summary["by"] == "min" and summary["layout"] == "processbench"
    assert summary["ids_changed"] == 0
    # `label` and `judge` read the queue as it is, and give each solution the id it had in the source
    assert (
        label_ids(out)
        == judge_ids(out)
        == [ids[p] for p in ("wrong-b", "wrong-a", "wrong-tied")]
        == [line["solution_id"] for line in lines]
    )

    # a bigger budget takes the answer-less one too, last; the text summary names every figure
    assert (
        main(["select", "--queue", "convincing-wrong", "--scores", str(scores), "--input", str(data), "--output", str(out), "--quiet"]) == 0
    )
    text = capsys.readouterr().out
    assert "queue convincing-wrong: 4 solutions queued (budget 100)" in text and "(no reference answer 1)" in text
    assert "of them without a min score     : 1" in text
    last = queue_lines(out)[-1]
    assert (
        last["problem_id"] == "no-answer-stated"
        and last["queue_reason"] == "PRM min 0.50, final answer unparseable (gold 8, no answer stated)"
    )
    # as parquet, read the same way
    parquet = tmp_path / "queue.parquet"
    select(capsys, "--queue", "convincing-wrong", "--scores", str(scores), "--input", str(data), "--budget", "3", "--output", str(parquet))
    assert (
        label_ids(parquet)
        == [row["solution_id"] for row in pq.read_table(parquet).to_pylist()]
        == [ids[p] for p in ("wrong-b", "wrong-a", "wrong-tied")]
    )


def labels_from(source: Path, rows: list[dict], facts: dict[str, dict]) -> list[dict]:
    """Labels rows of the source rows as `labeler label` would write them (its solution ids), with `facts`
    (hard labels, verdict, label source) per problem id."""
    ids = dict(zip((row["id"] for row in rows), label_ids(source), strict=True))
    labels = []
    for row in rows:
        fact = facts[row["id"]]
        hard = fact.get("hard", [True] * len(row["steps"]))
        soft = [None if h is None else float(h) for h in hard]
        extra = {key: fact[key] for key in ("trajectory_verdict", "label_source") if key in fact}
        if "trajectory_verdict" in extra:
            verdict = extra["trajectory_verdict"]
            extra["trajectory_label"] = None if verdict in ("timeout", "unchecked") else verdict == "correct"
        labels.append(
            labels_row(row["id"], ids[row["id"]], row["problem"], row["steps"], soft, hard, reference_answer=row["answer"], **extra)
        )
    return labels


def test_a_queue_of_labels_keeps_their_ids_and_takes_their_verdicts(tmp_path, capsys):
    rows = [{"id": f"q{i}", "problem": f"What is {i} + 1?", "steps": [f"{i} + 1 = {i + 2}.", f"The answer is: {i + 2}"],
             "answer": str(i + 1)} for i in range(6)]  # fmt: skip
    source = write_jsonl(tmp_path / "source.jsonl", rows)
    verdicts = ["incorrect", "unparseable", "correct", "timeout", "unfinished", "unchecked"]
    labels = labels_from(source, rows, {row["id"]: {"trajectory_verdict": v} for row, v in zip(rows, verdicts)})
    # and a solution the labeling job sampled: its id does not derive from its steps
    sampled = labels_row("q9", "sampled-0001", "What is 9 + 1?", ["9 + 1 = 11.", "The answer is: 11"], [0.0, 0.0], [False, False],
                         reference_answer="10", trajectory_verdict="incorrect")  # fmt: skip
    out_dir = write_labels(tmp_path / "labels-job", [*labels, sampled])
    scores = write_jsonl(
        tmp_path / "scores.jsonl",
        [{"solution_id": r["solution_id"], "step_scores": [0.8 - 0.1 * i, 0.9]} for i, r in enumerate([*labels, sampled])],
    )
    queue = tmp_path / "queue.jsonl"
    summary = select(capsys, "--queue", "convincing-wrong", "--scores", str(scores), "--input", str(out_dir), "--output", str(queue))
    lines = queue_lines(queue)
    assert [line["problem_id"] for line in lines] == ["q0", "q1", "q9"]  # by score: 0.8, 0.7, then the sampled one's 0.2
    assert lines[0]["queue_reason"] == "PRM min 0.80, final answer incorrect (gold 1, stated 2)"
    assert summary["unknown_verdicts"] == {"timeout": 1, "unfinished": 1, "unchecked": 1} and summary["counts"]["correct"] == 1
    # the records keep the labels' ids (what `labeler view` joins on); label and judge read the same ids back,
    # except for the sampled solution, which the summary counts
    assert [line["solution_id"] for line in lines] == [labels[0]["solution_id"], labels[1]["solution_id"], "sampled-0001"]
    assert label_ids(queue)[:2] == judge_ids(queue)[:2] == [labels[0]["solution_id"], labels[1]["solution_id"]]
    assert label_ids(queue)[2] != "sampled-0001" and summary["ids_changed"] == 1


def test_solutions_a_reviewer_corrected_are_not_queued_again_unless_asked(tmp_path, capsys):
    from labeler.store.corrections import new_correction, write_correction

    rows = [{"id": f"r{i}", "problem": f"What is {i} + 1?", "steps": [f"{i} + 1 = {i + 2}.", f"The answer is: {i + 2}"],
             "answer": str(i + 1)} for i in range(4)]  # fmt: skip
    source = write_jsonl(tmp_path / "source.jsonl", rows)
    labels = labels_from(source, rows, {row["id"]: {"trajectory_verdict": "incorrect", "hard": [True, False]} for row in rows})
    out_dir = write_labels(tmp_path / "labels-job", labels)
    scores = write_jsonl(tmp_path / "scores.jsonl", [{"solution_id": r["solution_id"], "step_scores": [0.9 - 0.1 * i, 0.9]} for i, r in enumerate(labels)])
    # r0 reviewed (its first error marked); r1 has a correction of other steps only (stale: its steps changed since)
    write_correction(out_dir, new_correction(labels[0]["solution_id"], "r0", labels[0]["steps"], "first_error", 1, "", "ada"))
    write_correction(out_dir, new_correction(labels[1]["solution_id"], "r1", ["other", "steps"], "wrong", 0, "", "ada"))
    queue = tmp_path / "queue.jsonl"
    for name, expected in (("convincing-wrong", ["r1", "r2", "r3"]), ("uncertain", ["r3", "r2", "r1"])):  # by score; nearest 0.5
        args = ("--queue", name, "--scores", str(scores), "--input", str(out_dir), "--output", str(queue))
        summary = select(capsys, *args)
        assert [line["problem_id"] for line in queue_lines(queue)] == expected
        assert summary["counts"]["already_reviewed"] == 1 and summary["counts"]["candidates"] == 4
        assert main(["select", *args, "--quiet"]) == 0
        assert "already reviewed, left out        : 1 (--include-reviewed queues them)" in capsys.readouterr().out
        summary = select(capsys, *args, "--include-reviewed")
        assert "r0" in [line["problem_id"] for line in queue_lines(queue)] and summary["counts"]["already_reviewed"] == 0
    assert main(["select", "--top", "0.5", "--include-reviewed", "--scores", str(scores), "--input", str(out_dir), "--output", str(queue)]) == 2
    assert "--include-reviewed applies to --queue only" in capsys.readouterr().err


def judge_labels(labels: Path, out: Path, verdicts: dict[str, int], limit: int | None = None) -> Path:
    """A real `labeler judge` job on the labels, its judge a script that names `verdicts[problem]`."""
    by_problem = {problem: f"The earliest error is in paragraph {k}.\n\n\\boxed{{{k}}}" if k >= 0 else "All correct.\n\n\\boxed{-1}"
                  for problem, k in verdicts.items()}  # fmt: skip
    config = JudgeConfig(input=str(labels), output=str(out), model="scripted-judge", limit=limit)
    model = ScriptedJudge(lambda problem, seed: by_problem[problem])
    run_judge(config, executor=LocalExecutor(lambda: model, None), model_info={"name": "scripted"}, progress_enabled=False)
    return out


STEPS = ["3 + 1 = 4.", "4 * 2 = 8.", "8 - 5 = 3.", "The answer is: 3"]


def test_uncertain_puts_monte_carlo_and_judge_disagreements_first(tmp_path, capsys):
    rows = [{"id": f"u{i}", "problem": f"Problem number {i}: compute.", "steps": STEPS, "answer": "3"} for i in range(7)]
    source = write_jsonl(tmp_path / "source.jsonl", rows)
    facts = {
        "u0": {"hard": [True, True, True, True]},  # MC -1, judge -1: agree
        "u1": {"hard": [True, False, False, False]},  # MC 1, judge 1: agree
        "u2": {"hard": [True, False, True, True]},  # MC 1, judge 2: disagree
        "u3": {"hard": [True, True, True, True]},  # MC -1, judge 0: disagree
        "u4": {"hard": [True, None, False, False]},  # MC 2 after an unlabelled step: not known
        "u5": {"hard": [False, False, False, False], "label_source": "human"},  # a human's labels, judge 3
        "u6": {"hard": [True, True, False, False]},  # not judged
    }
    labels = labels_from(source, rows, facts)
    out_dir = write_labels(tmp_path / "labels-job", labels)
    judge_out = judge_labels(out_dir, tmp_path / "judge", {r["problem"]: k for r, k in zip(rows, [-1, 1, 2, 0, 1, 3, 0])}, limit=6)
    queue = tmp_path / "queue.jsonl"
    summary = select(
        capsys, "--queue", "uncertain", "--judgments", str(judge_out), "--input", str(out_dir), "--budget", "5", "--output", str(queue)
    )
    lines = queue_lines(queue)
    assert [line["problem_id"] for line in lines] == ["u2", "u3"]  # the judge alone: only disagreements, in input order
    assert lines[0]["queue_reason"] == "Monte-Carlo first error 1, judge 2 (100% of its votes)"
    assert lines[1]["queue_reason"].startswith("Monte-Carlo first error none, judge 0")
    assert summary["counts"] == {
        "candidates": 7, "already_reviewed": 0, "disagree": 2, "agree": 2, "not_judged": 1, "monte_carlo_unknown": 1, "not_monte_carlo": 1,
        "queued": 2, "over_budget": 0,
    }  # fmt: skip
    assert (
        [line["solution_id"] for line in lines]
        == label_ids(queue)
        == judge_ids(queue)
        == [labels[2]["solution_id"], labels[3]["solution_id"]]
    )

    # with PRM scores too: disagreements first, then the rest by how near 0.5 a step comes
    near = {"u0": [0.9, 0.6, 0.9, 0.9], "u1": [0.95, 0.05, 0.1, 0.1], "u2": [0.9, 0.2, 0.9, 0.9], "u3": [0.99, 0.99, 0.99, 0.99],
            "u4": [0.5, 0.9, 0.9, 0.9], "u5": [0.1, 0.1, 0.1, 0.1], "u6": [0.7, 0.7, 0.7, 0.7]}  # fmt: skip
    scores = score_lines(tmp_path / "scores.jsonl", {r["problem_id"]: r["solution_id"] for r in labels}, near)
    summary = select(capsys, "--queue", "uncertain", "--judgments", str(judge_out), "--scores", str(scores), "--input", str(out_dir),
                     "--budget", "5", "--output", str(queue))  # fmt: skip
    lines = queue_lines(queue)
    assert [line["problem_id"] for line in lines] == ["u2", "u3", "u4", "u0", "u6"]
    assert [line["queue_score"] for line in lines] == pytest.approx([1.4, 1.02, 1.0, 0.8, 0.6])
    assert lines[0]["queue_reason"] == "Monte-Carlo first error 1, judge 2 (100% of its votes); PRM step 1 scores 0.20"
    assert lines[2]["queue_reason"] == "PRM step 0 scores 0.50"
    assert summary["counts"]["over_budget"] == 2 and summary["counts"]["unscored"] == 0


def test_a_queue_of_traces_is_read_back_as_traces_with_their_ids(tmp_path, capsys):
    rows = [{"id": f"t{i}", "problem": f"Add {i} and two.", "answer": str(i + 2),
             "response": f"<think>\n{i} + 1 = {i + 1}.\n\n{i + 1} + 1 = {i + 2}.\n</think>\n\nSo the answer is {i + 2}."}
            for i in range(4)]  # fmt: skip
    data = write_jsonl(tmp_path / "traces.jsonl", rows)
    ids = source_ids(data)
    scores = score_lines(
        tmp_path / "scores.jsonl", ids, {"t0": [0.9, 0.9, 0.9], "t1": [0.9, 0.55, 0.9], "t2": [0.3, 0.9, 0.9], "t3": [1.0, 1.0, 1.0]}
    )
    queue = tmp_path / "queue.jsonl"
    summary = select(capsys, "--queue", "uncertain", "--scores", str(scores), "--input", str(data), "--budget", "3", "--output", str(queue))
    lines = queue_lines(queue)
    assert [line["problem_id"] for line in lines] == ["t1", "t2", "t0"] and summary["layout"] == "trace"
    assert "steps" not in lines[0] and lines[0]["response"].startswith("<think>\n1 + 1 = 2.")
    assert label_ids(queue) == judge_ids(queue) == [ids[p] for p in ("t1", "t2", "t0")]
    assert plan_job(LabelConfig(input=str(queue), output="unused", model="m")).preset == "trace"
    assert [s.thinking_steps for s in read_solutions(str(queue), None, PresetOptions()).solutions] == [2, 2, 2]


def test_bad_usage_is_refused_before_anything_is_scored(tmp_path, capsys):
    data = write_jsonl(tmp_path / "solutions.jsonl", ROWS[:2])
    scores = score_lines(tmp_path / "scores.jsonl", source_ids(data), {p: SCORES[p] for p in ("right", "wrong-a")})
    base = ["select", "--input", str(data), "--output", str(tmp_path / "q.jsonl")]
    cases = [
        (["--queue", "convincing-wrong"], "ranks by a PRM's score: pass --prm SPEC or --scores FILE"),
        (["--queue", "uncertain"], "needs --prm SPEC or --scores FILE, --judgments OUT, or both"),
        (["--queue", "uncertain", "--judgments", str(tmp_path)], "--input must be a labels output"),
        (
            ["--queue", "convincing-wrong", "--scores", str(scores), "--judgments", str(tmp_path)],
            "--judgments applies to --queue uncertain only",
        ),
        (["--queue", "convincing-wrong", "--scores", str(scores), "--budget", "0"], "--budget must be >= 1"),
        (["--top", "0.5", "--scores", str(scores), "--budget", "3"], "--budget applies to --queue only"),
        (["--queue", "uncertain", "--scores", str(scores), "--by", "mean"], "--by applies to --top and --queue convincing-wrong"),
        (["--top", "0.5"], "--top ranks by a PRM's score: pass --prm SPEC or --scores FILE"),
    ]
    for extra, message in cases:
        assert main([*base, *extra]) == 2, extra
        assert message in capsys.readouterr().err, extra
    for extra, message in [
        (["--top", "0.5", "--scores", str(scores), "--queue", "uncertain"], "argument --queue: not allowed with argument --top"),
        (["--scores", str(scores)], "one of the arguments --top --queue is required"),
    ]:
        with pytest.raises(SystemExit) as stopped:  # argparse's own
            main([*base, *extra])
        assert stopped.value.code == 2 and message in capsys.readouterr().err
    assert main(["select", "--input", str(data), "--output", str(tmp_path / "q.txt"), "--queue", "uncertain", "--scores", str(scores)]) == 2
    assert "must end in .jsonl or .parquet" in capsys.readouterr().err
    assert not (tmp_path / "q.jsonl").exists()
    # --top works as before, its --by default still combined
    assert main([*base, "--top", "1", "--scores", str(scores), "--by", "min", "--quiet"]) == 0
    assert "2 of 2 solutions kept (top 1 by min" in capsys.readouterr().out


# --- with a real PRM ---------------------------------------------------------------------------

LONG = [f"Then {i} + {i} = {2 * i}, which we write down and carry on with the sum." for i in range(40)]


@pytest.fixture(scope="module")
def untrained_prm(tiny_model_dir, tmp_path_factory):
    """A PRM of the tiny model with a random head: real scores, no trajectory head (like a public PRM)."""
    import torch

    from labeler.prm.model import ProcessRewardModel

    torch.manual_seed(0)
    prm = ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=256, target="soft")
    torch.nn.init.normal_(prm.head.weight, std=0.5)  # scores spread away from 0.5
    torch.nn.init.normal_(prm.head.bias)
    path = tmp_path_factory.mktemp("prm") / "best"
    prm.save(path)
    return path


def prm_rows() -> list[dict]:
    rows = []
    for i in range(8):  # every third one right, the others one off
        stated = 2 * i + (i % 3 != 0)
        rows.append(
            {
                "id": f"r{i}",
                "problem": f"What is {i} + {i}?",
                "steps": [f"{i} + {i} = {stated}.", f"The answer is: {stated}"],
                "answer": str(2 * i),
            }
        )
    rows.append(
        {"id": "long", "problem": "What is 1 + 1?", "steps": [*LONG, "The answer is: 3"], "answer": "2"}
    )  # wrong, past the max length
    return rows


def test_a_real_prm_ranks_both_queues_as_its_scores_say(untrained_prm, tmp_path, capsys):
    data = write_jsonl(tmp_path / "solutions.jsonl", prm_rows())
    flags = ["--prm", str(untrained_prm), "--prm-backend", "torch", "--device", "cpu", "--input", str(data)]
    scores_file = tmp_path / "scores.jsonl"
    assert main(["score", *flags, "--output", str(scores_file), "--quiet"]) == 0
    capsys.readouterr()  # its summary
    scores = {line["problem_id"]: line for line in queue_lines(scores_file)}
    assert scores["long"]["score_min"] is None  # cut by the PRM's max length
    queue = tmp_path / "queue.jsonl"
    summary = select(capsys, "--queue", "convincing-wrong", *flags, "--budget", "4", "--output", str(queue))
    wrong = [p for p in scores if p != "long" and int(p[1:]) % 3 != 0]  # r1 r2 r4 r5 r7
    expected = sorted(wrong, key=lambda p: -scores[p]["score_min"])[:4]
    lines = queue_lines(queue)
    assert [line["problem_id"] for line in lines] == expected
    assert [line["queue_score"] for line in lines] == pytest.approx([scores[p]["score_min"] for p in expected])
    assert summary["counts"] == {
        "candidates": 9,
        "already_reviewed": 0,
        "correct": 3,
        "wrong": 6,
        "wrong_unscored": 1,
        "unknown_verdict": 0,
        "queued": 4,
        "over_budget": 1,
    }
    assert label_ids(queue) == judge_ids(queue) == [scores[p]["solution_id"] for p in expected]

    summary = select(capsys, "--queue", "uncertain", *flags, "--budget", "9", "--output", str(queue))
    lines = queue_lines(queue)
    near = {p: 1 - 2 * min(abs(s - 0.5) for s in line["step_scores"] if s is not None) for p, line in scores.items()}
    assert [line["queue_score"] for line in lines] == pytest.approx(sorted(near.values(), reverse=True))
    assert {line["problem_id"] for line in lines} == set(scores)  # the long one too: its scored steps count
    assert summary["counts"]["unscored"] == 0


def test_the_vllm_backend_queues_what_torch_queues(untrained_prm, tmp_path, capsys):
    data = write_jsonl(tmp_path / "solutions.jsonl", prm_rows())
    queues = {}
    for backend in ("torch", "vllm"):
        out = tmp_path / f"{backend}.jsonl"
        args = ["--queue", "convincing-wrong", "--prm", str(untrained_prm), "--prm-backend", backend, "--device", "cpu"]
        assert select(capsys, *args, "--input", str(data), "--output", str(out))["prm_backend"] == backend  # no fallback to torch
        queues[backend] = queue_lines(out)
    assert [line["solution_id"] for line in queues["vllm"]] == [line["solution_id"] for line in queues["torch"]]
    assert [line["queue_score"] for line in queues["vllm"]] == pytest.approx([line["queue_score"] for line in queues["torch"]], abs=1e-3)


# --- the queue through a real judge job -------------------------------------------------------


def test_judging_a_queue_gives_judgments_that_join_the_labels(tmp_path, capsys):
    rows = [{"id": f"j{i}", "problem": f"Problem number {i}: compute.", "steps": STEPS, "answer": "3"} for i in range(4)]
    source = write_jsonl(tmp_path / "source.jsonl", rows)
    labels = labels_from(source, rows, {f"j{i}": {"hard": [True, False, False, False]} for i in range(4)})
    out_dir = write_labels(tmp_path / "labels-job", labels)
    scores = score_lines(tmp_path / "scores.jsonl", {r["problem_id"]: r["solution_id"] for r in labels},
                         {f"j{i}": [0.9, 0.5 + 0.1 * i, 0.9, 0.9] for i in range(4)})  # fmt: skip
    queue = tmp_path / "queue.jsonl"
    select(capsys, "--queue", "uncertain", "--scores", str(scores), "--input", str(out_dir), "--budget", "2", "--output", str(queue))
    assert [line["problem_id"] for line in queue_lines(queue)] == ["j0", "j1"]
    # the judge reads the queue file; its judgments name the labels' solution ids, so they serve as --judgments of those labels
    judge_out = judge_labels(queue, tmp_path / "judge", {"Problem number 0: compute.": 1, "Problem number 1: compute.": 2})
    judged = pq.read_table(judge_out / "judgments").to_pylist()
    assert sorted(row["solution_id"] for row in judged) == sorted(labels[i]["solution_id"] for i in (0, 1))
    summary = select(capsys, "--queue", "uncertain", "--judgments", str(judge_out), "--input", str(out_dir), "--output", str(queue))
    assert [line["problem_id"] for line in queue_lines(queue)] == ["j1"]  # MC 1, judge 2
    assert summary["counts"]["not_judged"] == 2 and summary["counts"]["agree"] == 1


def test_labels_older_than_trajectory_verdicts_are_counted_unchecked(tmp_path, capsys):
    import pyarrow as pa

    from schemas import LABELS_SCHEMA

    folder = tmp_path / "labels-job" / "labels"
    folder.mkdir(parents=True)
    new = labels_row("p1", "s1", "What is 1 + 1?", ["1 + 1 = 3.", "The answer is: 3"], [1.0, 0.0], [True, False], reference_answer="2")
    old = labels_row("p2", "s2", "What is 2 + 2?", ["2 + 2 = 5.", "The answer is: 5"], [1.0, 0.0], [True, False], reference_answer="4")
    pq.write_table(pa.Table.from_pylist([new], schema=LABELS_SCHEMA), folder / "part-00000.parquet")
    before_1_4 = pa.Table.from_pylist([old], schema=LABELS_SCHEMA).drop_columns(
        ["thinking_steps", "trajectory_verdict", "trajectory_label"]
    )
    pq.write_table(before_1_4, folder / "part-00001.parquet")
    scores = write_jsonl(tmp_path / "scores.jsonl", [{"solution_id": s, "step_scores": [0.9, 0.8]} for s in ("s1", "s2")])
    queue = tmp_path / "queue.jsonl"
    summary = select(capsys, "--queue", "convincing-wrong", "--scores", str(scores), "--input", str(folder.parent), "--output", str(queue))
    assert [line["solution_id"] for line in queue_lines(queue)] == ["s1"]  # its verdict says wrong; the old one's is not known
    assert summary["unknown_verdicts"] == {"unchecked": 1} and summary["counts"]["unknown_verdict"] == 1


@pytest.mark.engine
def test_labeler_label_labels_a_queue_under_the_source_ids(tiny_model_dir, commands_on_tiny_engine, tmp_path, capsys):
    """`labeler label` (on the session's vLLM engine, the tiny model) takes the queue file with no format flag."""
    data = write_jsonl(tmp_path / "solutions.jsonl", ROWS)
    scores = score_lines(tmp_path / "scores.jsonl", source_ids(data), SCORES)
    queue = tmp_path / "queue.jsonl"
    select(capsys, "--queue", "convincing-wrong", "--scores", str(scores), "--input", str(data), "--budget", "2", "--output", str(queue))
    out = tmp_path / "labelled"
    args = [
        "label",
        "--input",
        str(queue),
        "--output",
        str(out),
        "--model",
        str(tiny_model_dir),
        "--rollouts",
        "2",
        "--max-new-tokens",
        "8",
    ]
    args += ["--dtype", "float32", "--max-model-len", "1024", "--quiet"]
    assert main(args) == 0, capsys.readouterr().err
    labelled = pq.read_table(out / "labels").to_pylist()
    assert [row["solution_id"] for row in labelled] == [line["solution_id"] for line in queue_lines(queue)]
    assert [row["problem_id"] for row in labelled] == ["wrong-b", "wrong-a"] and {row["source"] for row in labelled} == {"processbench"}
    assert [row["trajectory_verdict"] for row in labelled] == ["incorrect", "incorrect"]  # the same check the queue made


@pytest.mark.parametrize(
    "change, says",
    [
        ({"wrong-a": [0.9, 0.7, 0.1, 0.1]}, "4 step scores for solution"),  # scores of another solution under this id
        ({"wrong-a": [0.9]}, "1 step scores for solution"),
        ({"wrong-b": "NaN"}, "NaN is not a score"),
        ({"wrong-b": None}, "step_scores None is not a list of numbers"),
        ({"wrong-b": ["0.9", "0.9"]}, "is not a list of numbers"),
    ],
)
def test_score_lines_of_another_length_or_not_numbers_stop_select_with_the_line(tmp_path, capsys, change, says):
    data = write_jsonl(tmp_path / "solutions.jsonl", ROWS)
    ids = source_ids(data)
    lines = [{"problem_id": p, "solution_id": ids[p], "step_scores": change.get(p, s)} for p, s in SCORES.items()]
    text = "".join(json.dumps(line).replace('"NaN"', "[NaN, 0.8]") + "\n" for line in lines)
    (tmp_path / "scores.jsonl").write_text(text)
    for mode in (["--queue", "convincing-wrong"], ["--queue", "uncertain"], ["--top", "0.5"]):
        code = main(["select", *mode, "--scores", str(tmp_path / "scores.jsonl"), "--input", str(data), "--output", str(tmp_path / "q.jsonl")])
        error = capsys.readouterr().err
        assert code == 2 and says in error and "Traceback" not in error, (mode, error)
        assert not (tmp_path / "q.jsonl").exists()


def test_judgments_that_are_not_a_judge_output_are_one_line(tmp_path, capsys):
    rows = [labels_row("p0", "s0", "P", ["1 + 1 = 2.", "The answer is: 2"], [1.0, 1.0], [True, True])]
    labels = write_labels(tmp_path / "labels", rows)
    code = main(["select", "--queue", "uncertain", "--judgments", str(labels / "labels" / "part-00000.parquet"), "--input", str(labels),
                 "--output", str(tmp_path / "q.jsonl")])  # fmt: skip
    error = capsys.readouterr().err
    assert code == 2 and "not a `labeler judge` output" in error and "Traceback" not in error


def test_a_nan_prm_score_is_no_score_in_the_ranking():
    from types import SimpleNamespace

    from labeler.review.queue import gather

    nan = float("nan")
    scored = [SimpleNamespace(aggregates={"min": s}, step_scores=[s, s]) for s in (0.2, nan, 0.7)]
    candidates = gather([solution(i) for i in range(3)], scored=scored, by="min", verdicts=[("incorrect", "1")] * 3)
    assert [c.score for c in candidates][1] is None
    result = rank_convincing_wrong(candidates, 5, "min")
    assert [q.candidate.solution.solution_id for q in result.queued] == ["s2", "s0"] and result.counts["wrong_unscored"] == 1
    assert prm_uncertainty([nan, 0.4]) == (pytest.approx(0.8), 1) and prm_uncertainty([nan]) is None


def test_the_uncertain_queue_doubts_most_at_the_threshold_a_prm_chose():
    """A PRM of `labeler train` calls a first error below the threshold it chose on validation (0.9 here, not 0.5):
    its steps scored near that threshold are the ones in doubt."""
    assert prm_uncertainty([0.9, 0.45, None, 0.55], 0.5) == prm_uncertainty([0.9, 0.45, None, 0.55])
    assert prm_uncertainty([0.5, 0.88], 0.9) == (pytest.approx(1 - 0.02 / 0.9), 1)
    assert prm_uncertainty([0.0, 1.0], 0.9) == (pytest.approx(0.0), 0) and prm_uncertainty([1.0, 0.0], 0.2) == (pytest.approx(0.0), 0)
    assert prm_uncertainty([0.95], 0.9) == (pytest.approx(0.5), 0)  # halfway up the room above t
    # a step sure to be wrong (0.0) is no more in doubt than one sure to be right, at any threshold
    assert prm_uncertainty([1.0, 0.0], 0.2)[0] < prm_uncertainty([1.0, 0.5], 0.2)[0]
    for bad in (0.0, 1.0):
        with pytest.raises(ValueError, match="strictly between"):
            prm_uncertainty([0.5], bad)
    near_half, near_nine = solution(0), solution(1)
    candidates = [Candidate(near_half, step_scores=(0.99, 0.5)), Candidate(near_nine, step_scores=(0.99, 0.89))]
    order = lambda threshold: [q.candidate.solution for q in rank_uncertain(candidates, 5, prm=True, judged=False, threshold=threshold).queued]  # noqa: E731
    assert order(0.5) == [near_half, near_nine] and order(0.9) == [near_nine, near_half]


def test_select_takes_the_threshold_stored_with_a_checkpoint_unless_given(tmp_path):
    from labeler.cli.select import _doubt_threshold

    run = tmp_path / "run"
    (run / "best").mkdir(parents=True)
    (run / "best" / "prm.json").write_text(json.dumps({"threshold": 0.87}))
    assert _doubt_threshold(None, str(run)) == 0.87 and _doubt_threshold(0.3, str(run)) == 0.3
    assert _doubt_threshold(None, "qwen-prm:Qwen/Qwen2.5-Math-PRM-7B") == 0.5 and _doubt_threshold(None, None) == 0.5
    (run / "best" / "prm.json").write_text(json.dumps({"threshold": 1.0}))  # an end of [0, 1]: no point of doubt
    assert _doubt_threshold(None, str(run)) == 0.5


def test_select_uncertain_with_a_threshold_orders_by_it_and_says_so(tmp_path, capsys):
    data = write_jsonl(tmp_path / "solutions.jsonl", ROWS)
    ids = source_ids(data)
    scores = tmp_path / "scores.jsonl"
    scores.write_text("".join(json.dumps({"problem_id": p, "solution_id": ids[p], "step_scores": s}) + "\n" for p, s in SCORES.items()))
    args = ["--queue", "uncertain", "--scores", str(scores), "--input", str(data)]
    assert main(["select", *args, "--output", str(tmp_path / "half.jsonl"), "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["threshold"] == 0.5
    assert main(["select", *args, "--threshold", "0.9", "--output", str(tmp_path / "nine.jsonl"), "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["threshold"] == 0.9
    first = lambda name: queue_lines(tmp_path / name)[0]["problem_id"]  # noqa: E731
    assert first("half.jsonl") == "no-answer-stated" and first("nine.jsonl") in ("wrong-a", "wrong-b")
    for bad in ("1.5", "1", "0"):
        assert main(["select", *args, "--threshold", bad, "--output", str(tmp_path / "bad.jsonl")]) == 2
        assert "--threshold" in capsys.readouterr().err
    assert main(["select", "--top", "0.5", "--scores", str(scores), "--input", str(data), "--threshold", "0.9",
                 "--output", str(tmp_path / "top.jsonl")]) == 2  # fmt: skip
    assert "--queue only" in capsys.readouterr().err
    assert main(["select", "--queue", "uncertain", "--judgments", str(tmp_path / "judge"), "--input", str(data), "--threshold", "0.9",
                 "--output", str(tmp_path / "j.jsonl")]) == 2  # fmt: skip
    assert "needs --prm SPEC or --scores FILE" in capsys.readouterr().err
    assert main(["select", "--queue", "convincing-wrong", "--scores", str(scores), "--input", str(data), "--threshold", "0.9",
                 "--output", str(tmp_path / "cw.jsonl")]) == 2  # fmt: skip
    assert "uncertain only" in capsys.readouterr().err
