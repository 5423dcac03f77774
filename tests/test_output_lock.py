"""One driver per output (labeler/store/lock.py): a second driver is refused naming the holder, a
stale lock is taken over, a driver that lost its lock stops before it commits, and the lock goes
when the job ends. The local lock is tested for real, S3's conditional writes on moto, GCS's on a fake."""

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from labeler.checking.checker import AnswerChecker
from labeler.cli import main
from labeler.labeling.config import LabelConfig
from labeler.labeling.job import run_job
from labeler.store import lock as lock_module
from labeler.store.errors import StorageError
from labeler.store.location import OutputLocation
from labeler.store.lock import LOCK_NAME, LockHolder, LockLostError, OutputLock, OutputLockedError, read_lock_holder
from labeler.store.lock_file import GcsLockFile, open_lock_file
from labeler.store.shard_store import ShardStore
from tests.conftest import write_jsonl
from tests.fakes import Crash, CrashingGenerator, ScriptedGenerator
from tests.test_object_store import s3_endpoint  # noqa: F401  (the moto S3 server fixture)
from workers.local_executor import LocalExecutor

REPO = Path(__file__).parents[1]
PROBLEMS = {f"What is {i} times 2?": str(2 * i) for i in range(1, 9)}


class SlowGenerator(ScriptedGenerator):
    """The test double, slow enough that two drivers started together overlap."""

    def generate(self, requests, sampling):
        time.sleep(0.2)
        return super().generate(requests, sampling)


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
    return LabelConfig(**{**dict(input=str(dataset), output=str(output), model="scripted", rollouts=2, shard_size=2, seed=3), **overrides})


def run(cfg: LabelConfig, checker, generator=None, **kwargs):
    generator = generator or ScriptedGenerator(PROBLEMS)
    executor = LocalExecutor(lambda: generator, checker)
    return run_job(cfg, executor=executor, model_info={"name": "scripted"}, progress_enabled=False, **kwargs)


def iso(seconds_ago: float) -> str:
    return (datetime.now(timezone.utc) - timedelta(seconds=seconds_ago)).isoformat(timespec="seconds")


def write_lock(output: Path, *, host: str, pid: int, heartbeat_age: float, token: str = "someone-else") -> None:
    output.mkdir(parents=True, exist_ok=True)
    holder = LockHolder(token=token, host=host, pid=pid, started=iso(3600), heartbeat=iso(heartbeat_age))
    temp = output / f"{LOCK_NAME}.test.tmp"  # renamed into place, as a driver would: a reader never sees half a file
    temp.write_bytes(holder.to_bytes())
    os.replace(temp, output / LOCK_NAME)


def lock_token(output: Path) -> str:
    return json.loads((output / LOCK_NAME).read_bytes())["token"]


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


# -- taking and refusing --------------------------------------------------------------------------------
def test_the_lock_file_names_its_holder_and_a_second_driver_is_refused_naming_it(tmp_path):
    location = OutputLocation(tmp_path / "out")
    with OutputLock(location) as first:
        content = json.loads((tmp_path / "out" / LOCK_NAME).read_bytes())
        assert content["token"] == first.holder.token and content["pid"] == os.getpid() and content["host"] == socket.gethostname()
        assert {"started", "heartbeat", "command", "version"} <= set(content)
        with pytest.raises(OutputLockedError) as refused:
            OutputLock(location).acquire()
        message = str(refused.value)
        assert message.startswith(f"{tmp_path / 'out' / LOCK_NAME}: another driver is labelling this output")
        assert f"host {socket.gethostname()}, pid {os.getpid()}, since {content['started']}, last heartbeat " in message
        assert lock_token(tmp_path / "out") == first.holder.token  # the refused driver left it alone
    assert not (tmp_path / "out" / LOCK_NAME).exists()  # released


def test_a_fresh_lock_of_another_host_is_respected(tmp_path):
    write_lock(tmp_path, host="gpu-node-7", pid=1, heartbeat_age=5)
    with pytest.raises(OutputLockedError, match="host gpu-node-7, pid 1, since .*, last heartbeat [0-9]+s ago"):
        OutputLock(OutputLocation(tmp_path)).acquire()


