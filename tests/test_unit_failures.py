"""Units that fail in this process (poison units, a checker that raises, an engine that dies) and the
progress line: on the test-double generator, plus a real child process standing in for an engine's."""

import json
import subprocess
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from labeler.checking.checker import AnswerChecker
from labeler.labeling.config import LabelConfig
from labeler.labeling.generation import EngineDiedError
from labeler.labeling.job import run_job
from labeler.labeling.unit_failures import EngineKeepsDyingError, UnitsKeepFailingError
from labeler.store.progress import ProgressReporter
from labeler.store.status import format_status, job_status
from tests.conftest import write_jsonl, write_take_one_rows
from tests.fakes import Crash, CrashingGenerator, ScriptedGenerator
from workers.engine_watch import EngineWatch
from workers.local_executor import LocalExecutor

PROBLEMS = {f"What is {i} minus 1?": str(i - 1) for i in range(2, 14)}
POISON = "What is 6 minus 1?"  # row 4: its unit (rows 4 and 5, shard size 2) breaks the engine


@pytest.fixture(scope="module")
def checker():
    with AnswerChecker(timeout_s=5) as checker:
        yield checker


@pytest.fixture
def dataset(tmp_path) -> Path:
    return write_take_one_rows(tmp_path / "in.jsonl", PROBLEMS)


def label(dataset: Path, out: Path, checker, factory, retries: int = 2, shard_size: int = 2, rollouts: int = 4, **kwargs):
    config = LabelConfig(input=str(dataset), output=str(out), model="scripted", rollouts=rollouts, shard_size=shard_size, seed=5)
    executor = LocalExecutor(factory, checker, max_unit_retries=retries)
    return run_job(config, executor=executor, model_info={"name": "scripted"}, progress_enabled=True, **kwargs)


def labels_of(out: Path) -> list[dict]:
    return pq.read_table(out / "labels").sort_by("solution_id").to_pylist()


class PoisonedGenerator(ScriptedGenerator):
    """Raises on every request of the `poisoned` problems, like rows that break the engine each time."""

    def __init__(self, answers, poisoned: tuple[str, ...] = (POISON,)):
        super().__init__(answers)
        self.poisoned = poisoned

    def generate(self, requests, sampling):
        if any(r.user_message.startswith(problem) for r in requests for problem in self.poisoned):
            raise ValueError("the tokenizer choked on this row")
        return super().generate(requests, sampling)


def test_a_poison_row_is_found_by_bisection_only_it_is_rejected_and_retry_rejected_labels_it_later(dataset, tmp_path, checker, capfd):
    """Unit 0 holds rows 0-7, row 4 breaks the engine: past its retries the unit is bisected, its
    seven good rows get the labels of a run without the poison, and only row 4 goes to rejected/."""
    clean = tmp_path / "clean"
    label(dataset, clean, checker, lambda: ScriptedGenerator(PROBLEMS), shard_size=8)
    out = tmp_path / "out"
    summary = label(dataset, out, checker, lambda: PoisonedGenerator(PROBLEMS), retries=1, shard_size=8)
    err = capfd.readouterr().err
    assert "retrying (1/1)" in err and "labelled in two halves" in err and "row 4 (q4) of unit 0 failed alone" in err
    assert summary.solutions == len(PROBLEMS) - 1 and summary.rejected_rows == 1 and summary.units_run_now == 2
    rejected = pq.read_table(out / "rejected").to_pylist()
    assert [r["problem_id"] for r in rejected] == ["q4"]
    assert all(r["stage"] == "generation" and "choked" in r["reason"] and "2 times" in r["reason"] for r in rejected)
    assert labels_of(out) == [row for row in labels_of(clean) if row["problem_id"] != "q4"]  # same seeds, same labels
    manifest = json.loads((out / "manifest.json").read_text())
    [failed] = [unit for unit in manifest["units"] if unit["stats"].get("failure")]
    assert failed["index"] == 0 and failed["stats"]["attempts"] == 2 and failed["stats"]["rejected"] == 1
    assert failed["stats"]["solutions"] == 7 and "1 of its 8 rows failed alone" in failed["stats"]["failure"]
    assert manifest["totals"]["solutions"] == len(PROBLEMS) - 1
    assert job_status(str(out))["units_failed"] == 1

    assert label(dataset, out, checker, lambda: ScriptedGenerator(PROBLEMS), shard_size=8).units_run_now == 0  # a plain rerun keeps it
    retried = label(dataset, out, checker, lambda: ScriptedGenerator(PROBLEMS), retry_rejected=True, shard_size=8)
    assert retried.units_run_now == 1 and retried.rejected_rows == 0
    assert "1 units that failed in an earlier run are labelled again" in capfd.readouterr().err
    assert labels_of(out) == labels_of(clean)  # every solution once, as an uninterrupted clean run labels it
    assert pq.read_table(out / "rejected").num_rows == 0


