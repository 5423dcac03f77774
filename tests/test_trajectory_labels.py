"""Trajectory-level labels beside the step labels (schema 1.4), and labels shards of 1.3 and older still read."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from labeler.checking.checker import AnswerChecker
from labeler.labeling.generation import SamplingSettings
from labeler.labeling.strategies import StrategySettings, label
from labeler.labeling.tables import Provenance, labels_table
from labeler.records import Solution
from labeler.store.reader import read_labelled_rows
from schemas import LABELS_SCHEMA, validate_labels
from tests.fakes import WRONG_MARKER, ScriptedGenerator
from tests.synthetic_labels import labels_row, write_labels

PROBLEM, ANSWER = "What is 20 + 22?", "42"


def trace(sid, thinking, response, complete=True, thinking_steps=None):
    steps = (*thinking, *([response] if response else []))
    count = len(thinking) if thinking_steps is None else thinking_steps
    return Solution("p", sid, PROBLEM, ANSWER, steps, "trace", 0, complete=complete, thinking_steps=count)


@pytest.fixture(scope="module")
def checker():
    with AnswerChecker() as checker:
        yield checker


def labelled(strategy, solutions, checker, **overrides):
    settings = StrategySettings(**{"rollouts": 4, "sampling": SamplingSettings(max_new_tokens=16), "seed": 1, **overrides})
    outcome = label(strategy, solutions, ScriptedGenerator({PROBLEM: ANSWER}, miss_every=None), checker, settings)
    table = labels_table(outcome.labelled, Provenance("u", "m", strategy, 1, "h"))
    validate_labels(table)
    return {row["solution_id"]: row for row in table.to_pylist()}


@pytest.mark.parametrize("strategy", ["exhaustive", "first-error", "adaptive"])
def test_each_strategy_writes_the_trajectory_labels(strategy, checker):
    solutions = [
        trace("right", ["Think a.", "Think b."], "So \\boxed{42}."),
        trace("wrong", ["Think a.", f"Think b. {WRONG_MARKER}"], "So \\boxed{41}."),
        trace("cut", ["Think a.", "Think b."], None, complete=False),  # thinking cut off: no response
        Solution("p", "plain", PROBLEM, ANSWER, ("Add them.", "It is done."), "math", 0),  # states no answer
    ]
    rows = labelled(strategy, solutions, checker)
    got = {sid: (row["thinking_steps"], row["trajectory_verdict"], row["trajectory_label"], row["first_error"]) for sid, row in rows.items()}
    assert got == {
        "right": (2, "correct", True, -1),
        "wrong": (2, "incorrect", False, 1),  # the trace goes wrong in its thinking, at step 1
        "cut": (2, "unfinished", False, -1),  # its last thinking step is rolled out, not checked
        "plain": (0, "unparseable", False, -1),
    }
    assert rows["cut"]["label_method"][-1] != "final_answer"


def test_the_response_is_checked_for_the_trajectory_even_when_its_step_is_rolled_out(checker):
    rows = labelled("exhaustive", [trace("wrong", ["Think a."], "So \\boxed{41}.")], checker, final_step="rollouts")
    row = rows["wrong"]
    assert row["label_method"] == ["rollouts", "rollouts"] and row["hard_labels"] == [True, True]  # rollouts reach 42
    assert (row["trajectory_verdict"], row["trajectory_label"]) == ("incorrect", False)  # the response says 41


def test_a_labels_shard_of_schema_1_3_reads_beside_one_of_1_4(tmp_path):
    new = labels_row("p1", "s-new", "Add.", ["1 + 1 = 2."], [1.0], [True], thinking_steps=1, trajectory_verdict="correct", trajectory_label=True)
    old = labels_row("p2", "s-old", "Add.", ["1 + 1 = 3."], [0.0], [False], schema_version="1.3")
    write_labels(tmp_path / "new", [new])
    old_schema = pa.schema([f for f in LABELS_SCHEMA if f.name not in ("thinking_steps", "trajectory_verdict", "trajectory_label")])
    for key in ("thinking_steps", "trajectory_verdict", "trajectory_label"):
        del old[key]
    (tmp_path / "new" / "labels" / "part-00001.parquet").unlink(missing_ok=True)
    pq.write_table(pa.Table.from_pylist([old], schema=old_schema), tmp_path / "new" / "labels" / "part-00001.parquet")
    rows = {row.solution_id: row for row in read_labelled_rows(tmp_path / "new")}
    assert (rows["s-new"].thinking_steps, rows["s-new"].trajectory_label) == (1, True)
    assert (rows["s-old"].thinking_steps, rows["s-old"].trajectory_label) == (0, None)  # read as a plain solution, no label
    only_old = tmp_path / "old" / "part-00000.parquet"
    only_old.parent.mkdir()
    pq.write_table(pa.Table.from_pylist([old], schema=old_schema), only_old)
    assert [(r.thinking_steps, r.trajectory_label) for r in read_labelled_rows(only_old)] == [(0, None)]
