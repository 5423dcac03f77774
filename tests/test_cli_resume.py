"""End to end: `labeler label` as a subprocess on the real engine, killed with SIGKILL mid-run, then rerun to its end; and stopped by SIGTERM."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import workers.vllm_generator
from labeler.cli import main
from tests.conftest import KeptOpen, write_jsonl

pytestmark = pytest.mark.engine  # in make test: the SIGKILL-and-resume test that stays

ROWS = 12


def labeler(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "labeler.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


class AsStartedBy(KeptOpen):
    """The session's engine as `labeler label --model PATH` records it: named by the path it was given."""

    def __init__(self, engine, model: str):
        super().__init__(engine)
        self.model = model

    def describe(self) -> dict:
        return self.engine.describe() | {"model": self.model}


def committed_units(out: Path) -> list[dict]:
    try:
        manifest = json.loads((out / "manifest.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return []
    return [u for u in manifest["units"] if u["state"] == "committed"]


def test_sigkill_mid_run_then_rerun_gives_every_solution_once(tiny_model_dir, tiny_engine, tmp_path, monkeypatch, capsys):
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

    capsys.readouterr()
    assert main(["status", str(out)]) == 0 and "(interrupted" in capsys.readouterr().out

    # The rerun, in this process, on the session's engine: the same model and settings as the killed process's
    # (its engine record says so; a fresh engine process would add ~15 s and test nothing more).
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: AsStartedBy(tiny_engine, str(tiny_model_dir)))
    code = main(args)
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr[-3000:]
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

    assert main(["status", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "finished"


def test_sigterm_mid_run_on_the_real_engine_stops_with_a_message_and_releases_the_lock(tiny_model_dir, tmp_path, capsys):
    """What Slurm, Kubernetes and Ray send on preemption, to the driver only, while its vLLM engine generates: the job
    stops as on Ctrl-C (one line, exit 143), the lock released, what is committed kept (issue 53, item 10)."""
    rows = [{"id": f"r{i}", "problem": f"What is {i} + 3?", "answer": str(i + 3), "steps": [f"Start from {i}.", f"The answer is: {i + 3}"]}
            for i in range(ROWS)]  # fmt: skip
    dataset = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out"
    process = labeler("label", "--input", str(dataset), "--output", str(out), "--model", str(tiny_model_dir), "--rollouts", "4",
                      "--max-new-tokens", "16", "--shard-size", "1", "--dtype", "float32", "--max-model-len", "1024",
                      start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 600
    try:
        while not committed_units(out):
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no unit committed in time"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 143, stderr[-3000:]
    assert "labeler label: stopped by SIGTERM; rerun the same command to resume" in stderr and "Traceback" not in stderr, stderr[-3000:]
    assert not (out / ".lock").exists()
    assert 1 <= len(committed_units(out)) < ROWS
    capsys.readouterr()
    assert main(["status", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "interrupted"