def test_a_unit_of_poison_rows_has_every_row_rejected_once(dataset, tmp_path, checker):
    class AllPoisoned(ScriptedGenerator):
        def generate(self, requests, sampling):
            if any(r.user_message.startswith(problem) for r in requests for problem in list(PROBLEMS)[4:8]):
                raise ValueError("the tokenizer choked on this row")
            return super().generate(requests, sampling)

    out = tmp_path / "out"
    summary = label(dataset, out, checker, lambda: AllPoisoned(PROBLEMS), retries=0, shard_size=4)
    assert summary.solutions == len(PROBLEMS) - 4 and summary.rejected_rows == 4
    assert sorted(r["problem_id"] for r in pq.read_table(out / "rejected").to_pylist()) == ["q4", "q5", "q6", "q7"]


class TimingOutChecker:
    """A checker double that times out on every pair, as a checker gone sick does."""

    def check_many(self, pairs, questions=None):
        from labeler.checking import CheckResult, Verdict

        return [CheckResult(Verdict.TIMEOUT, None) for _ in pairs]


def test_a_checker_sick_from_the_start_stops_the_job_writes_off_no_row_and_a_plain_rerun_labels_every_row(
    dataset, tmp_path, checker, capfd
):  # fmt: skip
    """Every check times out, easy ones too: the machine's failure, not the rows'. The job stops at the first unit
    with the cause (a CheckerUnavailable, as the CLI says: rerun to resume), commits nothing, rejects nothing, and
    spends no retries regenerating units a sick checker cannot check."""
    from labeler.checking import CheckerUnavailable

    clean = tmp_path / "clean"
    label(dataset, clean, checker, lambda: ScriptedGenerator(PROBLEMS), shard_size=4)
    out = tmp_path / "out"
    generators = []

    def counted():
        generators.append(ScriptedGenerator(PROBLEMS))
        return generators[-1]

    with pytest.raises(CheckerUnavailable, match="the checker is sick"):
        label(dataset, out, TimingOutChecker(), counted, shard_size=4)
    assert sum(len(generator.calls) for generator in generators) <= 2  # the first unit (and the next, generated meanwhile)
    status = job_status(str(out))
    assert status["units_committed"] == 0 and status["units_failed"] == 0
    assert not (out / "rejected").exists() or pq.read_table(out / "rejected").num_rows == 0
    capfd.readouterr()

    rerun = label(dataset, out, checker, lambda: ScriptedGenerator(PROBLEMS), shard_size=4)  # no --retry-rejected
    assert rerun.units_run_now == 3 and rerun.rejected_rows == 0
    assert labels_of(out) == labels_of(clean)


class RaisingChecker:
    """Delegates to a real checker but raises on the answers of one problem (a checker bug one input triggers)."""

    def __init__(self, inner, fail_times: int):
        self.inner, self.left = inner, fail_times
        self.lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def check_many(self, pairs, questions=None):
        pairs = list(pairs)
        with self.lock:
            if self.left and any(reference == "5" for _, reference in pairs):
                self.left -= 1
                raise RuntimeError("sympy recursion on this answer")
        return self.inner.check_many(pairs, questions)


def test_a_unit_whose_checking_fails_is_generated_again(dataset, tmp_path, checker, capfd):
    config = LabelConfig(input=str(dataset), output=str(tmp_path / "out"), model="scripted", rollouts=4, shard_size=2, seed=5)
    executor = LocalExecutor(lambda: ScriptedGenerator(PROBLEMS), RaisingChecker(checker, fail_times=1))
    summary = run_job(config, executor=executor, model_info={"name": "scripted"}, progress_enabled=True)
    assert "sympy recursion" in capfd.readouterr().err
    assert summary.solutions == len(PROBLEMS) and summary.rejected_rows == 0


