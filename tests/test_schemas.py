import pyarrow as pa
import pytest

from labeler.labeling.rollouts import LabelledSolution, RolloutRecord
from labeler.records import RejectedRow, Solution, StepCounts
from labeler.labeling.tables import Provenance, labels_table, rejected_table, rollouts_table
from schemas import LABELS_SCHEMA, SCHEMA_VERSION, SchemaError, validate_labels, validate_rejected, validate_rollouts

PROVENANCE = Provenance(unit_id="u0", model="m", strategy="exhaustive", seed=0, config_hash="h")


def labelled(sid: str = "s1", counts=((3, 4), (0, 4), (1, 1))) -> LabelledSolution:
    solution = Solution("p1", sid, "problem", "4", tuple(f"step {i}" for i in range(len(counts))), "test", 0)
    return LabelledSolution(solution, [StepCounts(n_correct=c, n_rollouts=n, tokens=5) for c, n in counts], trajectory_verdict="correct")


def test_labels_table_derives_labels_from_counts_and_validates():
    table = labels_table([labelled()], PROVENANCE)
    validate_labels(table)
    row = table.to_pylist()[0]
    assert row["soft_labels"] == [0.75, 0.0, 1.0]
    assert row["hard_labels"] == [True, False, True]
    assert row["first_error"] == 1
    assert row["generated_tokens"] == 15
    assert row["schema_version"] == SCHEMA_VERSION
    assert table.schema.metadata[b"prm_labeler.schema_version"] == SCHEMA_VERSION.encode()


def _with(table: pa.Table, column: str, value) -> pa.Table:
    index = table.schema.get_field_index(column)
    return table.set_column(index, table.schema.field(column), pa.array([value], type=table.schema.field(column).type))


@pytest.mark.parametrize(
    "column, value, message",
    [
        ("soft_labels", [0.5, 0.0, 1.0], "disagree with counts"),
        ("hard_labels", [True, True, True], "disagree with counts"),
        ("first_error", 2, "first_error"),
        ("n_rollouts", [4, 0, 1], "n_rollouts=0"),
        ("n_correct", [5, 0, 1], "n_correct=5"),
        ("label_method", ["rollouts", "rollouts"], "label_method has 2 entries"),
        ("label_method", ["rollouts", "guess", "final_answer"], "unknown label_method"),
        ("steps", [], "no steps"),
        ("thinking_steps", 4, "thinking_steps=4 for 3 steps"),
        ("trajectory_verdict", "maybe", "unknown trajectory_verdict"),
        ("trajectory_label", False, "disagrees with trajectory_verdict"),
    ],
)
def test_inconsistent_labels_are_refused(column, value, message):
    table = _with(labels_table([labelled()], PROVENANCE), column, value)
    with pytest.raises(SchemaError, match=message):
        validate_labels(table)


def test_duplicate_solution_ids_and_wrong_types_are_refused():
    with pytest.raises(SchemaError, match="duplicate"):
        validate_labels(labels_table([labelled(), labelled()], PROVENANCE))
    table = labels_table([labelled()], PROVENANCE)
    wrong_type = table.set_column(table.schema.get_field_index("first_error"), "first_error", pa.array([1], type=pa.int64()))
    with pytest.raises(SchemaError, match="does not match schema"):
        validate_labels(wrong_type)
    assert validate_labels(pa.Table.from_pylist([], schema=LABELS_SCHEMA)) is None


def test_rollouts_and_rejected_tables_validate():
    record = RolloutRecord("s1", 0, 0, 7, "The answer is 4", "4", "correct", 4, "stop")
    table = rollouts_table([record], {"s1": "p1"})
    validate_rollouts(table)
    assert table.to_pylist()[0]["problem_id"] == "p1"
    bad = rollouts_table([RolloutRecord("s1", 0, 0, 7, "x", None, "maybe", 1, "stop")], {"s1": "p1"})
    with pytest.raises(SchemaError, match="unknown values"):
        validate_rollouts(bad)
    rejected = rejected_table([RejectedRow(3, "answer", "missing", None, "{}")], stage="input")
    validate_rejected(rejected)
    assert rejected.to_pylist()[0] == {"row_index": 3, "problem_id": None, "stage": "input", "field": "answer", "reason": "missing", "raw": "{}"}
