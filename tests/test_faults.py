"""The fault suite: `labeler label` as a subprocess on the real engine (tiny model), with faults an
operator meets injected into real runs, each checked against an uninterrupted run of the same job.

Marked `faults` and left out of `make test`, since each case starts engines several times: run them
with `make faults` (bench/faults.py), which runs the cheap cases of the same faults after them
(tests/test_unit_failures.py, test_output_lock.py, test_storage_errors.py; those are in `make test`)
and prints each case and its outcome.
"""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

from tests.conftest import write_jsonl

pytestmark = [pytest.mark.faults, pytest.mark.engine, pytest.mark.slow]

ROWS = 16
ENGINE_START_LIMIT = 600  # seconds: an engine start on a loaded 2-core machine can take minutes


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    rows = [
        {"id": f"r{i}", "problem": f"What is {i} + 4?", "answer": str(i + 4), "steps": [f"Start from {i}.", f"Add 4 to get {i + 4}.", f"The answer is: {i + 4}"]}
        for i in range(ROWS)
    ]  # fmt: skip
    return write_jsonl(tmp_path_factory.mktemp("faults") / "in.jsonl", rows)


def label_args(dataset: Path, out: Path, model: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "labeler.cli", "label", "--input", str(dataset), "--output", str(out), "--model", str(model),
            "--rollouts", "4", "--max-new-tokens", "16", "--shard-size", "2", "--dtype", "float32", "--max-model-len", "1024", *extra]  # fmt: skip


@pytest.fixture(scope="module")
def clean_run(dataset, tiny_model_dir, tmp_path_factory) -> Path:
    """The same job, uninterrupted: what every faulted run must end up writing."""
    out = tmp_path_factory.mktemp("clean") / "out"
    done = subprocess.run(label_args(dataset, out, tiny_model_dir), capture_output=True, text=True, timeout=ENGINE_START_LIMIT)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def table(out: Path, name: str, leave_out: tuple[str, ...] = ()) -> list[dict]:
    keys = ["solution_id"] if name == "labels" else ["solution_id", "step_index", "rollout_index"]
    rows = pq.read_table(out / name).sort_by([(key, "ascending") for key in keys]).to_pylist()
    return [{key: value for key, value in row.items() if key not in leave_out} for row in rows]