def test_a_run_whose_every_unit_fails_stops_instead_of_rejecting_the_input(dataset, tmp_path, checker):
    class Broken(ScriptedGenerator):
        def generate(self, requests, sampling):
            raise RuntimeError("CUDA error: an illegal memory access")

    with pytest.raises(UnitsKeepFailingError, match="illegal memory access"):
        label(dataset, tmp_path / "out", checker, lambda: Broken(PROBLEMS), retries=0)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["totals"]["units_committed"] == 0  # the first three given up, their halves failed too: none written off


def test_a_kill_is_not_retried(dataset, tmp_path, checker):
    with pytest.raises(Crash):  # KeyboardInterrupt, SystemExit: the job stops, a rerun resumes
        label(dataset, tmp_path / "out", checker, lambda: CrashingGenerator(PROBLEMS, crash_on_call=3))


class ChildProcessEngine(ScriptedGenerator):
    """A test double whose "engine" is a real child process, watched like vLLM's engine core: the
    first generate call that `dies` lists kills that process and then waits forever, as vLLM did."""

    def __init__(self, answers, die_on_problem: str, deaths: list):
        super().__init__(answers)
        self.process, self.watch = EngineWatch.start(lambda: subprocess.Popen(["sleep", "600"]))
        self.die_on_problem, self.deaths = die_on_problem, deaths

    def generate(self, requests, sampling):
        return self.watch.call(self._generate, requests, sampling)

    def _generate(self, requests, sampling):
        if any(r.user_message.startswith(self.die_on_problem) for r in requests) and self.deaths:
            self.deaths.pop()
            self.process.kill()
            threading.Event().wait()  # never woken, like vLLM waiting on a dead engine core
        return super().generate(requests, sampling)

    def close(self):
        self.process.kill()
        self.process.wait()


def test_an_engine_whose_process_dies_is_noticed_replaced_and_its_unit_retried(dataset, tmp_path, checker, capfd):
    clean = tmp_path / "clean"
    label(dataset, clean, checker, lambda: ScriptedGenerator(PROBLEMS))
    deaths = ["once"]
    started = time.monotonic()
    summary = label(dataset, tmp_path / "out", checker, lambda: ChildProcessEngine(PROBLEMS, POISON, deaths))
    assert time.monotonic() - started < 30  # noticed within a second or so, not a hang
    assert not deaths and "the engine died during unit 2" in capfd.readouterr().err
    assert summary.solutions == len(PROBLEMS) and summary.rejected_rows == 0
    assert labels_of(tmp_path / "out") == labels_of(clean)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert len(manifest["engine_records"]) == 1  # the new engine resolved the same settings


def test_an_engine_that_keeps_dying_stops_the_job_with_the_cause(dataset, tmp_path, checker):
    with pytest.raises(EngineKeepsDyingError, match="engine died 2 times on unit 2.*exited"):
        label(dataset, tmp_path / "out", checker, lambda: ChildProcessEngine(PROBLEMS, POISON, ["a", "b", "c"]), retries=1)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["totals"]["units_committed"] == 2  # the units before it stay committed; its rows are not written off


def test_engine_watch_passes_results_and_errors_through(tmp_path):
    process, watch = EngineWatch.start(lambda: subprocess.Popen(["sleep", "600"]))
    try:
        assert watch.call(lambda x: x + 1, 1) == 2
        with pytest.raises(KeyError):
            watch.call(lambda: {}["missing"])
        process.kill()
        process.wait()
        with pytest.raises(EngineDiedError, match=f"engine process {process.pid}"):
            watch.call(lambda: 1)
    finally:
        process.kill()


class WaitsForCommit(ScriptedGenerator):
    """Each generate call of unit k+1 waits (up to 10 s) for unit k's labels shard: finished units
    must be committed while the next one generates, not after it."""

    def __init__(self, answers, shards: Path):
        super().__init__(answers)
        self.shards, self.units_seen, self.late = shards, [], []

    def generate(self, requests, sampling):
        problem = requests[0].user_message  # the first problem of the unit: one generate call per unit
        if problem not in self.units_seen:
            self.units_seen.append(problem)
        expected = len(self.units_seen) - 1
        deadline = time.monotonic() + 10
        while len(list(self.shards.glob("*.parquet"))) < expected:
            if time.monotonic() > deadline:
                self.late.append(expected)
                break
            time.sleep(0.01)
        return super().generate(requests, sampling)


