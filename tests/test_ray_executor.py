"""The Ray executor on a local Ray instance with test-double generators (no engine): retries,
units that keep failing, labels equal to the single-process run's, and the checker processes the
workers on one machine start."""

import json
import os
import re
import time
from functools import partial
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from labeler.checking.checker import AnswerChecker
from labeler.cli import main
from labeler.labeling.config import LabelConfig
from labeler.labeling.job import run_job
from workers.local_executor import LocalExecutor
from tests.conftest import write_jsonl
from labeler.store.manifest import EngineChangeError
from tests.fakes import Crash, CrashingGenerator, ScriptedGenerator
from labeler.labeling import unit_failures
from labeler.labeling.unit_failures import WorkersKeepDyingError
from workers import ray_executor
from workers.ray_executor import ClusterSettings, NoWorkerError, RayExecutor

ray = pytest.importorskip("ray")

PROBLEMS = {f"What is {i} times 3?": str(3 * i) for i in range(1, 13)}
DOOMED = "What is 5 times 3?"  # its unit fails on every worker


class DiesOnceGenerator(ScriptedGenerator):
    """Kills its whole worker process the first time it sees `problem` (a marker file remembers it)."""

    def __init__(self, answers, problem: str, marker: str):
        super().__init__(answers)
        self.problem, self.marker = problem, marker

    def generate(self, requests, sampling):
        if any(r.user_message.startswith(self.problem) for r in requests) and not os.path.exists(self.marker):
            Path(self.marker).touch()
            os._exit(1)
        return super().generate(requests, sampling)


class AlwaysFailsGenerator(ScriptedGenerator):
    def generate(self, requests, sampling):
        if any(r.user_message.startswith(DOOMED) for r in requests):
            raise RuntimeError("engine exploded on this unit")
        return super().generate(requests, sampling)


class RecordingChecker(AnswerChecker):
    """An answer checker that leaves the size of its pool in `directory`, one file per worker process."""

    def __init__(self, directory: str, **kwargs):
        super().__init__(**kwargs)
        Path(directory, str(os.getpid())).write_text(str(self.workers))


class WorkerEngine(ScriptedGenerator):
    """A bfloat16 engine that names the process it was built in."""

    dtype = "bfloat16"

    def describe(self) -> dict:
        return {**super().describe(), "pid": os.getpid()}


class BrokenEngine:
    def __init__(self):
        raise OSError("no such model: /nowhere")


class SlowGenerator(ScriptedGenerator):
    """A fifth of a second per generate call, so that units are in flight when the test acts."""

    def generate(self, requests, sampling):
        time.sleep(0.2)
        return super().generate(requests, sampling)


class EngineThatNeverLoads:
    def __init__(self):
        time.sleep(3600)


pytestmark = pytest.mark.usefixtures("local_ray")  # one local Ray for the module (tests/conftest.py)


@pytest.fixture
def dataset(tmp_path) -> Path:
    rows = [
        {"id": f"q{k}", "problem": problem, "answer": answer, "steps": [f"Multiply {k + 1} by 3.", f"The answer is: {answer}"]}
        for k, (problem, answer) in enumerate(PROBLEMS.items())
    ]
    return write_jsonl(tmp_path / "in.jsonl", rows)


def label(dataset: Path, out: Path, executor=None, retry_rejected: bool = False):
    config = LabelConfig(input=str(dataset), output=str(out), model="scripted", rollouts=4, shard_size=2, seed=3)
    with AnswerChecker(timeout_s=5) as checker:
        executor = executor or LocalExecutor(partial(ScriptedGenerator, PROBLEMS), checker)
        return run_job(config, executor=executor, model_info={"name": "scripted"}, progress_enabled=True, retry_rejected=retry_rejected)


def on_ray(generator_factory, max_unit_retries=2, workers=2) -> RayExecutor:
    return RayExecutor(
        ClusterSettings(workers=workers), generator_factory, partial(AnswerChecker, timeout_s=5), max_unit_retries=max_unit_retries
    )


def sorted_labels_of_one_process(dataset: Path, out: Path) -> list[dict]:
    label(dataset, out)
    return sorted_labels(out)


