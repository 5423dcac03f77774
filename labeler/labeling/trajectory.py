"""Trajectory-level labels, beside the step labels: does the solution as a whole reach the answer?

The verdict on the final answer a solution states (a reasoning trace: its response, the text after
its thinking): the checker's verdict, or `unfinished` for a solution known to stop before its answer
(a trace whose thinking was cut off, a PRM800K trajectory that gave up, a sampled solution cut by its
budget). A last step already checked as the final step (label_method "final_answer") keeps that
check's verdict; any other last step is checked here, once, without generating anything. Where the
trajectory first goes wrong is the step labels' `first_error`; `thinking_steps` says whether it lies
in the thinking or the response.
"""

from __future__ import annotations

from labeler.inputs.traces import response_part
from labeler.labeling.rollouts import FINAL_ANSWER_FINISH, BatchOutcome, Checker

UNFINISHED = "unfinished"
TIMEOUT = "timeout"


def trajectory_label(verdict: str) -> bool | None:
    """True when the trajectory reaches the answer; None when the check timed out (not known)."""
    return None if verdict == TIMEOUT else verdict == "correct"


def label_trajectories(outcome: BatchOutcome, checker: Checker) -> BatchOutcome:
    """Set each labelled solution's trajectory_verdict (one check_many call for those that need one)."""
    final_checks = {
        (record.solution_id, record.step_index): record.verdict
        for record in outcome.rollouts
        if record.finish_reason == FINAL_ANSWER_FINISH
    }
    to_check = []
    for item in outcome.labelled:
        solution = item.solution
        checked = final_checks.get((solution.solution_id, len(solution.steps) - 1))
        if not solution.complete or solution.thinks_at(len(solution.steps) - 1):  # stops before its answer, or has no response
            item.trajectory_verdict = UNFINISHED
        elif checked is not None:
            item.trajectory_verdict = checked
        else:
            to_check.append(item)
    if to_check:
        pairs = [(response_part(item.solution.steps[-1]), item.solution.reference_answer) for item in to_check]
        questions = [item.solution.problem for item in to_check]
        for item, result in zip(to_check, checker.check_many(pairs, questions)):
            item.trajectory_verdict = result.verdict.value
    return outcome