def assert_same_output(out: Path, clean: Path, units: int = ROWS // 2) -> None:
    """Every solution once, with the labels and rollout texts of the uninterrupted run."""
    # Another --shard-size is another config and other units: their ids may differ, nothing else.
    leave_out = () if units == ROWS // 2 else ("unit_id", "config_hash")
    labels = table(out, "labels", leave_out)
    assert sorted(row["problem_id"] for row in labels) == sorted(f"r{i}" for i in range(ROWS))
    assert labels == table(clean, "labels", leave_out)
    assert table(out, "rollouts", leave_out) == table(clean, "rollouts", leave_out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["totals"]["units_committed"] == manifest["totals"]["units"] == units


def committed(out: Path) -> int:
    """Units committed so far: their labels shards (written before the commit record that counts)."""
    return len(list((out / "labels").glob("*.parquet"))) if (out / "labels").exists() else 0


def wait_for(condition, process: subprocess.Popen, what: str, limit: float = ENGINE_START_LIMIT) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if process.poll() is not None:
            raise AssertionError(f"the job ended before {what}: {process.communicate()[1][-3000:]}")
        assert time.monotonic() < deadline, f"no {what} in time"
        time.sleep(0.05)


def descendants(pid: int, name_prefix: str, containing: str = "") -> list[psutil.Process]:
    found = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            title = " ".join(child.cmdline())  # the process title, set by vLLM and Ray; name() is cut to 15 chars
            if title.startswith(name_prefix) and containing in title:
                found.append(child)
        except psutil.Error:
            pass
    return found


def the_process(job: subprocess.Popen, name_prefix: str, limit: float = 120.0) -> psutil.Process:
    """The one process under the job whose title starts with `name_prefix`, waited for up to `limit` seconds:
    a process just started has its title set a moment later (vLLM and Ray set it), and one can be
    unreadable for a moment. Past the limit, an AssertionError that lists the job's processes."""
    deadline = time.monotonic() + limit
    while True:
        found = descendants(job.pid, name_prefix)
        if len(found) == 1:
            return found[0]
        if job.poll() is not None:
            raise AssertionError(f"the job ended before its {name_prefix} process could be killed: {job.communicate()[1][-3000:]}")
        if time.monotonic() > deadline:
            found_now = f"{len(found)} processes titled {name_prefix} under the job after {limit:g} s, not one"
            raise AssertionError(f"{found_now}; its processes:\n" + _tree(job.pid))
        time.sleep(0.1)


def _tree(pid: int) -> str:
    lines = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            lines.append(f"  {child.pid} (parent {child.ppid()}): {' '.join(child.cmdline())[:120]}")
        except psutil.Error as error:
            lines.append(f"  {child.pid}: unreadable ({type(error).__name__})")
    return "\n".join(lines) or "  none"


def with_engine_processes() -> dict:
    """vLLM's engine core in a process of its own (on CPU it runs in-process by default): the process a kill
    targets. RAY_ADDRESS=local: a Ray instance of the job's own, under it, even where a cluster that
    `ray start` recorded on this machine would be joined by default (its workers would not be the job's)."""
    return {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "1", "RAY_ADDRESS": "local"}


def test_engine_core_sigkilled_mid_job_is_replaced_in_process(dataset, tiny_model_dir, clean_run, tmp_path):
    out = tmp_path / "out"
    job = subprocess.Popen(label_args(dataset, out, tiny_model_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=with_engine_processes())
    wait_for(lambda: committed(out) >= 1, job, "first commit")
    the_process(job, "VLLM::EngineCore").kill()
    stdout, stderr = job.communicate(timeout=ENGINE_START_LIMIT)
    assert job.returncode == 0, stderr[-3000:]
    assert "the engine died during unit" in stderr and "starting a new one" in stderr
    assert_same_output(out, clean_run)


def test_engine_core_and_worker_sigkilled_on_ray(dataset, tiny_model_dir, clean_run, tmp_path):
    out = tmp_path / "out"
    args = label_args(dataset, out, tiny_model_dir, "--workers", "1", "--max-unit-retries", "3")
    job = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=with_engine_processes(), start_new_session=True)
    try:
        wait_for(lambda: committed(out) >= 1, job, "first commit")
        the_process(job, "VLLM::EngineCore").kill()
        at_kill = committed(out)
        wait_for(lambda: committed(out) >= at_kill + 2, job, "two commits after the engine kill")  # by the replacement worker
        workers = descendants(job.pid, "ray::", containing="LabelingWorker")  # titled ray::<actor name>:LabelingWorker.<method>
        assert workers, f"no Ray worker among {[(p.pid, p.name()) for p in psutil.Process(job.pid).children(recursive=True)]}"
        for worker in workers:
            worker.kill()
        stdout, stderr = job.communicate(timeout=2 * ENGINE_START_LIMIT)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    assert job.returncode == 0, stderr[-3000:]
    assert stderr.count("starting a worker to replace the failed one") >= 2
    assert "exited" in stderr  # the engine's death, as the worker reported it
    assert_same_output(out, clean_run)


def test_kill_storm_of_the_driver(dataset, tiny_model_dir, clean_run, tmp_path):
    """SIGKILL the whole job (driver and engine) at random moments, five times, then let it finish.

    One solution per unit, so that the job outlasts five kills; sampling seeds come from the prompts,
    so the labels are still those of the clean run."""
    out = tmp_path / "out"
    rng = random.Random(11)
    kills = 0
    storm_args = label_args(dataset, out, tiny_model_dir, "--shard-size", "1")  # the last --shard-size wins
    while kills < 5:
        job = subprocess.Popen(storm_args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        before = committed(out)
        wait_for(lambda: committed(out) > before or job.poll() is not None, job, "a commit")
        time.sleep(rng.uniform(0, 0.1))  # into the next unit's generation, checking or commit (a unit of the tiny model can take 30 ms)
        if job.poll() is not None:
            break
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        kills += 1
    final = subprocess.run(storm_args, capture_output=True, text=True, timeout=ENGINE_START_LIMIT)
    assert final.returncode == 0, final.stderr[-3000:]
    assert kills >= 3, "the job finished before it could be killed: make it longer"
    assert_same_output(out, clean_run, units=ROWS)


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 1 MiB tmpfs, to fill; needs root (CAP_SYS_ADMIN)."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"this machine cannot mount a tmpfs: {mounted.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_a_disk_that_fills_mid_run_stops_cleanly_and_the_job_resumes_elsewhere(dataset, tiny_model_dir, clean_run, small_tmpfs, tmp_path):
    out = small_tmpfs / "out"
    filler = small_tmpfs / "filler"
    job = subprocess.Popen(label_args(dataset, out, tiny_model_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: committed(out) >= 1, job, "first commit")
    with open(filler, "wb") as handle:  # take what is left of the disk
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass
    stdout, stderr = job.communicate(timeout=ENGINE_START_LIMIT)
    assert job.returncode == 2, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert "No space left on device" in last and "Traceback" not in stderr
    assert not [p for p in out.rglob("*.tmp")], "a temp file was left behind"
    moved = tmp_path / "moved"
    shutil.copytree(out, moved)  # the operator moves the job to a disk with room; the output may move on resume
    rerun = subprocess.run(label_args(dataset, moved, tiny_model_dir), capture_output=True, text=True, timeout=ENGINE_START_LIMIT)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert_same_output(moved, clean_run)