def sorted_labels(out: Path) -> list[dict]:
    return pq.read_table(out / "labels").sort_by("solution_id").to_pylist()


def test_a_worker_that_dies_has_its_unit_requeued_without_spending_its_retries_and_labels_match_one_process(dataset, tmp_path, capfd):
    label(dataset, tmp_path / "single")
    marker = str(tmp_path / "died-once")
    dies_once = partial(DiesOnceGenerator, PROBLEMS, "What is 7 times 3?", marker)
    summary = label(dataset, tmp_path / "ray", on_ray(dies_once, max_unit_retries=0))
    assert os.path.exists(marker), "the worker was meant to die"
    err = capfd.readouterr().err
    assert "goes back to the queue" in err and "not counted against --max-unit-retries" in err and "retrying" not in err
    assert summary.solutions == len(PROBLEMS) and summary.units_run_now == 6
    assert sorted_labels(tmp_path / "ray") == sorted_labels(tmp_path / "single")  # ids, counts, labels, provenance


def test_a_unit_that_keeps_failing_is_bisected_its_failing_row_rejected_and_the_job_finishes(dataset, tmp_path):
    out = tmp_path / "out"
    summary = label(dataset, out, on_ray(partial(AlwaysFailsGenerator, PROBLEMS), max_unit_retries=1))
    labels = pq.read_table(out / "labels").to_pylist()
    assert len(labels) == len(PROBLEMS) - 1  # the doomed unit held two rows: its other row is labelled
    one_process = sorted_labels_of_one_process(dataset, tmp_path / "one")
    assert sorted_labels(out) == [row for row in one_process if row["problem_id"] != "q4"]  # same seeds, same labels
    rejected = pq.read_table(out / "rejected").to_pylist()
    assert [r["problem_id"] for r in rejected] == ["q4"]
    assert all(r["stage"] == "generation" and "engine exploded" in r["reason"] and "2 times" in r["reason"] for r in rejected)
    assert summary.rejected_rows == 1 and summary.units_total == 6
    rerun = label(dataset, out, on_ray(partial(AlwaysFailsGenerator, PROBLEMS)))
    assert rerun.units_run_now == 0  # a rejected unit is committed: a plain rerun does not try it again
    retried = label(dataset, out, on_ray(partial(ScriptedGenerator, PROBLEMS)), retry_rejected=True)
    assert retried.units_run_now == 1 and retried.rejected_rows == 0 and retried.solutions == len(PROBLEMS)
    assert sorted_labels(out) == sorted_labels_of_one_process(dataset, tmp_path / "single")
    assert not pq.read_table(out / "rejected").num_rows  # the failed unit's rejected rows went with it


def test_engine_records_come_from_the_workers_and_are_checked_before_they_label(dataset, tmp_path):
    label(dataset, tmp_path / "ray", on_ray(partial(WorkerEngine, PROBLEMS), workers=1))
    manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    record = manifest["engine_records"][manifest["engine_record"]]
    assert record["pid"] != os.getpid() and record["dtype"] == "bfloat16"  # built in the worker, not the driver
    assert {unit["engine_record"] for unit in manifest["units"]} == {manifest["engine_record"]}

    out = tmp_path / "resumed"
    with AnswerChecker(timeout_s=5) as checker, pytest.raises(Crash):
        label(dataset, out, LocalExecutor(partial(CrashingGenerator, PROBLEMS, crash_on_call=3), checker))
    with pytest.raises(EngineChangeError, match='dtype: "float32" -> "bfloat16"'):
        label(dataset, out, on_ray(partial(WorkerEngine, PROBLEMS), workers=1))
    assert json.loads((out / "manifest.json").read_text())["totals"]["units_committed"] == 2


def test_workers_that_cannot_start_stop_the_job(dataset, tmp_path):
    with pytest.raises(NoWorkerError, match="no such model"):
        label(dataset, tmp_path / "out", on_ray(BrokenEngine))


