"""Storage that fails: one-line StorageError naming the path and the cause (exit 2 from the CLI), no
temp file left behind; a corrupt manifest says the ways out, and both work (--overwrite,
--rebuild-manifest); a committed shard deleted or cut short is redone by the rerun, with a warning."""

import errno
import json
import os
import re
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
from labeler.store.manifest import ConfigMismatchError, CorruptManifestError
from labeler.store.status import job_status
from tests.conftest import write_jsonl
from tests.fakes import Crash, CrashingGenerator, ScriptedGenerator
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
    assert str(raised.value) == f"{output}/.lock: cannot create the lock: No space left on device"  # the first file a job writes
    assert temp_files(output) == [] and not (output / "manifest.json").exists() and not (output / ".lock").exists()


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


# -- a corrupt manifest ---------------------------------------------------------------------------
def truncate(path: Path, keep: int = 40) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def test_a_corrupt_manifest_says_the_ways_out(dataset, tmp_path, checker):
    output = tmp_path / "out"
    run(config(dataset, output), checker)
    truncate(output / "manifest.json")
    with pytest.raises(CorruptManifestError) as raised:
        run(config(dataset, output), checker)
    message = str(raised.value)
    assert message.startswith(f"{output}/manifest.json: cannot read the manifest: ") and "\n" not in message
    assert "--rebuild-manifest" in message and "--overwrite" in message
    with pytest.raises(CorruptManifestError):
        job_status(str(output))


@pytest.mark.parametrize("content", [b"", b"[]", b"null", b'{"manifest_version": 1}', b'{"units": 3}'])
def test_any_manifest_that_cannot_be_read_is_a_corrupt_manifest(tmp_path, content):
    (tmp_path / "manifest.json").write_bytes(content)
    store = shard_store.ShardStore(tmp_path)
    with pytest.raises(CorruptManifestError, match="--overwrite"):
        store.load()


def test_a_corrupt_manifest_is_one_line_and_exit_2_from_label_and_status(dataset, tmp_path, checker, capsys):
    output = tmp_path / "out"
    run(config(dataset, output), checker)
    truncate(output / "manifest.json")
    assert main(["label", "--input", str(dataset), "--output", str(output), "--quiet"]) == 2
    assert one_line(capsys.readouterr().err).startswith(f"labeler label: error: {output}/manifest.json: cannot read the manifest: ")
    assert main(["status", str(output)]) == 2
    assert "--rebuild-manifest" in one_line(capsys.readouterr().err)


def test_overwrite_starts_over_on_a_corrupt_manifest(dataset, tmp_path, checker):
    output = tmp_path / "out"
    run(config(dataset, output), checker)
    expected = labels(output)
    truncate(output / "manifest.json")
    (output / ".manifest.json.tmp").write_text("{")  # left by a kill mid-rewrite
    summary = run(config(dataset, output), checker, overwrite=True)
    assert summary.units_run_now == UNITS and labels(output) == expected
    assert temp_files(output) == []


def crash_with_records_left(dataset: Path, output: Path, checker, monkeypatch, **overrides) -> LabelConfig:
    """A job killed after 2 of its 4 units, their commit records not yet folded into manifest.json."""
    monkeypatch.setattr(shard_store, "COMPACTIONS_PER_JOB", 1)  # compact only at the end
    cfg = config(dataset, output, **overrides)
    with pytest.raises(Crash):
        run(cfg, checker, CrashingGenerator(PROBLEMS, crash_on_call=3))
    assert len(os.listdir(output / "commits")) == 2
    return cfg


def test_rebuild_manifest_keeps_the_units_whose_records_are_in_commits(dataset, tmp_path, checker, monkeypatch, capsys):
    reference, output = tmp_path / "reference", tmp_path / "out"
    run(config(dataset, reference), checker)
    cfg = crash_with_records_left(dataset, output, checker, monkeypatch)
    kept = {name: (output / "labels" / name).read_bytes() for name in os.listdir(output / "labels")}
    truncate(output / "manifest.json")
    with pytest.raises(CorruptManifestError):
        run(cfg, checker)
    summary = run(cfg, checker, rebuild_manifest=True)
    assert summary.units_run_now == 2
    assert "manifest.json rebuilt from the 2 commit records in commits/" in capsys.readouterr().err
    assert labels(output) == labels(reference)
    for name, content in kept.items():
        assert (output / "labels" / name).read_bytes() == content  # the recorded units were not redone
    manifest = json.loads((output / "manifest.json").read_text())
    assert manifest["totals"]["units_committed"] == UNITS
    assert manifest["engine_record"] in manifest["engine_records"]  # filled in by the engine that resumed
    assert {unit["engine_record"] for unit in manifest["units"]} == {manifest["engine_record"]}
    assert run(cfg, checker, rebuild_manifest=True).units_run_now == 0  # a readable manifest is kept as it is


