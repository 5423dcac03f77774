"""The labels table's first_error column says a first error only where the steps determine it: the first hard-negative
step with every step before it labelled; -1 only when every step is labelled and none is negative; null otherwise.
The writer, validate, the reader (older shards are migrated on read) and `export`, `view` and `report` agree."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from labeler.checking.checker import AnswerChecker
from labeler.labeling.config import LabelConfig
from labeler.labeling.job import run_job
from labeler.labeling.rollouts import LabelledSolution
from labeler.labeling.tables import Provenance, labels_table
from labeler.records import Solution, StepCounts
from labeler.store.reader import read_labelled_rows, read_labels_table
from schemas import LABELS_SCHEMA, SchemaError, validate_labels
from schemas.tables import first_error
from tests.conftest import write_jsonl
from tests.fakes import ScriptedGenerator
from tests.synthetic_labels import labels_row, write_labels
from workers.local_executor import LocalExecutor

PROVENANCE = Provenance(unit_id="u0", model="m", strategy="exhaustive", seed=0, config_hash="h")
UNLABELLED = StepCounts(measured_by="unlabelled", unlabelled_reason="every rollout cut by its token budget")


@given(st.lists(st.sampled_from([True, False, None]), min_size=1, max_size=8))
def test_the_rule(hard):
    result = first_error(hard)
    if result == -1:  # every step labelled right
        assert all(label is True for label in hard)
    elif result is None:  # an unlabelled step comes before any labelled wrong one
        first_not_right = next(i for i, label in enumerate(hard) if label is not True)
        assert hard[first_not_right] is None
    else:  # the first step labelled wrong, every step before it labelled right
        assert hard[result] is False and all(label is True for label in hard[:result])


def test_the_rule_on_the_issues_cases():
    assert first_error([None, True]) is None  # was -1: read as error-free
    assert first_error([None, False]) is None  # was 1: read as erring at the last step
    assert first_error([True, None, False]) is None
    assert first_error([True, False, None]) == 1  # nothing unlabelled before it: known
    assert first_error([True, True]) == -1
    assert first_error([False, None]) == 0


def written(*steps: StepCounts) -> dict:
    solution = Solution("p1", "s1", "problem", "4", tuple(f"step {i}" for i in range(len(steps))), "test", 0)
    table = labels_table([LabelledSolution(solution, list(steps), trajectory_verdict="correct")], PROVENANCE)
    validate_labels(table)
    return table.to_pylist()[0]


def test_the_writer_leaves_first_error_null_behind_an_unlabelled_step_and_keeps_the_steps_labels():
    row = written(UNLABELLED, StepCounts(n_correct=0, n_rollouts=1, measured_by="final_answer"))
    assert (row["hard_labels"], row["label_method"], row["first_error"]) == ([None, False], ["unlabelled", "final_answer"], None)
    row = written(UNLABELLED, StepCounts(n_correct=1, n_rollouts=1, measured_by="final_answer"))
    assert (row["hard_labels"], row["first_error"]) == ([None, True], None)
    row = written(StepCounts(n_correct=2, n_rollouts=4), StepCounts(n_correct=0, n_rollouts=4), UNLABELLED)
    assert (row["hard_labels"], row["first_error"]) == ([True, False, None], 1)


PROBLEMS = {f"What is {i} plus {i}?": str(2 * i) for i in range(1, 4)}


def test_a_job_whose_first_step_is_unlabelled_writes_a_null_first_error(tmp_path):
    """The issue's repro: a final-answer job labels only the last step of a given solution."""
    rows = [
        {"id": f"q{k}", "problem": problem, "answer": answer, "steps": ["We add.", f"The answer is: {answer if k else int(answer) + 1}"]}
        for k, (problem, answer) in enumerate(PROBLEMS.items())
    ]
    config = LabelConfig(input=str(write_jsonl(tmp_path / "in.jsonl", rows)), output=str(tmp_path / "out"), model="scripted",
                         strategy="final-answer", final_step="check", seed=7)  # fmt: skip
    with AnswerChecker(timeout_s=5) as checker:
        executor = LocalExecutor(lambda: ScriptedGenerator(PROBLEMS), checker)
        run_job(config, executor=executor, model_info={"name": "scripted"}, progress_enabled=False)
    labels = pq.read_table(tmp_path / "out" / "labels").sort_by("row_index").to_pylist()  # as a user reads it
    assert [row["label_method"] for row in labels] == [["unlabelled", "final_answer"]] * 3
    assert [row["hard_labels"] for row in labels] == [[None, False], [None, True], [None, True]]
    assert [row["first_error"] for row in labels] == [None, None, None]


