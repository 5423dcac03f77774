"""The cluster path as the README tells it, run for real on this machine with the tiny model: a head
(`ray start --head`, ports and a temp dir of its own, token authentication on) and a second node
beside it (`ray start --address HEAD`, its own raylet, one CPU each, so a job's two workers land one
on each); `ray job submit` of `labeler label --workers 2`; a driver that joins the running head with
`--ray-address auto`, during whose job the second node's raylet is SIGKILLed. Each job's labels and
rollouts equal those of the same job in one process (bench/compare_outputs.py).

One cluster for the module (starting it costs half a minute); it is stopped at the end, failed test
or not, by killing exactly its processes (tests/ray_cluster.py: `ray stop` would stop every Ray on
the machine), and the teardown fails if any outlived that. The tests run in file order: the second
one loses the node the first one uses.
"""

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from labeler.checking.checker import AnswerChecker
from labeler.labeling.config import LabelConfig
from labeler.labeling.job import run_job
from labeler.store.manifest import load_manifest
from tests.conftest import write_jsonl
from tests.ray_cluster import RAY, REPO_ROOT, LocalRayCluster
from workers.local_executor import LocalExecutor
from workers.model_source import describe_model

pytestmark = [pytest.mark.engine, pytest.mark.cluster]  # make cluster; not in make test

ROWS, SHARD_SIZE = 40, 2  # 20 units: enough that the job outlasts the loss of a node by some seconds
JOB_LIMIT_S = 600  # two engines starting on a loaded 2-core machine can take minutes
READY = re.compile(r"worker ready on node (\w{8}) \(host \S+, pid \d+\)")
COMMITTED = re.compile(r"\] units (\d+)/(\d+) ")


def label_flags(dataset: Path, out: Path, model: Path) -> list[str]:
    return ["--input", str(dataset), "--output", str(out), "--model", str(model), "--rollouts", "4", "--max-new-tokens", "16",
            "--shard-size", str(SHARD_SIZE), "--seed", "5", "--dtype", "float32", "--max-model-len", "1024"]  # fmt: skip


@pytest.fixture(scope="module")
def cluster():
    cluster = LocalRayCluster()
    try:
        cluster.start_head(num_cpus=1)
        cluster.add_node(num_cpus=1, name="second")
        yield cluster
    finally:
        left = cluster.stop()
    assert left == [], f"processes of the test cluster outlived its stop: {left}"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    rows = [
        {"id": f"r{i}", "problem": f"What is {i} + 5?", "answer": str(i + 5), "steps": [f"Start from {i}.", f"Add 5: {i + 5}.", f"The answer is: {i + 5}"]}
        for i in range(ROWS)
    ]
    return write_jsonl(tmp_path_factory.mktemp("cluster-input") / "in.jsonl", rows)


@pytest.fixture(scope="module")
def one_process(dataset, tiny_model_dir, tiny_engine, tmp_path_factory) -> Path:
    """The same job in this process (what `labeler label` without --workers does), on the session's engine."""
    out = tmp_path_factory.mktemp("one-process") / "out"
    config = LabelConfig(input=str(dataset), output=str(out), model=str(tiny_model_dir), rollouts=4, max_new_tokens=16,
                         shard_size=SHARD_SIZE, seed=5, dtype="float32", max_model_len=1024)  # fmt: skip
    with AnswerChecker(timeout_s=5) as checker:
        run_job(config, executor=LocalExecutor(lambda: tiny_engine, checker), model_info=describe_model(str(tiny_model_dir)), progress_enabled=False)
    return out


def assert_every_solution_once_as_in_one_process(out: Path, one_process: Path) -> None:
    labels = pq.read_table(out / "labels").to_pylist()
    assert sorted(row["problem_id"] for row in labels) == sorted(f"r{i}" for i in range(ROWS))  # none missing, none twice
    manifest = load_manifest(out)
    assert manifest["totals"]["units_committed"] == manifest["totals"]["units"] == ROWS // SHARD_SIZE
    compared = subprocess.run([sys.executable, "bench/compare_outputs.py", str(one_process), str(out)], cwd=REPO_ROOT, capture_output=True, text=True)
    assert compared.returncode == 0, compared.stdout + compared.stderr  # labels and rollouts, every column of every row