def test_a_finished_unit_is_committed_while_the_next_generates(dataset, tmp_path, checker):
    out = tmp_path / "out"
    generator = WaitsForCommit(PROBLEMS, out / "labels")
    label(dataset, out, checker, lambda: generator)
    assert len(generator.units_seen) == 6 and generator.late == []


def test_progress_counts_the_whole_job_after_a_resume(dataset, tmp_path, checker):
    out = tmp_path / "out"
    with pytest.raises(Crash):
        label(dataset, out, checker, lambda: CrashingGenerator(PROBLEMS, crash_on_call=5))
    manifest = json.loads((out / "manifest.json").read_text())
    before = manifest["totals"]
    assert 0 < before["units_committed"] < 6
    lines: list[str] = []

    class Recording(ProgressReporter):
        def log(self, message):
            lines.append(message)

    import labeler.labeling.job as job

    original, job.ProgressReporter = job.ProgressReporter, Recording
    try:
        label(dataset, out, checker, lambda: ScriptedGenerator(PROBLEMS))
    finally:
        job.ProgressReporter = original
    progress = [line for line in lines if line.startswith("units ")]
    first = progress[0]
    assert first.startswith(f"units {before['units_committed'] + 1}/6 | solutions {2 * (before['units_committed'] + 1)}/12")
    rollouts_after_first = int(first.split("rollouts ")[1].split()[0])
    assert rollouts_after_first > before["rollouts"]  # the earlier run's rollouts are counted
    final = json.loads((out / "manifest.json").read_text())["totals"]
    assert progress[-1].startswith("units 6/6 | solutions 12/12") and f"rollouts {final['rollouts']} " in progress[-1]
    assert f"tokens {final['generated_tokens']} " in progress[-1]


SLOW_PROBLEMS = {f"What is {i} minus 1?": str(i - 1) for i in range(2, 10)}


def slow_dataset(tmp_path, slow: set[int]) -> Path:
    """Rows whose first step holds the SlowChecker's marker (for the rows in `slow`) time out on every check."""
    rows = [
        {"id": f"q{k}", "problem": p, "answer": a,
         "steps": [f"Take 1 from {k + 2}." + (" SLOW!" if k in slow else ""), "Then more.", f"The answer is: {a}"]}
        for k, (p, a) in enumerate(SLOW_PROBLEMS.items())
    ]  # fmt: skip
    return write_jsonl(tmp_path / f"slow-{sorted(slow)}.jsonl", rows)


def label_slow(dataset: Path, out: Path, checker, retries: int = 1):
    config = LabelConfig(input=str(dataset), output=str(out), model="scripted", rollouts=8, shard_size=4, seed=5)
    executor = LocalExecutor(lambda: ScriptedGenerator(SLOW_PROBLEMS), checker, max_unit_retries=retries)
    return run_job(config, executor=executor, model_info={"name": "scripted"}, progress_enabled=True)


def test_a_row_whose_answers_always_time_out_is_found_by_bisection_and_rejected_alone(tmp_path, checker, capfd):
    """Row 1's checks all time out: its unit is unhealthy as a whole, so it is retried, then bisected; row 1
    alone is unhealthy and goes to rejected/ with the reason, its unit's three other rows are labelled, and
    a plain rerun has nothing left to do (it was sent back on every run)."""
    from tests.fakes import SlowChecker

    clean = label_slow(slow_dataset(tmp_path, set()), tmp_path / "clean", checker)
    assert clean.rejected_rows == 0
    out = tmp_path / "out"
    summary = label_slow(slow_dataset(tmp_path, {1}), out, SlowChecker(checker))
    assert "labelled in two halves" in capfd.readouterr().err
    assert summary.rejected_rows == 1 and summary.solutions == len(SLOW_PROBLEMS) - 1
    [rejected] = pq.read_table(out / "rejected").to_pylist()
    assert rejected["problem_id"] == "q1" and "checker timed out" in rejected["reason"]
    def content(rows):  # the inputs differ in row 1, so do the config hash and unit id
        return sorted(({k: v for k, v in row.items() if k not in ("unit_id", "config_hash")} for row in rows), key=str)

    assert content(labels_of(out)) == content(row for row in labels_of(tmp_path / "clean") if row["problem_id"] != "q1")
    [failed] = [unit for unit in json.loads((out / "manifest.json").read_text())["units"] if unit["stats"].get("failure")]
    assert not failed["stats"].get("transient")  # the row's fault, not the machine's: --retry-rejected redoes it
    assert label_slow(slow_dataset(tmp_path, {1}), out, SlowChecker(checker)).units_run_now == 0


