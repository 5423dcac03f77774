"""The candidates of best-of-N: a labeling job with the final-answer strategy, in the output folder.

Sampling the candidates is Math-Shepherd's generator stage, and checking their answers is the
final-answer strategy (labeler/labeling/strategies/final_answer.py), so the candidates are a
labeling job like any other: `--candidates` solutions per problem-only row (rows that carry a
solution are candidates as they are), planned into units, committed shard by shard, resumed by a
rerun, their bad rows in rejected/. OUT/ then holds labels/, rollouts/ (the answer checks, with the
extracted answers), rejected/ and manifest.json; `labeler status` and `labeler report` read it.

A candidate is correct when its last step's answer check says so. One whose answer was not checked
(cut by its token budget, no answer the checker can find, a check with no verdict or one that timed
out, by the rollouts table's verdict) is a wrong
candidate that states no answer, as in any best-of-N evaluation: it never wins a vote. Each is
counted by its reason (`CandidateSet.unchecked`), and best-of-N says how much of each figure rests
on them (labeler/evaluation/best_of_n.py).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from labeler.checking.answer_keys import answer_key
from labeler.checking.verdicts import Verdict
from labeler.labeling.config import LabelConfig
from labeler.labeling.rollouts import FINAL_ANSWER_FINISH
from labeler.store.reader import LabelsError, open_job, read_labels_table
from labeler.store.shard_store import REJECTED_DIR, ROLLOUTS_DIR

CANDIDATE_STRATEGY = "final-answer"
NO_VERDICT = "the answer check gave no verdict"  # a last step without a hard label that names no reason
TIMED_OUT = "the answer check timed out"  # its rollouts-table verdict, whatever label the labels row carries


def candidate_job(settings: dict, candidates: int) -> LabelConfig:
    """The labeling job that samples and checks the candidates (`settings`: LabelConfig's input,
    sampling and engine settings)."""
    return LabelConfig(**settings, strategy=CANDIDATE_STRATEGY, solutions_per_problem=candidates, final_step="check", write_rollouts=True)


@dataclass(frozen=True)
class Candidate:
    problem_id: str
    solution_id: str
    problem: str
    reference_answer: str
    steps: tuple[str, ...]
    correct: bool
    answer: str | None  # the final answer the checker extracted from the last step; None: no answer
    unchecked_reason: str | None  # why its answer was not checked; None when it was
    tokens: int  # generated to sample it (0 for a solution the input gave)
    truncated: bool  # its sampling was cut by the token budget

    @property
    def answer_key(self) -> str | None:
        return None if self.answer is None else answer_key(self.answer)


@dataclass
class CandidateSet:
    candidates: list[Candidate]
    rows_rejected: int = 0
    problems_without_candidates: int = 0  # every candidate of theirs was rejected (no steps, prompt too long)
    unchecked: dict[str, int] = field(default_factory=dict)  # candidates whose answer was not checked, by reason

    def pools(self) -> dict[str, list[Candidate]]:
        """Candidates by problem, each pool in solution_id order (the same on every run)."""
        by_problem: dict[str, list[Candidate]] = defaultdict(list)
        for candidate in sorted(self.candidates, key=lambda c: (c.problem_id, c.solution_id)):
            by_problem[candidate.problem_id].append(candidate)
        return dict(by_problem)

    @property
    def sampled_tokens_per_candidate(self) -> float | None:
        """Mean generated tokens of a sampled candidate; None when the input gave every candidate."""
        sampled = [c.tokens for c in self.candidates if c.tokens > 0]
        return sum(sampled) / len(sampled) if sampled else None


LABEL_COLUMNS = [
    "problem_id", "solution_id", "problem", "reference_answer", "steps", "hard_labels", "label_method",
    "unlabelled_reason", "solution_tokens", "solution_truncated", "strategy",
]  # fmt: skip


def read_candidates(output: str) -> CandidateSet:
    """The committed candidates of the job in `output`; LabelsError when there are none or the job
    was not made by the final-answer strategy."""
    job = open_job(output)
    if job is None:
        raise LabelsError(f"{output}: no candidates job there")
    rows = read_labels_table(output, LABEL_COLUMNS).to_pylist()
    strategies = {row["strategy"] for row in rows}
    if strategies != {CANDIDATE_STRATEGY}:
        raise LabelsError(f"{output}: its labels were made by the {', '.join(sorted(strategies))} strategy, not {CANDIDATE_STRATEGY}")
    answers, timed_out = {}, set()
    for name in job.committed_files(ROLLOUTS_DIR):
        table = job.read_table(name, ["solution_id", "finish_reason", "extracted_answer", "verdict"])
        for check in table.to_pylist():
            if check["finish_reason"] == FINAL_ANSWER_FINISH:
                answers[check["solution_id"]] = check["extracted_answer"]
                if check["verdict"] == Verdict.TIMEOUT.value:
                    timed_out.add(check["solution_id"])
    candidates, unchecked = [], defaultdict(int)
    for row in rows:
        if row["solution_id"] in timed_out:  # older labels gave a timed-out check a hard label
            checked, reason = False, TIMED_OUT
        else:
            checked = row["label_method"][-1] == "final_answer" and row["hard_labels"][-1] is not None
            reason = None if checked else row["unlabelled_reason"][-1] or NO_VERDICT
        if reason is not None:
            unchecked[reason] += 1
        candidates.append(
            Candidate(
                problem_id=row["problem_id"],
                solution_id=row["solution_id"],
                problem=row["problem"],
                reference_answer=row["reference_answer"],
                steps=tuple(row["steps"]),
                correct=checked and row["hard_labels"][-1] is True,
                answer=answers.get(row["solution_id"]) if checked else None,
                unchecked_reason=reason,
                tokens=row["solution_tokens"],
                truncated=row["solution_truncated"],
            )
        )
    rejected_problems, rows_rejected = set(), 0
    for name in job.committed_files(REJECTED_DIR):
        for rejected in job.read_table(name, ["problem_id"]).to_pylist():
            rows_rejected += 1
            if rejected["problem_id"] is not None:
                rejected_problems.add(rejected["problem_id"])
    with_candidates = {c.problem_id for c in candidates}
    return CandidateSet(candidates, rows_rejected, len(rejected_problems - with_candidates), dict(unchecked))