def test_a_job_submitted_without_the_token_is_refused(cluster):
    env = cluster.client_env()
    del env["RAY_AUTH_TOKEN"], env["RAY_AUTH_MODE"]  # a shell where nothing of Ray's tokens is set
    refused = subprocess.run([RAY, "job", "submit", "--address", cluster.dashboard_url, "--", "true"], env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0
    assert "Unauthorized" in refused.stdout + refused.stderr


def test_ray_job_submit_labels_across_both_nodes_as_one_process_does(cluster, dataset, tiny_model_dir, one_process, tmp_path):
    out = tmp_path / "out"
    # The README's command: the entrypoint runs on the head, where `labeler` is installed; RAY_ADDRESS points it at the cluster.
    submit = [RAY, "job", "submit", "--address", cluster.dashboard_url, "--", "labeler", "label", *label_flags(dataset, out, tiny_model_dir), "--workers", "2"]
    job = subprocess.run(submit, env=cluster.client_env(), capture_output=True, text=True, timeout=JOB_LIMIT_S)
    log = job.stdout + job.stderr  # `ray job submit` streams the entrypoint's stdout and stderr
    assert job.returncode == 0, log[-5000:]
    assert "succeeded" in log and f"solutions labelled : {ROWS}" in log
    # One worker on each node: the nodes' ids as Ray gave them, read from each raylet's command line.
    assert sorted(node for node in READY.findall(log)) == sorted([cluster.node("head").short_id, cluster.node("second").short_id])
    assert_every_solution_once_as_in_one_process(out, one_process)


def test_a_driver_joins_with_auto_and_the_job_survives_losing_the_second_node(cluster, dataset, tiny_model_dir, one_process, tmp_path):
    """The second node is lost as a machine is (tests/ray_cluster.py, lose_node): its processes stop at
    once and its raylet is SIGKILLed. (A raylet killed alone lets its worker finish the unit at hand and
    exit a few seconds later, closing its connections: a worker failure like any other, which
    bench/cluster.py times.) The frozen worker's units can only come back once Ray's health checks
    declare the node dead: the job cannot end before that."""
    second = cluster.node("second")
    assert cluster.processes("second"), "the second node is not up"
    out = tmp_path / "out"
    # `auto`: the head that `ray start` recorded under RAY_TMPDIR (this cluster's, in client_env), not a new local Ray.
    command = ["labeler", "label", *label_flags(dataset, out, tiny_model_dir), "--workers", "2", "--ray-address", "auto"]
    driver = subprocess.Popen(command, env=cluster.client_env(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)  # fmt: skip
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in driver.stderr], daemon=True).start()
    log, committed, lost_at = [], 0, None
    deadline = time.monotonic() + JOB_LIMIT_S
    try:
        while driver.poll() is None or not lines.empty():
            assert time.monotonic() < deadline, "the job did not finish in time:\n" + "".join(log[-40:])
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                continue
            log.append(line)
            if found := COMMITTED.search(line):
                committed = int(found.group(1))
            if lost_at is None and (found := READY.search(line)) and found.group(1) == second.short_id:
                # Its worker gets two units the moment it is ready: they must still be in the queue.
                assert committed <= ROWS // SHARD_SIZE - 4, f"the second node's worker came up too late ({committed} units done)"
                cluster.lose_node("second")
                lost_at = time.monotonic()
        stdout = driver.stdout.read()
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    log = "".join(log)
    (tmp_path / "driver.log").write_text(log)
    said = "the job's log (Ray's forwarded lines left out):\n" + "".join(line for line in log.splitlines(keepends=True) if "[labeler]" in line)[-6000:]
    assert driver.returncode == 0, said
    assert lost_at is not None, "the second node's worker never became ready:\n" + log[-3000:]
    assert "starting 2 workers on Ray (2 node(s)" in log  # it joined the running cluster
    # What happened, in the job's log: the node lost, its worker's units in flight sent back to the
    # queue and retried (on the head's worker, the only one left: the replacement finds no room).
    # Which comes first depends on timing: the node watch's "node X lost" (Ray declares the node dead), or
    # the worker's failure, which names its node; on an idle machine the job can end before the former.
    node_lost = rf"node {second.short_id} \(\S+\) lost \("
    worker_lost = rf"worker prm-labeler-worker-\d on node {second.short_id} failed with units \d+(, \d+)* in flight"
    assert re.search(node_lost, log) or re.search(worker_lost, log), said
    assert re.search(rf"({worker_lost}|units \d+(, \d+)* go back to the queue)", log), said
    assert "not counted against --max-unit-retries" in log  # a lost node spends none of its units' retries
    assert stdout.startswith("solutions labelled") and "[labeler]" not in stdout and "state-dump" not in stdout  # stdout: results only
    assert_every_solution_once_as_in_one_process(out, one_process)
