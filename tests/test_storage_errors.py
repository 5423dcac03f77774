"""Storage that fails: one-line StorageError naming the path and the cause (exit 2 from the CLI), no
temp file left behind."""

import errno
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import labeler.store.shard_store as shard_store
from labeler.checking.checker import AnswerChecker
from labeler.cli import main
from labeler.labeling.config import LabelConfig
from labeler.labeling.job import run_job
from labeler.store.errors import StorageError
from labeler.store.location import OutputLocation
from tests.conftest import write_jsonl
from tests.fakes import ScriptedGenerator
from workers.local_executor import LocalExecutor

PROBLEMS = {f"What is {i} times 2?": str(2 * i) for i in range(1, 9)}
UNITS = 4  # 8 rows, shard size 2


@pytest.fixture(scope="module")
def checker():
    with AnswerChecker(timeout_s=5) as checker:
        yield checker


@pytest.fixture
def dataset(tmp_path) -> Path:
    rows = [
        {"id": f"q{k}", "problem": p, "answer": a, "steps": [f"Double {k + 1}.", f"The answer is: {a}"]}
        for k, (p, a) in enumerate(PROBLEMS.items())
    ]
    return write_jsonl(tmp_path / "input.jsonl", rows)


def config(dataset: Path, output, **overrides) -> LabelConfig:
    settings = dict(input=str(dataset), output=str(output), model="scripted", rollouts=3, shard_size=2, seed=5)
    return LabelConfig(**{**settings, **overrides})


def run(cfg: LabelConfig, checker, generator=None, **kwargs):
    generator = generator or ScriptedGenerator(PROBLEMS)
    return run_job(cfg, executor=LocalExecutor(lambda: generator, checker), model_info={"name": "scripted"}, progress_enabled=False, **kwargs)


def labels(output) -> list[dict]:
    store = shard_store.ShardStore(output)
    store.load()
    rows = [row for name in store.committed_files(shard_store.LABELS_DIR) for row in store.read_table(name).to_pylist()]
    return sorted(rows, key=lambda row: row["solution_id"])


def temp_files(directory: Path) -> list[str]:
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*.tmp"))


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    return lines[0]


# -- one line, the path and the cause -------------------------------------------------------------
def test_an_output_that_is_a_file_is_one_storage_error(dataset, tmp_path, checker):
    output = tmp_path / "taken.txt"
    output.write_text("not a directory")
    with pytest.raises(StorageError, match=f"^{output}: is a file; the output must be a directory$"):
        run(config(dataset, output), checker)
    assert output.read_text() == "not a directory"


def test_an_output_that_is_a_file_is_one_line_and_exit_2_from_the_cli(dataset, tmp_path, capsys):
    output = tmp_path / "taken.txt"
    output.write_text("")
    assert main(["label", "--input", str(dataset), "--output", str(output), "--quiet"]) == 2
    assert one_line(capsys.readouterr().err) == f"labeler label: error: {output}: is a file; the output must be a directory"


def test_an_output_under_a_file_is_one_storage_error(dataset, tmp_path, checker):
    (tmp_path / "file").write_text("")
    with pytest.raises(StorageError, match=r"file/job/\S+: cannot \w+.*: Not a directory$"):
        run(config(dataset, tmp_path / "file" / "job"), checker)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_directory_is_one_storage_error(dataset, tmp_path, checker):
    output = tmp_path / "locked"
    output.mkdir(mode=0o500)
    try:
        with pytest.raises(StorageError, match="Permission denied$"):
            run(config(dataset, output), checker)
    finally:
        output.chmod(0o700)


def test_a_write_refused_is_one_storage_error_naming_the_file(dataset, tmp_path, checker, monkeypatch):
    def refused(path, *args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

    monkeypatch.setattr("labeler.store.location.open", refused, raising=False)  # what an unwritable directory does, as root too
    output = tmp_path / "out"
    with pytest.raises(StorageError) as raised:
        run(config(dataset, output), checker)
    assert str(raised.value) == f"{output}/manifest.json: cannot write: Permission denied"
    assert isinstance(raised.value.__cause__, PermissionError) and isinstance(raised.value, OSError)


def disk_full_after(monkeypatch, writes: int) -> None:
    """os.fsync fails with ENOSPC from the (writes + 1)-th file on, as a disk that fills up does."""
    real_fsync, calls = os.fsync, []

    def fsync(fd):
        if os.path.isfile(f"/proc/self/fd/{fd}"):  # a file's, not a directory's
            calls.append(fd)
            if len(calls) > writes:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def test_a_full_disk_at_the_start_leaves_no_temp_file(dataset, tmp_path, checker, monkeypatch):
    output = tmp_path / "out"
    disk_full_after(monkeypatch, writes=0)
    with pytest.raises(StorageError) as raised:
        run(config(dataset, output), checker)
    assert str(raised.value) == f"{output}/manifest.json: cannot write: No space left on device"
    assert temp_files(output) == [] and not (output / "manifest.json").exists()


def test_a_disk_that_fills_mid_job_leaves_no_temp_file_and_the_rerun_finishes(dataset, tmp_path, checker, monkeypatch):
    reference, output = tmp_path / "reference", tmp_path / "out"
    run(config(dataset, reference), checker)
    disk_full_after(monkeypatch, writes=6)  # the manifest, input rejects, then a few shards and records
    with pytest.raises(StorageError, match=r"cannot write: No space left on device$") as raised:
        run(config(dataset, output), checker)
    assert str(raised.value).startswith(str(output))
    assert temp_files(output) == []
    monkeypatch.undo()  # space freed
    summary = run(config(dataset, output), checker)
    assert 0 < summary.units_run_now <= UNITS and labels(output) == labels(reference)


def test_a_write_interrupted_leaves_no_temp_file(tmp_path, monkeypatch):
    location = OutputLocation(tmp_path)

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        location.write_bytes("manifest.json", b"{}")
    assert os.listdir(tmp_path) == []


def test_an_unreadable_shard_is_one_storage_error(tmp_path):
    (tmp_path / "labels").mkdir()
    (tmp_path / "labels" / "part-00000.parquet").write_bytes(b"PAR1 cut short")
    with pytest.raises(StorageError, match=rf"^{tmp_path}/labels/part-00000.parquet: cannot read: .+[^.]$"):
        OutputLocation(tmp_path).check_parquet("labels/part-00000.parquet")