def test_the_lock_of_a_dead_process_on_this_host_is_taken_over_with_a_warning(tmp_path):
    pid = dead_pid()
    write_lock(tmp_path, host=socket.gethostname(), pid=pid, heartbeat_age=1)
    with OutputLock(OutputLocation(tmp_path)) as lock:
        assert lock_token(tmp_path) == lock.holder.token
        assert len(lock.warnings) == 1 and f"took over a stale lock (host {socket.gethostname()}, pid {pid}," in lock.warnings[0]
        assert "that process is gone" in lock.warnings[0]
    assert list(tmp_path.iterdir()) == []  # neither the lock nor the stale copy moved aside is left


def test_a_lock_whose_heartbeat_is_old_is_taken_over(tmp_path):
    write_lock(tmp_path, host="gpu-node-7", pid=1, heartbeat_age=lock_module.STALE_AFTER_SECONDS + 30)
    with OutputLock(OutputLocation(tmp_path)) as lock:
        assert lock_token(tmp_path) == lock.holder.token and "gpu-node-7" in lock.warnings[0]


def test_an_unreadable_lock_is_taken_over_after_a_second_look(tmp_path, monkeypatch):
    monkeypatch.setattr(lock_module, "UNREADABLE_WAIT_SECONDS", 0.01)
    (tmp_path / LOCK_NAME).write_bytes(b"")  # a driver killed between its create and its write
    with OutputLock(OutputLocation(tmp_path)) as lock:
        assert lock_token(tmp_path) == lock.holder.token and "unreadable" in lock.warnings[0]


def test_of_two_drivers_taking_over_one_stale_lock_only_one_gets_it(tmp_path):
    write_lock(tmp_path, host="gpu-node-7", pid=1, heartbeat_age=600)
    stale = (tmp_path / LOCK_NAME).read_bytes()
    first, second = OutputLock(OutputLocation(tmp_path)), OutputLock(OutputLocation(tmp_path))
    assert first.file.take_over(first.holder.to_bytes(), stale) is not None
    assert second.file.take_over(second.holder.to_bytes(), stale) is None  # what it judged stale is gone
    assert lock_token(tmp_path) == first.holder.token  # and the first one's lock was put back
    assert [path.name for path in tmp_path.iterdir()] == [LOCK_NAME]


# -- whose process holds it: a pid is judged with its start time, a lock of another version never taken over ----
def write_lock_fields(output: Path, **fields) -> None:
    """A lock file with these fields over those of a fresh lock of a live process on this host."""
    output.mkdir(parents=True, exist_ok=True)
    me = OutputLock(OutputLocation(output)).holder  # this process, this host, as a driver records them
    content = {**json.loads(me.to_bytes()), "token": "someone-else", "started": iso(3600), "heartbeat": iso(1), **fields}
    (output / LOCK_NAME).write_text(json.dumps(content))


def test_a_lock_records_the_boot_and_the_start_of_its_process(tmp_path):
    with OutputLock(OutputLocation(tmp_path)):
        content = json.loads((tmp_path / LOCK_NAME).read_bytes())
    assert content["format"] == lock_module.LOCK_FORMAT
    assert content["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert content["process_start"] == Path(f"/proc/{os.getpid()}/stat").read_text().rpartition(")")[2].split()[19]
    assert content["pid_namespace"] == os.readlink("/proc/self/ns/pid")