def test_the_units_of_workers_on_a_node_declared_dead_go_back_to_the_queue(dataset, tmp_path, monkeypatch, capfd):
    """The driver's watch of the nodes, on its own: after the first commit, the driver is told (by a
    stand-in for ray.nodes) that the node is dead, while its workers go on as in a network partition.
    Their units in flight are requeued at once, their late results ignored, the log says so; the
    output is that of one process."""
    monkeypatch.setattr(ray_executor, "POLL_S", 0.05)
    out = tmp_path / "ray"
    real_nodes = ray.nodes

    def nodes():
        found = real_nodes()
        if not _committed_a_unit(out):
            return found
        return [{**node, "Alive": False, "DeathReasonMessage": "health check failed (a stand-in)"} for node in found]

    monkeypatch.setattr(ray_executor.ray, "nodes", nodes)
    summary = label(dataset, out, on_ray(partial(SlowGenerator, PROBLEMS)))
    err = capfd.readouterr().err
    assert re.search(r"node \w{8} \(\S+\) lost \(health check failed \(a stand-in\)\); its workers prm-labeler-worker-\d, prm-labeler-worker-\d with it, units [\d, ]+ go back to the queue", err), err
    assert "goes back to the queue: node" in err and "retrying" not in err  # a lost node spends no unit's retries
    assert summary.solutions == len(PROBLEMS) and summary.units_run_now == 6
    assert sorted_labels(out) == sorted_labels_of_one_process(dataset, tmp_path / "single")


class KillsItsWorker(ScriptedGenerator):
    def generate(self, requests, sampling):
        if any(r.user_message.startswith(DOOMED) for r in requests):
            os._exit(1)
        return super().generate(requests, sampling)


class KillsEveryWorker(ScriptedGenerator):
    def generate(self, requests, sampling):
        os._exit(1)


def test_workers_that_die_under_every_unit_stop_the_job_past_the_bound_and_reject_nothing(dataset, tmp_path, monkeypatch):
    """Losses spend no retries, so they have a bound of their own: a sick cluster cannot loop forever."""
    monkeypatch.setattr(unit_failures, "LOSSES_PER_UNIT", 2)
    out = tmp_path / "out"
    with pytest.raises(WorkersKeepDyingError, match=r"worker under unit [01] was lost 3 times.*no unit of this run was labelled") as error:
        label(dataset, out, on_ray(partial(KillsEveryWorker, PROBLEMS), workers=1))
    assert "--shard-size" not in str(error.value)  # a resume with another shard size is refused
    assert not (out / "rejected").exists() or not [p for p in (out / "rejected").glob("part-*")]


# make faults, not make test: bisection on Ray is the test of a unit that keeps failing, losses and their bound
# the two tests above, bisection down to a row tests/test_unit_failures.py's (the same UnitFailures).
@pytest.mark.slow
def test_a_row_that_kills_its_worker_is_found_by_bisection_and_rejected_alone(dataset, tmp_path, monkeypatch, capfd):
    """Unit 2's row 4 kills every worker that labels it while the other units are labelled: past its losses
    the unit is bisected, its pieces get a small loss bound of their own, and only row 4 is rejected, with
    the reason (it stopped the job on every rerun)."""
    monkeypatch.setattr(unit_failures, "LOSSES_PER_UNIT", 2)
    out = tmp_path / "out"
    summary = label(dataset, out, on_ray(partial(KillsItsWorker, PROBLEMS), workers=1))
    assert summary.solutions == len(PROBLEMS) - 1 and summary.rejected_rows == 1
    [rejected] = pq.read_table(out / "rejected").to_pylist()
    assert rejected["problem_id"] == "q4" and "lost" in rejected["reason"]
    assert "labelled in two halves" in capfd.readouterr().err


def _committed_a_unit(out: Path) -> bool:
    """A commit record in commits/, or one folded into manifest.json already."""
    if (out / "commits").is_dir() and any((out / "commits").iterdir()):
        return True
    try:
        return json.loads((out / "manifest.json").read_text())["totals"]["units_committed"] > 0
    except (OSError, ValueError, KeyError):
        return False


