"""An answer checker lost mid-job (its pool cannot start or fails its self-test: CheckerUnavailable) is the
machine's failure, not the rows': the job stops with the cause, the units committed before are kept, the unit it
was checking stays uncommitted and nothing goes to rejected/; a plain rerun labels every row once, none rejected.
In this process and on Ray workers, with the real checker (labeler/checking) raising after its first check."""

from functools import partial
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from labeler.checking import AnswerChecker, CheckerUnavailable
from labeler.labeling.config import LabelConfig
from labeler.labeling.job import run_job
from labeler.store.status import job_status
from tests.conftest import write_take_one_rows
from tests.fakes import ScriptedGenerator
from workers.local_executor import LocalExecutor

PROBLEMS = {f"What is {i} minus 1?": str(i - 1) for i in range(2, 14)}  # 12 rows: 3 units of 4


class LostAfterFirstCheck(AnswerChecker):
    """The real checker, whose worker pool is lost after its first check_many (as one that fails its self-test)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.checks = 0

    def check_many(self, pairs, questions=None):
        self.checks += 1
        if self.checks > 1:
            raise CheckerUnavailable("answer checker: the symbolic worker pool failed its self-test (2 vs 3: timeout, not incorrect)")
        return super().check_many(pairs, questions)


@pytest.fixture
def dataset(tmp_path) -> Path:
    return write_take_one_rows(tmp_path / "in.jsonl", PROBLEMS)


def config(dataset: Path, out: Path) -> LabelConfig:
    return LabelConfig(input=str(dataset), output=str(out), model="scripted", rollouts=4, shard_size=4, seed=5)


def label_locally(dataset: Path, out: Path, checker):
    executor = LocalExecutor(partial(ScriptedGenerator, PROBLEMS), checker, max_unit_retries=2)
    return run_job(config(dataset, out), executor=executor, model_info={"name": "scripted"}, progress_enabled=True)


def rows_of(out: Path, directory: str) -> list[dict]:
    folder = out / directory
    return pq.read_table(folder).sort_by("solution_id").to_pylist() if directory == "labels" else pq.read_table(folder).to_pylist()


def assert_a_plain_rerun_labels_every_row_once(out: Path, clean: Path, committed_before: int) -> None:
    with AnswerChecker(timeout_s=5) as healthy:
        rerun = label_locally(out.parent / "in.jsonl", out, healthy)
    assert rerun.units_run_now == 3 - committed_before and rerun.rejected_rows == 0 and rerun.solutions == len(PROBLEMS)
    labels = rows_of(out, "labels")
    assert sorted(row["problem_id"] for row in labels) == sorted(f"q{k}" for k in range(len(PROBLEMS)))  # each row once
    assert labels == rows_of(clean, "labels")
    assert rows_of(out, "rejected") == []


def test_a_checker_lost_mid_job_stops_it_and_a_plain_rerun_labels_every_row_once(dataset, tmp_path, capfd):
    clean = tmp_path / "clean"
    with AnswerChecker(timeout_s=5) as healthy:
        label_locally(dataset, clean, healthy)
    out = tmp_path / "out"
    with LostAfterFirstCheck(timeout_s=5) as lost, pytest.raises(CheckerUnavailable, match="self-test"):
        label_locally(dataset, out, lost)
    err = capfd.readouterr().err
    assert "rejected/" not in err and "retrying" not in err and "halves" not in err  # not taken for a poison row
    status = job_status(str(out))
    assert status["units_committed"] == 1 and status["units_failed"] == 0  # the first unit kept, the lost one not committed
    assert rows_of(out, "rejected") == []  # nothing written off
    assert_a_plain_rerun_labels_every_row_once(out, clean, committed_before=1)


def test_a_checker_lost_on_a_ray_worker_stops_the_job_and_a_plain_rerun_labels_every_row_once(dataset, tmp_path, local_ray):
    from workers.ray_executor import ClusterSettings, RayExecutor

    clean = tmp_path / "clean"
    with AnswerChecker(timeout_s=5) as healthy:
        label_locally(dataset, clean, healthy)
    out = tmp_path / "out"
    executor = RayExecutor(
        ClusterSettings(workers=1), partial(ScriptedGenerator, PROBLEMS), partial(LostAfterFirstCheck, timeout_s=5), max_unit_retries=2
    )
    with pytest.raises(CheckerUnavailable, match="self-test"):
        run_job(config(dataset, out), executor=executor, model_info={"name": "scripted"}, progress_enabled=True)
    status = job_status(str(out))
    assert status["units_failed"] == 0 and status["units_committed"] <= 1
    assert rows_of(out, "rejected") == []
    assert_a_plain_rerun_labels_every_row_once(out, clean, committed_before=status["units_committed"])


def test_the_health_probe_asks_the_pool_even_of_a_checker_that_answered_it_before():
    """A checker caches every verdict its symbolic pool gave, so easy answers it has checked before come back at once
    however its pool hangs now: the probe asks the pool a pair it has never seen, and a hung pool is found sick."""
    from labeler.checking import Verdict
    from labeler.labeling.checker_watch import CheckerSickError, CheckerUnhealthyError, unhealthy_error

    with AnswerChecker(timeout_s=5) as checker:
        assert type(unhealthy_error("many timeouts", checker)) is CheckerUnhealthyError  # a healthy pool answers
        checker._run_symbolic = lambda tasks, **kwargs: [Verdict.TIMEOUT] * len(tasks)  # the pool hangs from now on
        error = unhealthy_error("many timeouts", checker)
    assert isinstance(error, CheckerSickError) and isinstance(error, CheckerUnavailable) and "easy answers" in str(error)


def test_an_easy_answer_that_times_out_once_is_asked_again_before_the_checker_is_called_sick():
    from labeler.checking import Verdict
    from labeler.labeling.checker_watch import CheckerUnhealthyError, unhealthy_error

    with AnswerChecker(timeout_s=5) as checker:
        run, slow = checker._run_symbolic, [True]

        def slow_once(tasks, **kwargs):  # the pool is slow once (a busy machine), then answers
            if slow.pop() if slow else False:
                return [Verdict.TIMEOUT] * len(tasks)
            return run(tasks, **kwargs)

        checker._run_symbolic = slow_once
        assert type(unhealthy_error("many timeouts", checker)) is CheckerUnhealthyError