def test_a_live_holder_in_another_pid_namespace_of_this_host_name_is_judged_by_its_heartbeat(tmp_path):
    """Two containers given one hostname share a boot, not their pids: a pid that does not exist here may be a
    live driver there. Its lock is not taken over, and status does not call it gone, until its heartbeat is stale."""
    assert lock_module._pid_namespace().startswith("pid:[")
    elsewhere = {"pid": 2**31 - 2, "process_start": "5", "pid_namespace": "pid:[1]"}  # a pid that is not alive here
    write_lock_fields(tmp_path, **elsewhere)
    with pytest.raises(OutputLockedError, match="another driver is labelling this output"):
        OutputLock(OutputLocation(tmp_path)).acquire()
    assert read_lock_holder(OutputLocation(tmp_path))["stale"] is False
    write_lock_fields(tmp_path, **elsewhere, heartbeat=iso(90))  # its heartbeat past 60 s: stale, taken over
    assert read_lock_holder(OutputLocation(tmp_path))["stale"] is True
    with OutputLock(OutputLocation(tmp_path)) as lock:
        assert re.search(r"last heartbeat 9\ds ago, over 60s", lock.warnings[0]), lock.warnings
    write_lock_fields(tmp_path, **{**elsewhere, "pid_namespace": lock_module._pid_namespace()})  # this namespace: gone
    assert read_lock_holder(OutputLocation(tmp_path))["gone"] == "that process is gone"
    with OutputLock(OutputLocation(tmp_path)) as lock:
        assert "that process is gone" in lock.warnings[0]
    # a lock of format 2 records no namespace: judged by its pid, as before
    write_lock_fields(tmp_path, pid=2**31 - 2, process_start="5", format=2, pid_namespace="")
    content = json.loads((tmp_path / LOCK_NAME).read_text())
    (tmp_path / LOCK_NAME).write_text(json.dumps({key: value for key, value in content.items() if key != "pid_namespace"}))
    assert read_lock_holder(OutputLocation(tmp_path))["gone"] == "that process is gone"


def test_a_lock_of_this_pid_taken_by_an_earlier_process_is_stale(tmp_path):
    # a driver restarted in the same PID namespace (a process supervisor inside one container): its pid is
    # reused, and the lock names the process of before the restart (a restarted container gets a new PID
    # namespace: judged by its heartbeat, the test above)
    write_lock_fields(tmp_path, pid=os.getpid(), process_start="1")
    with OutputLock(OutputLocation(tmp_path)) as lock:
        assert lock_token(tmp_path) == lock.holder.token
        assert len(lock.warnings) == 1 and f"pid {os.getpid()} is another process now" in lock.warnings[0]


def test_a_lock_of_this_pid_written_by_a_version_that_recorded_no_start_is_stale(tmp_path):
    write_lock(tmp_path, host=socket.gethostname(), pid=os.getpid(), heartbeat_age=1)  # the lock format of before
    with OutputLock(OutputLocation(tmp_path)) as lock:
        assert lock_token(tmp_path) == lock.holder.token and f"pid {os.getpid()} is another process now" in lock.warnings[0]


def test_a_live_process_is_judged_by_its_start_time(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = Path(f"/proc/{sleeper.pid}/stat").read_text().rpartition(")")[2].split()[19]
        write_lock_fields(tmp_path, pid=sleeper.pid, process_start=started)
        with pytest.raises(OutputLockedError, match=f"another driver is labelling this output .*pid {sleeper.pid}"):
            OutputLock(OutputLocation(tmp_path)).acquire()
        write_lock_fields(tmp_path, pid=sleeper.pid, process_start=str(int(started) - 1))  # the pid was reused
        with OutputLock(OutputLocation(tmp_path)) as lock:
            assert f"pid {sleeper.pid} is another process now" in lock.warnings[0]
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_lock_taken_before_this_host_restarted_is_stale(tmp_path):
    write_lock_fields(tmp_path, boot_id="00000000-0000-0000-0000-000000000000")
    with OutputLock(OutputLocation(tmp_path)) as lock:
        assert "this host has restarted since" in lock.warnings[0]


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"lease_seconds": 600}, "fields this version does not know: lease_seconds"),
        ({"format": lock_module.LOCK_FORMAT + 1}, f"format {lock_module.LOCK_FORMAT + 1}"),
        ({"format": "3-beta"}, "format 3-beta"),
    ],
)
@pytest.mark.parametrize("heartbeat_age", [1, lock_module.STALE_AFTER_SECONDS + 600])
def test_a_lock_of_a_newer_version_is_never_taken_over(fields, named, heartbeat_age, tmp_path):
    write_lock_fields(tmp_path, pid=dead_pid(), heartbeat=iso(heartbeat_age), version="9.0", **fields)
    before = (tmp_path / LOCK_NAME).read_bytes()
    with pytest.raises(OutputLockedError) as refused:
        OutputLock(OutputLocation(tmp_path)).acquire()
    message = str(refused.value)
    assert "written by labeler 9.0" in message and named in message and "its driver may still be running" in message
    assert f"delete {tmp_path / LOCK_NAME}" in message
    assert (tmp_path / LOCK_NAME).read_bytes() == before


