"""ProcessBench (human step labels) from ../shared/data: every row read, labels table round-trips."""

import json

import datasets
import pyarrow.parquet as pq
import pytest

from labeler.checking.checker import AnswerChecker
from labeler.labeling.config import LabelConfig
from labeler.labeling.job import plan_job, run_job
from workers.local_executor import LocalExecutor
from tests.conftest import shared_data
from tests.fakes import ScriptedGenerator


@pytest.mark.parametrize("name, rows", [("gsm8k", 400), ("math", 1000)])
def test_preset_reads_every_row(name, rows):
    path = shared_data(f"processbench/{name}.jsonl")
    plan = plan_job(LabelConfig(input=str(path), output="unused", model="m"))
    assert plan.preset == "processbench"
    assert plan.rows_read == rows and plan.rejected == []
    assert sum(len(unit.rows) for unit in plan.units) == rows


def test_labels_table_round_trips(tmp_path):
    path = shared_data("processbench/gsm8k.jsonl")
    source = [json.loads(line) for line in path.read_text().splitlines()]
    out = tmp_path / "out"
    config = LabelConfig(input=str(path), output=str(out), model="scripted", rollouts=2, shard_size=128)
    generator = ScriptedGenerator({row["problem"]: row["answer"] for row in source})
    with AnswerChecker() as checker:
        summary = run_job(config, executor=LocalExecutor(lambda: generator, checker), model_info={"name": "scripted"}, progress_enabled=False)
    assert summary.solutions == 400 and len(generator.calls) == 4

    by_id = {row["id"]: row for row in source}
    for table in (pq.read_table(out / "labels"), datasets.load_dataset("parquet", data_files=str(out / "labels" / "*.parquet"), split="train")):
        labels = table.to_pylist() if hasattr(table, "to_pylist") else list(table)
        assert sorted(row["problem_id"] for row in labels) == sorted(by_id)
        for row in labels:
            original = by_id[row["problem_id"]]
            assert row["steps"] == [step.strip() for step in original["steps"]]  # presets trim step whitespace
            assert row["problem"] == original["problem"]
            assert row["reference_answer"] == original["answer"]
            assert len(row["soft_labels"]) == len(row["hard_labels"]) == len(row["n_rollouts"]) == len(original["steps"])
            assert row["n_rollouts"][:-1] == [2] * (len(original["steps"]) - 1)
            # the last step is checked once, or unlabelled where its stated answer could not be compared
            assert row["n_rollouts"][-1] == 1 or (
                row["n_rollouts"][-1] == 0 and row["unlabelled_reason"][-1].startswith("the stated answer could not be compared")
            )
    # the final-step check reproduces ProcessBench's own final-answer verdicts on most rows
    labels = pq.read_table(out / "labels").to_pylist()
    agreement = sum(row["hard_labels"][-1] == by_id[row["problem_id"]]["final_answer_correct"] for row in labels) / len(labels)
    assert agreement > 0.95
    assert sum(row["n_rollouts"][-1] == 0 for row in labels) <= 2  # unknown, not a 0: the checker's rare unparseable