def test_rebuild_manifest_refuses_records_of_another_config(dataset, tmp_path, checker, monkeypatch):
    output = tmp_path / "out"
    crash_with_records_left(dataset, output, checker, monkeypatch)
    truncate(output / "manifest.json")
    with pytest.raises(ConfigMismatchError, match="commits/ holds units of a job with a different config"):
        run(config(dataset, output, rollouts=2), checker, rebuild_manifest=True)


# -- a committed shard deleted or cut short ---------------------------------------------------------
def test_a_committed_shard_missing_or_cut_short_is_redone_with_a_warning(dataset, tmp_path, checker, capsys):
    reference, output = tmp_path / "reference", tmp_path / "out"
    run(config(dataset, reference), checker)
    run(config(dataset, output), checker)
    truncate(output / "labels" / "part-00001.parquet", keep=100)
    (output / "rollouts" / "part-00002.parquet").unlink()
    capsys.readouterr()
    summary = run(config(dataset, output), checker)
    assert summary.units_run_now == 2 and summary.solutions == len(PROBLEMS)
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith(f"[labeler] warning: {output}/labels/part-00001.parquet: cannot read: ")
    assert warnings[0].endswith(f"; unit {unit_id(output, 1)} was committed with it and is redone")
    missing = f"{output}/rollouts/part-00002.parquet: missing; unit {unit_id(output, 2)} was committed with it and is redone"
    assert warnings[1] == f"[labeler] warning: {missing}"
    assert labels(output) == labels(reference)
    assert pq.read_table(output / "rollouts").num_rows == pq.read_table(reference / "rollouts").num_rows
    assert json.loads((output / "manifest.json").read_text())["totals"]["units_committed"] == UNITS
    assert run(config(dataset, output), checker).units_run_now == 0


def test_a_unit_found_broken_is_pending_before_its_record_goes(dataset, tmp_path, checker, monkeypatch):
    output = tmp_path / "out"
    cfg = crash_with_records_left(dataset, output, checker, monkeypatch)
    (output / "labels" / "part-00000.parquet").unlink()
    store = shard_store.ShardStore(output)
    store.load()
    assert len(store.redo_unreadable_units()) == 1
    on_disk = shard_store.ShardStore(output)
    on_disk.load()  # the manifest now says pending; the unit's record is still there until remove_uncommitted
    assert len(on_disk.committed_units()) == 2  # so a kill here finds it again: the record commits it, the check redoes it
    assert run(cfg, checker).units_run_now == 3


def unit_id(output: Path, index: int) -> str:
    return json.loads((output / "manifest.json").read_text())["units"][index]["unit_id"]


@pytest.mark.parametrize(
    "recorded, in_shards, refused",
    [("1.4", None, True), ("1.5", None, False), (None, "1.5", False), (None, None, False), (None, "1.4", True), (None, "deleted", False), (None, "empty", False)],
)
def test_rebuild_manifest_refuses_records_of_another_labels_schema(dataset, tmp_path, checker, monkeypatch, recorded, in_shards, refused):
    """Records of another labels schema are refused, as a resume refuses such a manifest: a rebuild must not mix
    shards of two schemas in one table. An older record that does not say is judged by its labels shard."""
    import pyarrow as pa

    output = tmp_path / "out"
    cfg = crash_with_records_left(dataset, output, checker, monkeypatch)
    for name in os.listdir(output / "commits"):
        path = output / "commits" / name
        record = json.loads(path.read_text())
        if recorded is None:
            del record["schema_version"]
        else:
            record["schema_version"] = recorded
        path.write_text(json.dumps(record))
        shard = output / record["files"]["labels"]
        if in_shards == "deleted":  # nothing to mix: the resume's shard check redoes the unit
            shard.unlink()
        elif in_shards == "empty":  # a unit whose solutions were all rejected
            pq.write_table(pq.read_table(shard).slice(0, 0), shard)
        elif in_shards is not None:  # the shard as an older labeler wrote it
            table = pq.read_table(shard)
            column = table.schema.get_field_index("schema_version")
            pq.write_table(table.set_column(column, "schema_version", pa.array([in_shards] * table.num_rows)), shard)
    truncate(output / "manifest.json")
    if refused:
        with pytest.raises(ConfigMismatchError, match=rf"labels schema {re.escape(recorded or in_shards)}.*--overwrite"):
            run(cfg, checker, rebuild_manifest=True)
    else:
        assert run(cfg, checker, rebuild_manifest=True).units_run_now == (4 if in_shards == "deleted" else 2)  # kept, or redone