def test_status_says_a_lock_of_a_newer_version_is_not_taken_over(tmp_path):
    from labeler.store.status import _describe_driver

    write_lock_fields(tmp_path, lease_seconds=600, version="9.0")
    driver = lock_module.read_lock_holder(OutputLocation(tmp_path))
    assert driver["foreign"] and not driver["stale"]
    assert "the next run refuses it" in _describe_driver(driver)


# -- holding ----------------------------------------------------------------------------------------
def test_the_heartbeat_is_rewritten_and_a_lost_lock_stops_it(tmp_path):
    lock = OutputLock(OutputLocation(tmp_path), heartbeat_every=0.05)
    with lock:
        first = json.loads((tmp_path / LOCK_NAME).read_bytes())["heartbeat"]
        deadline = time.monotonic() + 5
        while json.loads((tmp_path / LOCK_NAME).read_bytes())["heartbeat"] == first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert json.loads((tmp_path / LOCK_NAME).read_bytes())["heartbeat"] > first  # rewritten by the holder (whole seconds)
        lock.check()

        write_lock(tmp_path, host="gpu-node-7", pid=1, heartbeat_age=0, token="the-new-holder")  # taken over meanwhile
        time.sleep(0.3)
        assert lock_token(tmp_path) == "the-new-holder"  # the old holder's heartbeat does not overwrite it
        with pytest.raises(LockLostError, match="lost the output's lock \\(now held by host gpu-node-7, pid 1\\)"):
            lock.check()
    assert lock_token(tmp_path) == "the-new-holder"  # nor does its release delete it


def test_a_driver_that_lost_its_lock_commits_nothing_more(dataset, tmp_path, checker):
    output = tmp_path / "out"
    labels_when_taken_over = []

    class TakenOverMidJob(ScriptedGenerator):
        def generate(self, requests, sampling):
            if len(self.calls) == 2:  # after a unit or so, another driver takes the lock over
                # a shard being written on the finisher thread shows as its temp file (.part-N.parquet.tmp)
                labels_when_taken_over.extend(name for name in os.listdir(output / "labels") if not name.startswith("."))
                write_lock(output, host="gpu-node-7", pid=1, heartbeat_age=0, token="the-new-holder")
            return super().generate(requests, sampling)

    with pytest.raises(LockLostError, match="this driver lost the output's lock .*it stops without writing"):
        run(config(dataset, output), checker, TakenOverMidJob(PROBLEMS))
    # The two units generated before the takeover may still be committing on the finisher thread as
    # it happens (their fencing checks passed first); no unit generated after it is ever written.
    written = sorted(os.listdir(output / "labels"))
    assert set(labels_when_taken_over) <= set(written) <= {"part-00000.parquet", "part-00001.parquet"}
    assert lock_token(output) == "the-new-holder"


# -- in a job -----------------------------------------------------------------------------------------
def test_the_lock_is_released_when_the_job_ends_or_fails(dataset, tmp_path, checker):
    output = tmp_path / "out"
    with pytest.raises(Crash):
        run(config(dataset, output), checker, CrashingGenerator(PROBLEMS, crash_on_call=2))
    assert not (output / LOCK_NAME).exists()
    assert run(config(dataset, output), checker).units_run_now == 3
    assert not (output / LOCK_NAME).exists()