def test_poison_rows_in_the_first_three_units_are_bisected_not_taken_for_a_broken_setup(dataset, tmp_path, checker, capfd):
    """One bad row in each of units 0, 1 and 2: the first three units fail with none labelled, but their
    halves are tried before the job is called broken, and their good halves are labelled."""
    bad = ("What is 2 minus 1?", "What is 6 minus 1?", "What is 10 minus 1?")
    summary = label(dataset, tmp_path / "out", checker, lambda: PoisonedGenerator(PROBLEMS, bad), retries=0, shard_size=4)
    assert summary.solutions == len(PROBLEMS) - 3 and summary.rejected_rows == 3
    assert sorted(r["problem_id"] for r in pq.read_table(tmp_path / "out" / "rejected").to_pylist()) == ["q0", "q4", "q8"]


def test_a_bisection_that_rejects_nothing_commits_the_unit_as_labelled_and_says_it_was_bisected(dataset, tmp_path, checker):
    """A passing failure outlasts the unit's retries; every piece of it is then labelled: nothing failed, so
    the unit is no failed unit (a --retry-rejected would redo it for nothing), its stats say it was bisected."""

    class Flaky(ScriptedGenerator):
        left = 2

        def generate(self, requests, sampling):
            if Flaky.left:
                Flaky.left -= 1
                raise RuntimeError("CUDA error: a passing hiccup")
            return super().generate(requests, sampling)

    clean = tmp_path / "clean"
    label(dataset, clean, checker, lambda: ScriptedGenerator(PROBLEMS), shard_size=12)
    out = tmp_path / "out"
    summary = label(dataset, out, checker, lambda: Flaky(PROBLEMS), retries=1, shard_size=12)
    assert summary.rejected_rows == 0 and summary.solutions == len(PROBLEMS)
    [unit] = json.loads((out / "manifest.json").read_text())["units"]
    assert "failure" not in unit["stats"] and "passing hiccup" in unit["stats"]["bisected"]
    assert job_status(str(out))["units_failed"] == 0
    assert labels_of(out) == labels_of(clean)


def test_status_counts_the_rows_rejected_while_labelling_apart_from_the_labelled(dataset, tmp_path, checker):
    out = tmp_path / "out"
    label(dataset, out, checker, lambda: PoisonedGenerator(PROBLEMS), retries=0, shard_size=4)
    status = job_status(str(out))
    assert status["rejected_in_units"] == 1
    rows = format_status(status).splitlines()[2]
    assert "12/12 input rows labelled or rejected" in rows and "1 rows or solutions rejected while labelling (in rejected/)" in rows, rows


def test_status_of_failed_units_names_only_what_their_command_can_do(dataset, tmp_path, checker):
    out = tmp_path / "out"
    label(dataset, out, checker, lambda: PoisonedGenerator(PROBLEMS), retries=0, shard_size=4)
    status = job_status(str(out))
    assert "--retry-rejected labels them again" in format_status(status)
    imported = format_status({**status, "job": "import"})  # labeler import has no --retry-rejected
    assert "--retry-rejected" not in imported and "import them into a new output" in imported


def test_a_piece_of_a_unit_bisected_for_another_error_keeps_the_timeout_floor(tmp_path, checker, capfd):
    """Unit 0 (rows 0-3) is bisected because row 0 breaks the engine; row 2's final answer times out once,
    well under --max-timeout-share with its floor of 8. Its piece is judged like any unit, so row 2 is
    labelled: only a unit bisected for its timeouts has its pieces judged without the floor."""
    from tests.fakes import SlowChecker

    rows = [
        {"id": f"q{k}", "problem": p, "answer": a,
         "steps": [f"Take 1 from {k + 2}.", "Then more.", f"The answer is: {a}" + (" SLOW!" if k == 2 else "")]}
        for k, (p, a) in enumerate(SLOW_PROBLEMS.items())
    ]  # fmt: skip
    dataset = write_jsonl(tmp_path / "in.jsonl", rows)
    # 2 rollouts: a piece of rows 2-3 has 10 checks, so its one timeout is over 5% of them (but under the floor)
    config = LabelConfig(input=str(dataset), output=str(tmp_path / "out"), model="scripted", rollouts=2, shard_size=4, seed=5)
    row_0 = ("What is 2 minus 1?",)
    executor = LocalExecutor(lambda: PoisonedGenerator(SLOW_PROBLEMS, row_0), SlowChecker(checker), max_unit_retries=0)
    summary = run_job(config, executor=executor, model_info={"name": "scripted"}, progress_enabled=True)
    assert "labelled in two halves" in capfd.readouterr().err
    [rejected] = pq.read_table(tmp_path / "out" / "rejected").to_pylist()
    assert rejected["problem_id"] == "q0" and "choked" in rejected["reason"]
    assert summary.rejected_rows == 1 and summary.solutions == len(SLOW_PROBLEMS) - 1
    [row2] = [row for row in labels_of(tmp_path / "out") if row["problem_id"] == "q2"]
    assert row2["n_timeouts"][-1] == 1  # counted apart, not a wrong answer