@pytest.mark.parametrize(
    ("engine", "gpus", "why"),
    [
        (EngineThatNeverLoads, 0, "or its engine did not finish loading (1 CPU, 0 GPU each"),
        (partial(ScriptedGenerator, PROBLEMS), 1, "no node of the cluster can hold one (1 CPU, 1 GPU each"),
    ],
)
def test_a_job_whose_workers_never_start_stops_at_the_start_timeout(dataset, tmp_path, monkeypatch, capfd, engine, gpus, why):
    """An engine that hangs while it loads, or a worker that needs a GPU this CPU-only Ray does not
    have: the job stops after --worker-start-timeout, saying why, instead of waiting forever."""
    monkeypatch.setattr(ray_executor, "POLL_S", 0.2)
    settings = ClusterSettings(workers=1, gpus_per_worker=gpus, worker_start_timeout=2)
    started = time.monotonic()
    with pytest.raises(NoWorkerError, match="did not start within 2 s") as error:
        label(dataset, tmp_path / "out", RayExecutor(settings, engine, partial(AnswerChecker, timeout_s=5)))
    assert why in str(error.value) and "CPUs free" in str(error.value)
    assert time.monotonic() - started < 30
    assert "gave up on a worker" in capfd.readouterr().err


@pytest.mark.parametrize(("workers", "budget", "each"), [(3, None, 1), (2, 5, 2)])
def test_the_checker_processes_of_the_workers_on_a_machine_stay_within_its_budget(dataset, tmp_path, capfd, workers, budget, each):
    # The local Ray node has 2 CPUs: the default budget, and room for two workers only.
    sizes = tmp_path / "checkers"
    sizes.mkdir()
    settings = ClusterSettings(workers=workers, checker_processes=budget)
    executor = RayExecutor(settings, partial(ScriptedGenerator, PROBLEMS), partial(RecordingChecker, str(sizes), timeout_s=5))
    assert label(dataset, tmp_path / "out", executor).units_run_now == 6
    pools = [int(path.read_text()) for path in sizes.iterdir()]
    assert pools and all(pool == each for pool in pools)
    assert sum(pools) <= (budget or 2)
    assert f"{each} checker process" in capfd.readouterr().err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--ray-address", "auto"], "need --workers"),
        (["--checker-processes", "2"], "need --workers"),
        (["--workers", "2", "--checker-processes", "0"], "--checker-processes must be >= 1"),
        (["--workers", "0"], "--workers must be >= 1"),
        (["--workers", "2", "--max-unit-retries", "-1"], "retries"),
    ],
)
def test_cluster_flags_are_checked_before_anything_starts(flags, message, tmp_path, capsys):
    assert main(["label", "--output", str(tmp_path / "out"), "--quiet", *flags]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_on_ray_workers_the_judgments_equal_one_process(tmp_path):
    """`labeler judge`'s units on Ray workers (the scripted judge model in each): the judgments of one process."""
    from labeler.judging.config import JudgeConfig
    from labeler.judging.job import run_judge
    from tests.fakes import ScriptedJudge
    from tests.test_judge import ROWS, judge, problem

    def script(text, seed):
        return f"\\boxed{{{seed % 3 - 1}}}"

    rows = [{"id": f"r{i}", "problem": problem(i), "steps": [f"Tom starts with {i}.", f"He buys 3: {i} + 3 = {i + 3}.", f"The answer is: {i + 3}"]}
            for i in range(ROWS)]  # fmt: skip
    dataset = write_jsonl(tmp_path / "in.jsonl", rows)
    judge(dataset, tmp_path / "single", script, votes=3)
    config = JudgeConfig(input=str(dataset), output=str(tmp_path / "ray"), model="scripted-judge", shard_size=2, votes=3)
    executor = RayExecutor(ClusterSettings(workers=2), partial(ScriptedJudge, script), None)
    summary = run_judge(config, executor=executor, model_info={"name": "scripted"}, progress_enabled=False)
    assert summary.solutions == ROWS
    single = pq.read_table(tmp_path / "single" / "judgments").sort_by("solution_id").to_pylist()
    assert pq.read_table(tmp_path / "ray" / "judgments").sort_by("solution_id").to_pylist() == single