def test_overwrite_is_refused_while_another_driver_holds_the_output_and_wipe_keeps_the_lock(dataset, tmp_path, checker):
    output = tmp_path / "out"
    run(config(dataset, output), checker)
    labels = sorted(os.listdir(output / "labels"))
    with OutputLock(OutputLocation(output)) as holder:
        with pytest.raises(OutputLockedError, match=f"pid {os.getpid()}"):
            run(config(dataset, output), checker, overwrite=True)
        assert sorted(os.listdir(output / "labels")) == labels  # nothing wiped
        ShardStore(output).wipe()
        assert lock_token(output) == holder.holder.token  # --overwrite's wipe removes the job, not the lock
    assert run(config(dataset, output), checker, overwrite=True).units_run_now == 4


def test_a_second_driver_from_the_cli_exits_2_with_one_line_naming_the_holder(dataset, tmp_path, capsys):
    output = tmp_path / "out"
    with OutputLock(OutputLocation(output)):
        code = main(["label", "--input", str(dataset), "--output", str(output), "--quiet"])  # refused before any engine starts
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1
    assert "another driver is labelling this output" in err[0] and f"pid {os.getpid()}" in err[0]


DRIVER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from labeler.checking.checker import AnswerChecker
    from labeler.store.errors import StorageError
    from tests.test_output_lock import PROBLEMS, SlowGenerator, config, run

    dataset, output, ready, go = sys.argv[1:]
    with AnswerChecker(timeout_s=5) as checker:
        Path(ready).touch()
        while not Path(go).exists():
            time.sleep(0.005)
        try:
            run(config(Path(dataset), output), checker, SlowGenerator(PROBLEMS))
        except StorageError as error:
            print(error, file=sys.stderr)
            sys.exit(2)
    """
)


def test_two_drivers_started_together_one_is_refused_and_the_rerun_has_every_solution_once(dataset, tmp_path, checker):
    output, go = tmp_path / "out", tmp_path / "go"
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    drivers = [
        subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(dataset), str(output), str(tmp_path / f"ready-{k}"), str(go)],
            cwd=REPO,
            env=environment,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(2)
    ]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready-{k}").exists() for k in range(2)) and time.monotonic() < deadline:
        time.sleep(0.02)
    go.touch()  # both start labelling at once
    results = [(driver.wait(timeout=120), driver.stderr.read()) for driver in drivers]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    refused = next(err for code, err in results if code == 2)
    assert "another driver is labelling this output (host" in refused

    run(config(dataset, output), checker)  # the rerun
    solutions = pq.read_table(output / "labels").column("solution_id").to_pylist()
    assert len(solutions) == len(set(solutions)) == len(PROBLEMS)
    assert not (output / LOCK_NAME).exists()


# -- object stores ------------------------------------------------------------------------------------
def test_on_s3_the_lock_uses_conditional_writes(s3_endpoint, tmp_path):  # noqa: F811
    location = OutputLocation(f"s3://labels-bucket/{tmp_path.name}-lock")
    with OutputLock(location) as first:
        with pytest.raises(OutputLockedError, match=f"^s3://labels-bucket/{tmp_path.name}-lock/.lock: another driver"):
            OutputLock(location).acquire()
        first.check()
    assert not location.exists(LOCK_NAME)

    stale = LockHolder(token="old", host="gpu-node-7", pid=1, started=iso(3600), heartbeat=iso(600))
    location.write_bytes(LOCK_NAME, stale.to_bytes())
    lock_file = open_lock_file(location, LOCK_NAME)
    _, stale_etag = lock_file.read()
    with OutputLock(location) as taker:
        assert "took over a stale lock" in taker.warnings[0]
        assert lock_file.take_over(b"{}", stale_etag) is None  # If-Match on a copy that is gone: refused
        assert lock_file.delete(stale_etag) is False
        taker.check()
    assert not location.exists(LOCK_NAME)


def test_on_s3_without_boto3_the_lock_is_a_storage_error_naming_it(s3_endpoint, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setitem(sys.modules, "boto3", None)
    with pytest.raises(StorageError, match="conditional create on S3 needs boto3 .*--no-output-lock"):
        OutputLock(OutputLocation(f"s3://labels-bucket/{tmp_path.name}"))


def test_storage_without_an_atomic_create_is_a_storage_error_naming_the_scheme():
    with pytest.raises(StorageError, match="^dir::memory://x/.lock: cannot lock the output: no atomic create is known for dir::memory://"):
        OutputLock(OutputLocation("dir::memory://x"))


def test_in_fsspec_memory_the_lock_refuses_a_second_driver():
    location = OutputLocation("memory://locked-output")
    with OutputLock(location):
        with pytest.raises(OutputLockedError):
            OutputLock(location).acquire()
    assert not location.exists(LOCK_NAME)


class FakeGcsError(Exception):
    def __init__(self, code: int):
        super().__init__(f"HTTP {code}")
        self.code = code


class FakeGcsBucket:
    """What GcsLockFile uses of google.cloud.storage's Bucket and Blob, with their generation preconditions."""

    def __init__(self):
        self.objects: dict[str, tuple[bytes, int]] = {}
        self.generations = 0

    def get_blob(self, key):
        return FakeBlob(self, key, self.objects[key][1]) if key in self.objects else None

    def blob(self, key):
        return FakeBlob(self, key, None)