def old_shard(directory, rows: list[dict], version: str = "1.5"):
    """A shard as schema 1.5 wrote it: first_error not nullable, the first hard-negative step or -1 whatever came before."""
    fields = [pa.field("first_error", pa.int32(), nullable=False) if f.name == "first_error" else f for f in LABELS_SCHEMA]
    schema = pa.schema(fields, metadata={b"prm_labeler.table": b"labels", b"prm_labeler.schema_version": version.encode()})
    old_rule = lambda hard: next((i for i, h in enumerate(hard) if h is False), -1)  # noqa: E731
    rows = [dict(row, schema_version=version, first_error=old_rule(row["hard_labels"])) for row in rows]
    folder = directory / "labels"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), folder / "part-00000.parquet")
    return directory


def mixed_rows() -> list[dict]:
    return [
        labels_row("p", "none-but-unknown", "Q", ["a", "b"], [None, 1.0], [None, True]),
        labels_row("p", "later-but-unknown", "Q", ["a", "b"], [None, 0.0], [None, False]),
        labels_row("p", "known", "Q", ["a", "b", "c"], [1.0, 0.0, None], [True, False, None]),
        labels_row("p", "whole", "Q", ["a", "b"], [1.0, 1.0], [True, True]),
    ]


@pytest.mark.parametrize("version", ["1.5", "1.2"])
def test_an_older_shard_is_migrated_on_read(tmp_path, version):
    job = old_shard(tmp_path / "old", mixed_rows(), version)
    assert pq.read_table(job / "labels").column("first_error").to_pylist() == [-1, 1, 1, -1]  # what 1.5 wrote
    expected = [None, None, 1, -1]
    assert read_labels_table(job).column("first_error").to_pylist() == expected
    assert read_labels_table(job, ["solution_id", "first_error"]).column_names == ["solution_id", "first_error"]
    assert read_labels_table(job, ["first_error"]).column("first_error").to_pylist() == expected
    rows = read_labelled_rows(job)
    assert [row.first_error for row in rows] == expected
    assert [row.hard_labels for row in rows] == [(None, True), (None, False), (True, False, None), (True, True)]  # unchanged


def test_old_and_new_shards_read_together(tmp_path):
    old = old_shard(tmp_path / "job", mixed_rows()[:2])
    write_labels(tmp_path / "new", mixed_rows()[2:])
    (tmp_path / "new" / "labels" / "part-00000.parquet").rename(old / "labels" / "part-00001.parquet")
    assert read_labels_table(old).column("first_error").to_pylist() == [None, None, 1, -1]


def test_validate_rejects_a_known_first_error_behind_an_unlabelled_step():
    row = written(UNLABELLED, StepCounts(n_correct=1, n_rollouts=1, measured_by="final_answer"))
    table = pa.Table.from_pylist([row | {"first_error": -1}], schema=labels_table([], PROVENANCE).schema)
    with pytest.raises(SchemaError, match=r"first_error=-1 but .*null"):
        validate_labels(table)
    table = pa.Table.from_pylist([row | {"first_error": 1}], schema=table.schema)
    with pytest.raises(SchemaError, match="first_error=1"):
        validate_labels(table)
    complete = written(StepCounts(n_correct=1, n_rollouts=2), StepCounts(n_correct=1, n_rollouts=2))
    with pytest.raises(SchemaError, match="first_error=None"):
        validate_labels(pa.Table.from_pylist([complete | {"first_error": None}], schema=table.schema))


def test_the_column_export_and_report_agree(tmp_path):
    from labeler.evaluation.report import known_first_error
    from labeler.prm.export import _jsonl_record

    job = write_labels(tmp_path / "job", [dict(row, first_error=first_error(row["hard_labels"])) for row in mixed_rows()])
    column = read_labels_table(job).column("first_error").to_pylist()
    rows = read_labelled_rows(job)
    assert [known_first_error(row) for row in rows] == column == [None, None, 1, -1]
    assert [_jsonl_record(row)["first_error"] for row in rows] == column  # export --format jsonl


STEP = st.sampled_from([
    StepCounts(n_correct=1, n_rollouts=2),
    StepCounts(n_correct=0, n_rollouts=2),
    StepCounts(measured_by="inferred", inferred_hard=True),
    StepCounts(measured_by="inferred", inferred_hard=False),
    UNLABELLED,
])  # fmt: skip


@given(st.lists(STEP, min_size=1, max_size=6))
def test_every_written_row_follows_the_rule_and_validates(steps):
    row = written(*steps)  # validated
    assert row["first_error"] == first_error(row["hard_labels"])  # the rule, whatever the steps
