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


def _table_counts(out) -> tuple[Counter, Counter]:
    rows = _labels(out)
    methods = Counter(method for row in rows for method in row["label_method"])
    negative = Counter(m for row in rows for m, hard in zip(row["label_method"], row["hard_labels"]) if hard is False)
    return methods, negative


def test_the_manifest_totals_each_label_method_as_the_table_has_it(first_error_job):
    out, _, summary = first_error_job
    methods, negative = _table_counts(out)
    assert methods["inferred"] == 8 and negative["inferred"] == 8 and methods["unlabelled"] == 3  # the case is what it says
    totals = json.loads((out / "manifest.json").read_text())["totals"]["label_counts"]
    assert totals["methods"] == dict(methods) and totals["negative"] == dict(negative)
    assert totals["final_right_first_error_undetermined"] == 1 and totals["final_right_after_a_negative_step"] == 1
    assert summary["label_counts"] == totals


def test_the_label_summary_and_status_count_each_label_method_apart_and_explain_the_odd_looking_labels(first_error_job, capsys):
    out, text, _ = first_error_job
    methods, _ = _table_counts(out)
    line = next(line for line in text.splitlines() if line.startswith("label methods"))
    assert f"{methods['rollouts']} measured by rollouts" in line and f"{methods['final_answer']} final answer checked" in line
    assert "8 inferred (not sampled: deduced from other steps; 8 negative)" in line and "3 unlabelled" in line
    assert "early-stopped" not in line  # none: not a 0 shown as if counted
    assert "1 solution has a final answer checked right and an undetermined first error" in text
    assert "1 solution has a final answer checked right after a step labelled wrong" in text
    status, status_text = status_of(out, capsys)
    assert status["label_counts"]["methods"] == dict(methods)
    assert "labels    : steps by label method: " + line.split(":", 1)[1].strip() in status_text
    assert "1 solution has a final answer checked right and an undetermined first error" in status_text


def test_units_written_before_the_count_say_not_recorded_never_zero(first_error_job, capsys):
    out, _, _ = first_error_job
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["units"][0]["stats"]["label_counts"]  # a unit an older prm-labeler committed
    manifest_path.write_text(json.dumps(manifest))
    status, text = status_of(out, capsys)
    assert status["label_counts"] is None
    assert "labels    : steps by label method: not recorded (units written by an older prm-labeler)" in text
