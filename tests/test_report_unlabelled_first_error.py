"""`labeler report`'s first-error plot: a solution with no negative step but a step without a label (a best-of-N
candidate cut by its budget, a step never sampled) is not put under "none", nor is a negative step behind an unlabelled one put at its position: they have a bar of
their own."""

from labeler.evaluation.report import Rejections, ReportInputs, first_error_section
from labeler.store.reader import read_labelled_rows
from tests.synthetic_labels import labels_row, write_labels

NOT_SAMPLED = "not sampled: the final-answer strategy labels only the last step"


def test_solutions_with_an_unlabelled_step_and_no_error_are_not_counted_as_no_error(tmp_path):
    rows = [  # best-of-N candidates: only the last step is labelled, by its answer check
        labels_row("p", "right", "Q", ["a", "b"], [None, 1.0], [None, True], label_method=["unlabelled", "final_answer"]),
        labels_row("p", "wrong", "Q", ["a", "b"], [None, 0.0], [None, False], label_method=["unlabelled", "final_answer"]),
        labels_row("p", "cut", "Q", ["a", "b"], [None, None], [None, None], label_method=["unlabelled", "unlabelled"]),
        labels_row("q", "whole", "Q", ["a", "b"], [1.0, 1.0], [True, True], label_method=["rollouts", "rollouts"]),
    ]
    labels = read_labelled_rows(write_labels(tmp_path / "job", rows))
    section = first_error_section(ReportInputs(str(tmp_path / "job"), labels, Rejections(), None))
    axes = section.plots[0].figure.axes[0]
    bars = {tick.get_text(): patch.get_height() for tick, patch in zip(axes.get_xticklabels(), axes.patches)}
    # every step labelled right: "whole" only; "right" and "cut" have a step without a label, and so has "wrong" before
    # its negative step (the unlabelled first step could be the first error), as `labeler eval` reads it
    assert bars == {"none": 1, "unknown": 3}
    assert "3 solutions" in section.plots[0].caption and "unknown" in section.plots[0].caption


def test_an_outcome_only_job_has_no_first_error_plot_but_a_line_saying_why(tmp_path):
    """Final-answer (bon) candidates label only their last step: every multi-step one would read "unknown"."""
    def candidate(solution_id, last):
        return labels_row(
            "p", solution_id, "Q", ["a", "b"], [None, float(last)], [None, last],
            label_method=["unlabelled", "final_answer"], unlabelled_reason=[NOT_SAMPLED, None],
        )  # fmt: skip

    from labeler.evaluation.report import read_inputs

    write_labels(tmp_path / "job", [candidate("s0", True), candidate("s1", False)])
    section = first_error_section(read_inputs(str(tmp_path / "job")))
    assert not section.plots and "only their last step is labelled (an outcome-only job" in section.html
