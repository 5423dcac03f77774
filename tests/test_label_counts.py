"""What users read of a job's labels counts each label method apart (issue 53, item 12): the Parquet files say what
each column means (field metadata b"description"), the manifest totals the steps per label method, and the `label`
summary and `labeler status` show them (measured, final-answer checks, early-stopped, inferred, retraced, unlabelled),
with "not recorded" for units that predate the count, never 0; and the two labels that look odd under first-error
(an undetermined first error beside a final answer checked right, inferred negatives before it) are said for what
they are."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow.parquet as pq
import pytest

import workers.vllm_generator
from labeler.cli import main
from schemas.descriptions import COLUMN_DESCRIPTIONS, DESCRIPTION_KEY
from tests.conftest import status_of, write_jsonl
from tests.fakes import CUT_MARKER, ScriptedGenerator, WRONG_MARKER

ANSWERS = {f"What is {i}+{i}?": str(2 * i) for i in range(1, 5)}
PROBLEMS = list(ANSWERS)


def _rows() -> list[dict]:
    """A long solution whose step 2 is wrong (every rollout after it fails) but whose final answer is right; one whose
    step 3 leaves every rollout cut (no verdict: its first error undetermined) and whose final answer is right; two
    plain right ones."""
    long_wrong = [f"Step {k}." for k in range(12)]
    long_wrong[2] = f"Step 2 {WRONG_MARKER}."
    cut = [f"Step {k}." for k in range(6)]
    cut[3] = f"Step 3 {CUT_MARKER}!"
    rows = [(PROBLEMS[0], long_wrong), (PROBLEMS[1], cut), (PROBLEMS[2], ["One.", "Two."]), (PROBLEMS[3], ["Three."])]
    return [{"id": f"q{i}", "problem": p, "answer": ANSWERS[p], "steps": [*steps, f"The answer is: {ANSWERS[p]}"]}
            for i, (p, steps) in enumerate(rows)]  # fmt: skip


@pytest.fixture
def first_error_job(tmp_path, monkeypatch, capsys):
    data = write_jsonl(tmp_path / "in.jsonl", _rows())
    out = tmp_path / "out"
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: ScriptedGenerator(ANSWERS, miss_every=None))
    args = ["label", "--input", str(data), "--output", str(out), "--model", "scripted", "--rollouts", "4", "--shard-size", "2",
            "--strategy", "first-error", "--temperature", "0.5", "--quiet"]  # fmt: skip
    assert main(args) == 0
    text = capsys.readouterr().out
    assert main([*args, "--json"]) == 0  # resumed: every unit committed, the same summary
    summary = json.loads(capsys.readouterr().out)
    return out, text, summary


def _labels(out) -> list[dict]:
    return [row for path in sorted((out / "labels").glob("*.parquet")) for row in pq.read_table(path).to_pylist()]


def test_a_written_shard_says_what_each_column_means(first_error_job):
    out, _, _ = first_error_job
    for table, folder in (("labels", "labels"), ("rollouts", "rollouts")):
        schema = pq.read_schema(next((out / folder).glob("*.parquet")))
        described = {field.name: (field.metadata or {}).get(DESCRIPTION_KEY, b"").decode() for field in schema}
        assert all(described.values()), [name for name, text in described.items() if not text]
        assert described == COLUMN_DESCRIPTIONS[table]
    schema = pq.read_schema(next((out / "labels").glob("*.parquet")))
    soft = schema.field("soft_labels").metadata[DESCRIPTION_KEY].decode()
    assert "Only label_method rollouts" in soft and "null for early_stop, inferred, retraced" in soft
    assert "no rollouts of their own" in schema.field("n_rollouts").metadata[DESCRIPTION_KEY].decode()


def test_every_column_of_every_table_has_a_description():
    from schemas.tables import LABELS_SCHEMA, REJECTED_SCHEMA, ROLLOUTS_SCHEMA

    for name, schema in (("labels", LABELS_SCHEMA), ("rollouts", ROLLOUTS_SCHEMA), ("rejected", REJECTED_SCHEMA)):
        assert [field.name for field in schema] == list(COLUMN_DESCRIPTIONS[name]), name
        assert all((field.metadata or {}).get(DESCRIPTION_KEY) for field in schema), name