class FakeBlob:
    def __init__(self, bucket: FakeGcsBucket, key: str, generation):
        self.bucket, self.key, self.generation = bucket, key, generation

    def _check(self, if_generation_match):
        current = self.bucket.objects.get(self.key, (None, 0))[1]
        if if_generation_match != current:
            raise FakeGcsError(412 if current or if_generation_match == 0 else 404)

    def download_as_bytes(self, if_generation_match):
        self._check(if_generation_match)
        return self.bucket.objects[self.key][0]

    def upload_from_string(self, data, if_generation_match):
        self._check(if_generation_match)
        self.bucket.generations += 1
        self.generation = self.bucket.generations
        self.bucket.objects[self.key] = (data, self.generation)

    def delete(self, if_generation_match):
        self._check(if_generation_match)
        del self.bucket.objects[self.key]


def test_on_gcs_the_lock_uses_generation_preconditions():
    bucket = FakeGcsBucket()
    lock_file = GcsLockFile(bucket, "job/.lock", "gs://b/job/.lock")
    location = OutputLocation("memory://gcs-stand-in")  # only for the lock's make_dirs, a no-op off a local disk
    with OutputLock(location, lock_file=lock_file) as first:
        with pytest.raises(OutputLockedError, match="^gs://b/job/.lock: another driver"):
            OutputLock(location, lock_file=lock_file).acquire()
        first.check()
        _, generation = lock_file.read()
        assert lock_file.update(b"{}", generation - 1) is None and lock_file.take_over(b"{}", generation + 1) is None
    assert bucket.objects == {}

    stale = LockHolder(token="old", host="gpu-node-7", pid=1, started=iso(3600), heartbeat=iso(600))
    assert lock_file.create(stale.to_bytes()) is not None and lock_file.create(b"again") is None
    with OutputLock(location, lock_file=lock_file) as taker:
        assert "took over a stale lock" in taker.warnings[0]
        assert LockHolder.parse(lock_file.read()[0]).token == taker.holder.token
    assert bucket.objects == {}


def test_the_version_that_writes_this_lock_format_is_0_2_in_the_package_and_its_metadata():
    """A labeler before 0.2 reads this lock format as unreadable and takes it over (lock.py's docstring): the
    version it records must tell them apart, in labeler.__version__ and pyproject.toml alike."""
    import tomllib

    import labeler

    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]
    assert project["version"] == labeler.__version__
    assert tuple(int(part) for part in labeler.__version__.split(".")[:2]) >= (0, 2)