def test_a_poison_row_in_a_one_row_unit_is_rejected_alone(dataset, tmp_path, checker):
    """Shard size 1, row 0 poisoned: it fails alone and is rejected with the reason; the other rows are labelled."""
    row_0 = ("What is 2 minus 1?",)
    summary = label(dataset, tmp_path / "out", checker, lambda: PoisonedGenerator(PROBLEMS, row_0), retries=0, shard_size=1)
    assert summary.solutions == len(PROBLEMS) - 1 and summary.rejected_rows == 1
    assert [r["problem_id"] for r in pq.read_table(tmp_path / "out" / "rejected").to_pylist()] == ["q0"]


class OverloadedOnRowOne:
    """The real checker, but the machine is overloaded from the moment row 1 (reference "2") is checked alone, in
    a piece of its own: from then on every check times out, easy ones too, as a sick checker's do."""

    def __init__(self, inner):
        self.inner, self.overloaded = inner, False

    def describe(self) -> dict:  # the same checker as the rerun's, overloaded for a while
        return self.inner.describe()

    def check_many(self, pairs, questions=None):
        from labeler.checking import CheckResult, Verdict

        pairs = list(pairs)
        self.overloaded = self.overloaded or all(reference == "2" for _, reference in pairs)
        if self.overloaded:
            return [CheckResult(Verdict.TIMEOUT, None) for _ in pairs]
        return self.inner.check_many(pairs, questions)


def test_a_checker_gone_sick_in_a_piece_stops_the_job_and_writes_off_no_row(dataset, tmp_path, checker, capfd):
    """(8 rollouts: a row's piece has 9 checks, over the floor of 8 timeouts.) Unit 0 (rows 0-3) is bisected for its
    poison row 0; while row 1's piece is checked the checker goes sick (every check times out, a check of easy
    answers right after too). That is the machine's failure, decided for that piece alone: the job stops
    (CheckerSickError), unit 0 uncommitted, row 1 not in rejected/ though other pieces of its unit were labelled
    meanwhile. A plain rerun on a healthy checker labels row 1 once and rejects row 0 alone, for its own fault."""
    from labeler.labeling.checker_watch import CheckerSickError

    clean = tmp_path / "clean"
    label(dataset, clean, checker, lambda: ScriptedGenerator(PROBLEMS), shard_size=4, rollouts=8)
    out = tmp_path / "out"
    row_0 = ("What is 2 minus 1?",)
    with pytest.raises(CheckerSickError, match="easy answers"):
        label(dataset, out, OverloadedOnRowOne(checker), lambda: PoisonedGenerator(PROBLEMS, row_0), retries=0, shard_size=4, rollouts=8)
    status = job_status(str(out))
    assert status["units_committed"] == 2 and status["units_failed"] == 0  # units 1-2 labelled first; unit 0 left for a plain rerun
    assert not (out / "rejected").exists() or pq.read_table(out / "rejected").num_rows == 0
    capfd.readouterr()

    rerun = label(dataset, out, checker, lambda: PoisonedGenerator(PROBLEMS, row_0), retries=0, shard_size=4, rollouts=8)  # no --retry-rejected
    assert rerun.units_run_now == 1 and rerun.rejected_rows == 1 and [row["problem_id"] for row in pq.read_table(out / "rejected").to_pylist()] == ["q0"]
    assert labels_of(out) == [row for row in labels_of(clean) if row["problem_id"] != "q0"]  # row 1 once, as a clean run labels it
    assert label(dataset, out, checker, lambda: PoisonedGenerator(PROBLEMS, row_0), retries=0, shard_size=4, rollouts=8).units_run_now == 0