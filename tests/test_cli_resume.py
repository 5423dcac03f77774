"""End to end: `labeler label` as a subprocess on the real engine, killed with SIGKILL mid-run, rerun."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import write_jsonl

pytestmark = pytest.mark.engine  # in make test: the SIGKILL-and-resume test that stays

ROWS = 12


def labeler(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "labeler.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def committed_units(out: Path) -> list[dict]:
    try:
        manifest = json.loads((out / "manifest.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return []
    return [u for u in manifest["units"] if u["state"] == "committed"]


def test_sigkill_mid_run_then_rerun_gives_every_solution_once(tiny_model_dir, tmp_path):
    rows = [
        {"id": f"r{i}", "problem": f"What is {i} + 3?", "answer": str(i + 3), "steps": [f"Start from {i}.", f"Add 3 to get {i + 3}.", f"The answer is: {i + 3}"]}
        for i in range(ROWS)
    ]
    dataset = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out"
    args = ["label", "--input", str(dataset), "--output", str(out), "--model", str(tiny_model_dir), "--rollouts", "4",
            "--max-new-tokens", "16", "--shard-size", "2", "--dtype", "float32", "--max-model-len", "1024"]  # fmt: skip

    process = labeler(*args, start_new_session=True)
    deadline = time.monotonic() + 600  # engine start on a loaded 2-core machine can take minutes
    while len(committed_units(out)) < 2:
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no unit committed in time"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)  # the engine process too
    process.wait()
    first = committed_units(out)
    assert 2 <= len(first) < ROWS // 2, "the job must be killed mid-run"
    shards = {u["files"]["labels"]: (out / u["files"]["labels"]).read_bytes() for u in first}

    status = subprocess.run([sys.executable, "-m", "labeler.cli", "status", str(out)], capture_output=True, text=True)
    assert status.returncode == 0 and "incomplete" in status.stdout

    rerun = labeler(*args)
    stdout, stderr = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, stderr[-3000:]
    assert f"solutions labelled : {ROWS}" in stdout
    assert f"units {ROWS // 2}/{ROWS // 2}" in stderr  # progress lines on stderr

    labels = pq.read_table(out / "labels").to_pylist()
    assert sorted(r["problem_id"] for r in labels) == sorted(f"r{i}" for i in range(ROWS))  # none missing, none twice
    assert len({r["solution_id"] for r in labels}) == ROWS
    for name, content in shards.items():
        assert (out / name).read_bytes() == content  # committed shards untouched
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["totals"]["units_committed"] == manifest["totals"]["units"] == ROWS // 2
    assert manifest["totals"]["solutions"] == ROWS
    assert sorted(p.name for p in (out / "labels").iterdir()) == sorted(Path(u["files"]["labels"]).name for u in manifest["units"])
    rollouts = pq.read_table(out / "rollouts")
    assert rollouts.num_rows == manifest["totals"]["rollouts"] == ROWS * (4 + 4 + 1)

    status = subprocess.run([sys.executable, "-m", "labeler.cli", "status", str(out), "--json"], capture_output=True, text=True)
    assert json.loads(status.stdout)["state"] == "finished"
