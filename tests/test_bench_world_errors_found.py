"""bench/world.py's label figures, fast (no model, no engine): "injected errors found" counts the solutions `labeler eval`'s
F1 table beside it counts, those whose first error the labels determine; an undetermined one (an unlabelled step before
it) or one never labelled is counted apart, in both tables; first_error agreement reads a null first error as undetermined."""

from __future__ import annotations

from bench.world import errors_found, first_error_agreement
from labeler.evaluation.human_agreement import predictions_from_labels, subset_result
from labeler.evaluation.references import read_reference
from tests.conftest import write_jsonl
from tests.synthetic_labels import labels_row, write_labels


def reference(row_id: str, n_steps: int, label: int) -> dict:
    steps = [f"{row_id} step {i}" for i in range(n_steps)]
    return {"id": row_id, "problem": f"Problem {row_id}", "answer": "1", "steps": steps, "label": label}


REFERENCE = [
    reference("found", 4, 2),
    reference("behind-unlabelled", 4, 1),  # the labels' first hard 0 is the known one, but step 0 is unlabelled
    reference("last-behind-unlabelled", 3, 2),  # likewise at the last step
    reference("found-first", 3, 0),
    reference("missed", 3, 1),
    reference("correct", 3, -1),
    reference("found-last", 3, 2),
    reference("never-labelled", 3, 1),
]
HARD = {
    "found": [True, True, False, None],
    "behind-unlabelled": [None, False, None, None],
    "last-behind-unlabelled": [True, None, False],
    "found-first": [False, None, None],
    "missed": [True, True, False],
    "correct": [True, True, True],
    "found-last": [True, True, False],
}


def labels(tmp_path):
    rows = []
    for row in REFERENCE:
        if row["id"] in HARD:
            hard = HARD[row["id"]]
            soft = [None if h is None else float(h) for h in hard]
            rows.append(labels_row(row["id"], f"{row['id']}-s0", row["problem"], row["steps"], soft, hard))
    return write_labels(tmp_path / "labels", rows)


def test_errors_found_counts_the_solutions_the_f1_table_counts(tmp_path):
    path = labels(tmp_path)
    found = errors_found(path, REFERENCE)
    assert found["earlier"] == {"found": 2, "errors": 3, "undetermined": 1, "not_labelled": 1}
    assert found["last_step"] == {"found": 1, "errors": 1, "undetermined": 1, "not_labelled": 0}
    f1_table = subset_result(read_reference(str(write_jsonl(tmp_path / "reference.jsonl", REFERENCE))), predictions_from_labels(str(path)))
    assert f1_table["erroneous"] == found["earlier"]["errors"] + found["last_step"]["errors"]  # one denominator
    assert f1_table["no_prediction"] == found["earlier"]["undetermined"] + found["last_step"]["undetermined"]


def test_first_error_agreement_reads_a_null_first_error_as_undetermined(tmp_path):
    path = labels(tmp_path)
    agreement = first_error_agreement(path, path)
    assert agreement == {"compared": 5, "equal": 5, "undetermined": 2}


def test_the_report_says_what_was_left_out():
    from bench.world import _errors_found_line

    line = _errors_found_line("exhaustive-2", {"earlier": {"found": 2, "errors": 3, "undetermined": 1, "not_labelled": 1},
                                               "last_step": {"found": 1, "errors": 1, "undetermined": 0, "not_labelled": 0}})  # fmt: skip
    assert "earlier steps (by rollouts) 2/3" in line and "last step (answer checked) 1/1" in line
    assert "1 undetermined" in line and "1 not labelled" in line
